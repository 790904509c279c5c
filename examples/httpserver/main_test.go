package main

import (
	"strings"
	"testing"
	"time"
)

// TestRun runs the program's server and client with a short idle and
// timeout: a slow handler and a stream complete, a request past its
// deadline gets 504, and the keep-alive conn is closed once idle, never
// before.
func TestRun(t *testing.T) {
	done := make(chan struct{})
	var rep *report
	var err error
	go func() {
		defer close(done)
		rep, err = run(config{Idle: 100 * time.Millisecond, Timeout: 300 * time.Millisecond})
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("hung: run did not return within 30s")
	}
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.print(&out)
	t.Log("\n" + out.String())
	for _, p := range rep.Problems {
		t.Error(p)
	}
	if len(rep.Lines) != 5 {
		t.Errorf("%d checks passed, want 5", len(rep.Lines))
	}
}
