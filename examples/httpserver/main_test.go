package main

import (
	"testing"
	"time"

	"github.com/timingwheel/timingwheel/internal/demotest"
)

// TestRun runs the program's server and client with a short idle and
// timeout: a slow handler and a stream complete, a request past its
// deadline gets 504, and the keep-alive conn is closed once idle, never
// before.
func TestRun(t *testing.T) {
	// The slow handler works 3×Idle: Timeout must leave it room, or the
	// deadline and the work race (Timeout 3×Idle failed 1 run in 4). Idle
	// is also how long the client may take between two requests on its
	// keep-alive conn: at 100ms a client starved on a loaded machine (load
	// average 25) lost its conn to a correct idle close 4 runs in 30.
	rep, err := demotest.Within(t, 30*time.Second, "run", func() (*report, error) {
		return run(config{Idle: 250 * time.Millisecond, Timeout: 1200 * time.Millisecond})
	})
	if err != nil {
		t.Fatal(err)
	}
	demotest.LogReport(t, rep.print, rep.Problems)
	if len(rep.Lines) != 5 {
		t.Errorf("%d checks passed, want 5", len(rep.Lines))
	}
}
