// Command deadline serves HTTP requests whose deadlines are kept by a
// timingwheel hierarchy instead of a runtime timer each: a net/http server
// on 127.0.0.1 (a random port) derives every request's context with
// wheelctx.WithTimeout(h, r.Context(), timeout), and its handler does simulated work
// that gives up when the context is done.
//
//	go run ./examples/deadline
//
// Clients ask for work shorter than the timeout (the fast path: 200 OK) and
// longer (the timed-out path: 504 Gateway Timeout once the deadline
// passes). The server measures, for every timed-out request, how long after
// the context was made its Done channel closed; the program prints a report
// and exits with status 1 if any request timed out before the timeout, or
// if the answers are not what the work asked for.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/internal/demo"
	"github.com/timingwheel/timingwheel/wheelctx"
)

// usage is what -help says before the flags.
const usage = "Serves HTTP on 127.0.0.1 with request deadlines from timingwheel's\n" +
	"wheelctx.WithTimeout, sends it fast and slow requests, and reports."

func main() {
	cfg := defaultConfig()
	fs := demo.NewFlagSet("deadline", os.Stderr, usage)
	fs.IntVar(&cfg.Requests, "requests", cfg.Requests, "number of requests, half fast and half slow")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "requests in flight at once")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "each request's deadline, from when its handler starts")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if cfg.Requests < 2 || cfg.Clients < 1 || cfg.Timeout <= 0 {
		fmt.Fprintln(os.Stderr, "deadline: -requests must be at least 2, -clients at least 1, -timeout positive")
		os.Exit(2)
	}
	rep, err := run(cfg)
	demo.ExitOnError("deadline", err)
	rep.print(os.Stdout)
	if demo.PrintProblems("deadline: FAIL:", rep.problems()) {
		os.Exit(1)
	}
}

// config is what run needs; main fills it from the flags.
type config struct {
	Requests int
	Clients  int
	Timeout  time.Duration
}

func defaultConfig() config {
	return config{Requests: 400, Clients: 50, Timeout: 200 * time.Millisecond}
}

// report is what run saw.
type report struct {
	Timeout        time.Duration
	Requests       int
	Fast, TimedOut int           // 200 OK, 504 Gateway Timeout
	Other          []string      // any other answer, or a failed request
	WrongPath      int           // slow work did not time out, or fast work timed out while its own timer had time to fire
	Stalled        int           // fast work timed out because the machine held its handler up past the deadline (not the deadline's fault)
	Earliest       time.Duration // the earliest a timed-out request's context was done
	Latest         time.Duration
	Wall           time.Duration
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "requests   %d in %v\n", r.Requests, r.Wall.Round(time.Millisecond))
	fmt.Fprintf(w, "fast       %d (200 OK)\n", r.Fast)
	fmt.Fprintf(w, "timed out  %d (504), Done closed %v to %v after the context was made (timeout %v)\n",
		r.TimedOut, r.Earliest.Round(10*time.Microsecond), r.Latest.Round(10*time.Microsecond), r.Timeout)
	if r.Stalled > 0 {
		fmt.Fprintf(w, "stalled    %d fast requests timed out: the machine held their handlers up past the deadline\n", r.Stalled)
	}
	if len(r.Other) > 0 {
		fmt.Fprintf(w, "other      %d, first: %s\n", len(r.Other), r.Other[0])
	}
}

// problems lists what should not have happened.
func (r *report) problems() []string {
	var p []string
	if r.TimedOut > 0 && r.Earliest < r.Timeout {
		p = append(p, fmt.Sprintf("a request timed out %v after its context was made, before the %v timeout", r.Earliest, r.Timeout))
	}
	if r.Fast+r.TimedOut+r.Stalled != r.Requests {
		p = append(p, fmt.Sprintf("%d of %d requests were neither fast nor timed out: %v", r.Requests-r.Fast-r.TimedOut-r.Stalled, r.Requests, r.Other))
	}
	if r.WrongPath > 0 {
		p = append(p, fmt.Sprintf("%d requests took the wrong path (fast work timed out, or slow work did not)", r.WrongPath))
	}
	if r.Fast == 0 || r.TimedOut == 0 {
		p = append(p, fmt.Sprintf("want both paths taken, got %d fast and %d timed out", r.Fast, r.TimedOut))
	}
	return p
}

