package main

import (
	"strings"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel/internal/demotest"
)

// TestRun serves a few dozen requests with a short timeout and applies the
// checks of the program's exit status: both paths taken, each as its work
// asks, and no request timed out before its deadline.
func TestRun(t *testing.T) {
	// A fast request does a tenth of the timeout's work: it times out only
	// if its handler is held up for 90ms, which the server tells apart
	// (Stalled) from a deadline that came early (Earliest).
	cfg := config{Requests: 40, Clients: 10, Timeout: 100 * time.Millisecond}
	rep, err := demotest.Within(t, 30*time.Second, "run", func() (*report, error) { return run(cfg) })
	if err != nil {
		t.Fatal(err)
	}
	demotest.LogReport(t, rep.print, rep.problems())
	if rep.Stalled > 0 {
		t.Logf("%d fast requests timed out after the machine held their handlers up past the deadline (not a failure)", rep.Stalled)
	}
	if rep.Fast+rep.Stalled != cfg.Requests/2 || rep.TimedOut != cfg.Requests/2 {
		t.Errorf("%d fast (%d of them stalled past the deadline) and %d timed out, want %d each", rep.Fast+rep.Stalled, rep.Stalled, rep.TimedOut, cfg.Requests/2)
	}
}

// TestProblems checks that the report flags a request that timed out
// early, and answers that are neither path.
func TestProblems(t *testing.T) {
	ok := report{Timeout: time.Second, Requests: 2, Fast: 1, TimedOut: 1, Earliest: time.Second}
	if p := ok.problems(); len(p) != 0 {
		t.Errorf("problems() of a good run = %q, want none", p)
	}
	early := ok
	early.Earliest = time.Second - time.Microsecond
	if p := early.problems(); len(p) != 1 || !strings.Contains(p[0], "before the 1s timeout") {
		t.Errorf("problems() of an early timeout = %q, want one about it", p)
	}
	other := ok
	other.Fast, other.Other = 0, []string{"Internal Server Error"}
	if p := other.problems(); len(p) != 2 {
		t.Errorf("problems() with an error answer = %q, want two", p)
	}
}
