// Command httpserver is a net/http server whose keep-alive conns are closed
// by a timingwheel hierarchy once idle between requests, and whose requests
// have deadlines on the same hierarchy:
//
//	go run ./examples/httpserver
//
// The listener is netidle.Listener(h, ln, idle); the server's ConnState hook
// pauses a conn's idle close while it serves a request (StateActive) and
// resumes it when the conn waits for the next (StateIdle), so that a
// handler slower than idle, or a response streamed to a client that sends
// nothing, is never cut; each request's context is wheelctx.WithTimeout(h, …,
// timeout). A client on the same process then asks for a slow response, a
// streamed one and a fast one on one keep-alive conn, waits longer than
// idle, and checks that the server closed the conn (and not before idle),
// and that a request longer than its timeout gets 504. The program prints
// what it saw and exits with status 1 if anything is not as it should be.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/internal/demo"
	"github.com/timingwheel/timingwheel/netidle"
	"github.com/timingwheel/timingwheel/wheelctx"
)

func main() {
	rep, err := run(config{Idle: 200 * time.Millisecond, Timeout: time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "httpserver:", err)
		os.Exit(2)
	}
	rep.print(os.Stdout)
	if len(rep.Problems) > 0 {
		os.Exit(1)
	}
}

type config struct {
	Idle    time.Duration // the keep-alive conns' idle close
	Timeout time.Duration // each request's deadline
}

// report is what the client saw.
type report struct {
	Lines    []string
	Problems []string
}

func (r *report) saw(format string, args ...any) {
	r.Lines = append(r.Lines, fmt.Sprintf(format, args...))
}
func (r *report) bad(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

func (r *report) print(w io.Writer) {
	for _, l := range r.Lines {
		fmt.Fprintln(w, l)
	}
	for _, p := range r.Problems {
		fmt.Fprintln(w, "PROBLEM:", p)
	}
}

// server is the HTTP server behind the idle listener.
type server struct {
	h       *timingwheel.Hierarchy
	cfg     config
	mu      sync.Mutex
	idleAt  map[net.Conn]time.Time // when each conn last went idle, on h's clock
	closedC chan time.Duration     // how long after going idle a conn was closed
}

func (s *server) connState(c net.Conn, st http.ConnState) {
	ic, ok := netidle.ControlOf(c) // also under a *tls.Conn, with ServeTLS
	if !ok {
		return
	}
	switch st {
	case http.StateActive:
		ic.Pause() // serving a request: however slow, not idle
	case http.StateIdle:
		ic.Resume() // waiting for the next request: idle counts from now
		s.mu.Lock()
		s.idleAt[c] = s.h.Now()
		s.mu.Unlock()
	case http.StateClosed:
		s.mu.Lock()
		at, ok := s.idleAt[c]
		delete(s.idleAt, c)
		s.mu.Unlock()
		if ok {
			s.closedC <- s.h.Now().Sub(at)
		}
	}
}

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	// /work?d=… works for d, giving up when the request's deadline passes.
	mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := wheelctx.WithTimeout(s.h, r.Context(), s.cfg.Timeout)
		defer cancel()
		d, err := time.ParseDuration(r.URL.Query().Get("d"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-time.After(d):
			fmt.Fprintf(w, "worked %v", d)
		case <-ctx.Done():
			http.Error(w, ctx.Err().Error(), http.StatusGatewayTimeout)
		}
	})
	// /stream sends 6 parts, idle/2 apart: longer than idle in all.
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		for i := range 6 {
			fmt.Fprintf(w, "part %d\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(s.cfg.Idle / 2)
		}
	})
	return mux
}

func run(cfg config) (*report, error) {
	h, ln, err := demo.StartServing()
	if err != nil {
		return nil, err
	}
	defer h.Stop()
	s := &server{h: h, cfg: cfg, idleAt: map[net.Conn]time.Time{}, closedC: make(chan time.Duration, 8)}
	srv := &http.Server{Handler: s.handler(), ConnState: s.connState, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(netidle.Listener(h, ln, cfg.Idle))
	defer srv.Close()

	rep := &report{}
	var dials atomic.Int32
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	base := "http://" + ln.Addr().String()
	get := func(path string) (int, string) {
		resp, err := client.Get(base + path)
		if err != nil {
			rep.bad("GET %s: %v", path, err)
			return 0, ""
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			rep.bad("GET %s: the body: %v", path, err)
		}
		return resp.StatusCode, string(b)
	}

	slow := 3 * cfg.Idle
	if code, body := get("/work?d=" + slow.String()); code != http.StatusOK {
		rep.bad("a handler slower than idle (%v): %d %q", slow, code, body)
	} else {
		rep.saw("a handler slower than idle: %d %q", code, body)
	}
	if code, body := get("/stream"); code != http.StatusOK || strings.Count(body, "part ") != 6 {
		rep.bad("a stream longer than idle: %d %q", code, body)
	} else {
		rep.saw("a stream longer than idle: %d, %d parts", code, strings.Count(body, "part "))
	}
	if code, _ := get("/work?d=" + (2 * cfg.Timeout).String()); code != http.StatusGatewayTimeout {
		rep.bad("work longer than the request's timeout: %d, want 504", code)
	} else {
		rep.saw("work longer than the request's timeout: %d", code)
	}
	if n := dials.Load(); n != 1 {
		rep.bad("%d dials for three requests: the keep-alive conn was not kept", n)
	}
	select {
	case after := <-s.closedC:
		if after < cfg.Idle {
			rep.bad("the keep-alive conn was closed %v after going idle, before idle (%v)", after, cfg.Idle)
		} else {
			rep.saw("the keep-alive conn, idle between requests, was closed %v after going idle (idle %v)", after.Round(time.Millisecond), cfg.Idle)
		}
	case <-time.After(cfg.Idle + 10*time.Second):
		rep.bad("the keep-alive conn was not closed within 10s after idle")
	}
	if code, _ := get("/work?d=1ms"); code != http.StatusOK || dials.Load() != 2 {
		rep.bad("after the idle close: %d with %d dials, want 200 on a new conn", code, dials.Load())
	} else {
		rep.saw("the next request dials again: %d", code)
	}
	return rep, nil
}