// server is the HTTP handler: each request gets a deadline from h.
type server struct {
	h       *timingwheel.Hierarchy
	timeout time.Duration

	mu      sync.Mutex
	doneAts []time.Duration // for each timed-out request, when its context was done
}

// ServeHTTP works for the duration in the "work" query parameter, or until
// the request's deadline, whichever comes first.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	work, err := time.ParseDuration(r.URL.Query().Get("work"))
	if err != nil {
		http.Error(w, "bad work duration", http.StatusBadRequest)
		return
	}
	start := time.Now() // before the context: its deadline is after start+timeout
	ctx, cancel := wheelctx.WithTimeout(s.h, r.Context(), s.timeout)
	defer cancel()
	if err := doWork(ctx, work); err != nil {
		doneAt := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) {
			// The client went away (r.Context() was cancelled): nobody
			// reads this, but the report would count it.
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		s.mu.Lock()
		s.doneAts = append(s.doneAts, doneAt)
		s.mu.Unlock()
		if work < s.timeout && doneAt >= s.timeout {
			// The work's own timer (work, well before the deadline) had
			// not woken this handler when the deadline passed: the machine
			// held it up, and the deadline came as it should.
			w.Header().Set("X-Stalled", "1")
		}
		http.Error(w, "deadline exceeded after "+doneAt.String(), http.StatusGatewayTimeout)
		return
	}
	fmt.Fprintln(w, "done in", time.Since(start))
}

// doWork stands for work that respects ctx: a database query, a call to
// another service. It returns ctx's error if ctx is done first.
func doWork(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		// When both are ready, select picks either: work that ended after
		// the deadline is late all the same.
		return context.Cause(ctx)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// run serves on 127.0.0.1, sends the requests, and reports.
func run(cfg config) (*report, error) {
	h, ln, err := demo.StartServing()
	if err != nil {
		return nil, err
	}
	defer h.Stop()
	s := &server{h: h, timeout: cfg.Timeout}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	client := &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Clients},
		Timeout:   cfg.Timeout + 10*time.Second,
	}
	defer client.CloseIdleConnections()
	base := "http://" + ln.Addr().String() + "/?work="

	rep := &report{Timeout: cfg.Timeout, Requests: cfg.Requests}
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range cfg.Clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.Requests {
					return
				}
				// Even requests are fast: a tenth of the timeout; odd ones
				// would take five times the timeout.
				work, slow := cfg.Timeout/10, i%2 == 1
				if slow {
					work = 5 * cfg.Timeout
				}
				status, stalled, err := get(client, base+work.String())
				mu.Lock()
				switch {
				case err != nil:
					rep.Other = append(rep.Other, err.Error())
				case status == http.StatusOK:
					rep.Fast++
					if slow {
						rep.WrongPath++
					}
				case status == http.StatusGatewayTimeout && !slow && stalled:
					rep.Stalled++
				case status == http.StatusGatewayTimeout:
					rep.TimedOut++
					if !slow {
						rep.WrongPath++
					}
				default:
					rep.Other = append(rep.Other, http.StatusText(status))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	rep.Wall = time.Since(start)

	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.doneAts) > 0 {
		rep.Earliest, rep.Latest = slices.Min(s.doneAts), slices.Max(s.doneAts)
	}
	return rep, nil
}

// get fetches url and returns the status code, and whether the server
// said the machine held the handler up past its deadline.
func get(client *http.Client, url string) (int, bool, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Stalled") != "", err
}
