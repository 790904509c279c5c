package main

import (
	"testing"
	"time"

	"github.com/timingwheel/timingwheel/internal/demotest"
	"github.com/timingwheel/timingwheel/netidle"
)

// TestReaderJudgesIdleCloseFromServersLastRead pins the measure TestRun's
// early-close check rests on: the reader counts an idle close early when
// it came less than Timeout after the server last read data from the
// socket, and not when it came later. The wheel closes the conn after
// 100ms of read silence; judged against a Timeout of an hour that close is
// early, against one of 100ms it is not.
func TestReaderJudgesIdleCloseFromServersLastRead(t *testing.T) {
	h := demotest.StartHierarchy(t)
	for _, tc := range []struct {
		timeout time.Duration
		early   bool
	}{{time.Hour, true}, {100 * time.Millisecond, false}} {
		cl, c := demotest.ConnPair(t)
		s := &server{cfg: config{Timeout: tc.timeout}, base: time.Now(), h: h}
		tp := &tap{Conn: c, s: s, lastRead: s.since()}
		sc := &sconn{c: netidle.Conn(h, tp, 100*time.Millisecond), tap: tp}
		if _, err := cl.Write([]byte("hb\n")); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { defer close(done); s.reader(sc) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("hung: the wheel did not close a conn idle for 100ms within 30s")
		}
		cl.Close()
		if !sc.idle {
			t.Fatalf("Timeout %v: the reader did not see an idle close", tc.timeout)
		}
		if sc.early != tc.early {
			t.Errorf("Timeout %v: a close %v after the server's last read judged early = %v, want %v",
				tc.timeout, time.Duration(sc.closedAt-tp.lastRead), sc.early, tc.early)
		}
		if sc.heartbeats != 1 {
			t.Logf("Timeout %v: the server read %d heartbeats before the close (the machine is slow); judged from the accept", tc.timeout, sc.heartbeats)
		}
	}
}
