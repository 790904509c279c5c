package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/timingwheel/timingwheel"
)

// scrape GETs url, within 10 s, and returns the body.
func scrape(t *testing.T, url string) string {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s\n%s", url, resp.Status, body)
	}
	return string(body)
}

// TestCollector_ScrapedOverHTTPShowsTheStats scrapes the collector of a
// hierarchy on a Mock, over HTTP on 127.0.0.1, after two timers fired 15 ms
// and 5 ms late, one was stopped and one is pending, and finds each metric
// with its value and type.
func TestCollector_ScrapedOverHTTPShowsTheStats(t *testing.T) {
	mock := clock.NewMock()
	h, err := timingwheel.New(timingwheel.WithClock(mock))
	if err != nil {
		t.Fatal(err)
	}
	h.AfterFunc(10*time.Millisecond, func() {})
	h.AfterFunc(20*time.Millisecond, func() {})
	h.AfterFunc(time.Minute, func() {}).Stop()
	h.AfterFunc(time.Hour, func() {})
	mock.Add(25 * time.Millisecond)
	if n := h.Advance(); n != 2 {
		t.Fatalf("Advance ran %d callbacks, want 2", n)
	}

	c := newCollector(h, prometheus.Labels{"wheel": "test"})
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	body := scrape(t, srv.URL)

	for _, want := range []string{
		"# TYPE timingwheel_timers_pending gauge",
		`timingwheel_timers_pending{wheel="test"} 1`,
		"# TYPE timingwheel_timers_started_total counter",
		`timingwheel_timers_started_total{wheel="test"} 4`,
		"# TYPE timingwheel_timers_fired_total counter",
		`timingwheel_timers_fired_total{wheel="test"} 2`,
		"# TYPE timingwheel_timers_stopped_total counter",
		`timingwheel_timers_stopped_total{wheel="test"} 1`,
		"# TYPE timingwheel_callback_lateness_p99_seconds gauge",
		// 5 ms is in the bucket below 8.192 ms; 15 ms is the largest, a cap.
		`timingwheel_callback_lateness_p50_seconds{wheel="test"} 0.008192`,
		`timingwheel_callback_lateness_p90_seconds{wheel="test"} 0.015`,
		`timingwheel_callback_lateness_p99_seconds{wheel="test"} 0.015`,
		`timingwheel_callback_lateness_p999_seconds{wheel="test"} 0.015`,
		`timingwheel_callback_lateness_max_seconds{wheel="test"} 0.015`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("no line %q in the scrape:\n%s", want, body)
		}
	}
}

// TestRun_ServesTheMetricsOfItsLoad runs the command on 127.0.0.1 and
// scrapes it until its load has fired timers, then stops it.
func TestRun_ServesTheMetricsOfItsLoad(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrs := make(chan net.Addr, 1)
	ran := make(chan error, 1)
	go func() { ran <- run(ctx, "127.0.0.1:0", func(a net.Addr) { addrs <- a }) }()
	var addr net.Addr
	select {
	case addr = <-addrs:
	case err := <-ran:
		t.Fatalf("run returned before serving: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not listen within 10 s")
	}
	url := "http://" + addr.String() + "/metrics"
	for deadline := time.Now().Add(10 * time.Second); ; {
		if fired(t, scrape(t, url)) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no timer fired within 10 s of load")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return within 10 s of its context's end")
	}
}

// fired reads timingwheel_timers_fired_total from a scrape.
func fired(t *testing.T, body string) float64 {
	t.Helper()
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(line, "timingwheel_timers_fired_total "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no timingwheel_timers_fired_total in the scrape:\n%s", body)
	return 0
}
