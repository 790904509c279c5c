// Command prometheus serves a timingwheel hierarchy's Stats as Prometheus
// metrics, with a Collector (collector.go) that reads h.Stats() at each
// scrape: pending timers, armed, fired and stopped counts, and quantiles of
// how late callbacks ran. It is a module of its own, so that the library
// does not depend on client_golang. From the repository:
//
//	cd examples/prometheus && go run . -for 1m
//	curl -s http://127.0.0.1:2112/metrics | grep '^timingwheel_'
//
// While it serves, it keeps the hierarchy busy: every 10 ms it arms 100
// timers of 1–100 ms and stops half of them before they fire.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/timingwheel/timingwheel"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:2112", "address to serve /metrics on")
	d := flag.Duration("for", 0, "stop after this long (0: until interrupted)")
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	if *d > 0 {
		ctx, cancel = context.WithTimeout(ctx, *d)
		defer cancel()
	}
	if err := run(ctx, *addr, func(a net.Addr) { log.Printf("serving http://%s/metrics", a) }); err != nil {
		fmt.Fprintln(os.Stderr, "prometheus:", err)
		os.Exit(1)
	}
}

// run serves the metrics of a busy hierarchy on addr until ctx is done,
// calling serving with the address once it listens.
func run(ctx context.Context, addr string, serving func(net.Addr)) error {
	h, err := timingwheel.New() // on the real clock, it drives itself
	if err != nil {
		return err
	}
	defer h.Stop()
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(h, nil))

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		load(ctx, h)
		srv.Close()
	}()
	serving(ln.Addr())
	err = srv.Serve(ln)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// load keeps timers on h until ctx is done: every 10 ms it arms 100 timers
// of 1–100 ms and stops every other one.
func load(ctx context.Context, h *timingwheel.Hierarchy) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for i := range 100 {
			t := h.AfterFunc(time.Duration(1+rand.IntN(100))*time.Millisecond, func() {})
			if i%2 == 0 {
				t.Stop()
			}
		}
	}
}
