package timingwheel_test

// The shapes of the snippets that users copy from README.md and the godoc,
// run with the real clock and the driver (under -race in CI), where a
// callback runs on another goroutine as soon as its timer is due. The
// examples run them on a Mock, on the test's own goroutine, where a data
// race between the arming and the callback cannot show.

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel"
)

// TestSnippet_HeldPeriodicTimerStopsItselfWithTheDriver is README's
// periodic timer (ExampleHierarchy_Every): bound by Init, armed by
// ResetEvery, stopped from its own callback at the third run.
func TestSnippet_HeldPeriodicTimerStopsItselfWithTheDriver(t *testing.T) {
	h := timingwheel.NewStarted(t)
	defer h.Stop()
	var (
		mu      sync.Mutex
		runs    int
		stopped bool
		third   = make(chan struct{})
	)
	var tm timingwheel.Timer
	tm.Init(h, func() {
		mu.Lock()
		defer mu.Unlock()
		runs++
		_ = tm.Deadline() // the callback uses its timer, as the README's does
		if runs == 3 {
			stopped = tm.Stop() // the next run is armed already: Stop from inside wins
			close(third)
		}
	})
	tm.ResetEvery(time.Millisecond)
	timingwheel.RecvWithin(t, 10*time.Second, third, "the third run")
	time.Sleep(5 * time.Millisecond) // room for a run that should not come
	mu.Lock()
	defer mu.Unlock()
	if runs != 3 || !stopped {
		t.Errorf("runs = %d, Stop from the callback = %v; want 3 runs, stopped", runs, stopped)
	}
	if n := h.Len(); n != 0 {
		t.Errorf("Len = %d after the timer stopped itself", n)
	}
}

// TestSnippet_RetransmitTimerBacksOffWithTheDriver is Timer.Init's godoc
// shape: the callback resends and re-arms its own timer with a longer
// timeout, until the test acknowledges.
func TestSnippet_RetransmitTimerBacksOffWithTheDriver(t *testing.T) {
	h := timingwheel.NewStarted(t)
	defer h.Stop()
	type packet struct {
		mu      sync.Mutex
		rto     timingwheel.Timer
		timeout time.Duration
		sent    int
	}
	p := &packet{timeout: time.Millisecond}
	resent := make(chan struct{}, 16)
	resend := func() {
		p.sent++
		select {
		case resent <- struct{}{}:
		default:
		}
	}
	backoff := func() time.Duration { p.timeout *= 2; return p.timeout }
	p.rto.Init(h, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		resend()
		p.rto.Reset(backoff())
	})
	p.rto.Reset(p.timeout)
	for i := range 3 {
		timingwheel.RecvWithin(t, 10*time.Second, resent, fmt.Sprintf("resend %d", i+1))
	}
	p.rto.Stop() // the acknowledgement
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sent < 3 || p.timeout < 8*time.Millisecond {
		t.Errorf("sent %d times, timeout %v; want 3 or more, backed off to 8ms or more", p.sent, p.timeout)
	}
}
