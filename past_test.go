package timingwheel

import (
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// A deadline already past fires at an Advance, never inside the call that
// armed it (docs/guarantees.md, "Never early, at most one tick late"), and like every deadline it is due at due(D), D
// rounded up to the next tick: Advance at clock time T runs exactly the
// timers with due(D) <= T. So with the clock between two ticks, a deadline
// that passed within the tick the clock is in is due at the next tick
// boundary, whether it came from AfterFunc(0), a negative d, AtFunc,
// Reset(0), ResetAt or Timeouts.Add, and an Advance before that boundary
// does not run it; one before that tick runs on the next Advance. Deadline
// returns each deadline exactly as asked.
func TestFiring_PastDeadlineBetweenTicks(t *testing.T) {
	mock := clock.NewMock()
	h, err := New(WithClock(mock), WithShards(2))
	if err != nil {
		t.Fatal(err)
	}
	mock.Add(1500 * time.Microsecond) // between the ticks at 1ms and 2ms
	now := mock.Now()
	ran := map[string]bool{}
	arm := func(name string) func() { return func() { ran[name] = true } }

	t0 := h.AfterFunc(0, arm("AfterFunc(0)"))
	t1 := h.AfterFunc(-100*time.Microsecond, arm("AfterFunc(-100µs)"))
	t2 := h.AtFunc(now.Add(-time.Microsecond), arm("AtFunc(now-1µs)"))
	t3 := h.AtFunc(now.Add(-time.Hour), arm("AtFunc(now-1h)"))
	var v Timer
	v.Init(h, arm("Init+Reset(0)"))
	v.Reset(0)
	var r Timer
	r.Init(h, arm("ResetAt(now-1µs)"))
	r.ResetAt(now.Add(-time.Microsecond))
	s := NewTimeouts(h, func(k string) { ran["Timeouts.Add("+k+", 0)"] = true })
	s.Add("k", 0)
	h.AfterFunc(100*time.Microsecond, arm("AfterFunc(+100µs)"))
	if len(ran) != 0 {
		t.Fatalf("callbacks ran inside the calls that armed them: %v", ran)
	}

	for _, c := range []struct {
		name string
		t    *Timer
		want time.Time
	}{
		{"AfterFunc(0)", t0, now},
		{"AfterFunc(-100µs)", t1, now.Add(-100 * time.Microsecond)},
		{"AtFunc(now-1µs)", t2, now.Add(-time.Microsecond)},
		{"AtFunc(now-1h)", t3, now.Add(-time.Hour)},
		{"Init+Reset(0)", &v, now},
		{"ResetAt(now-1µs)", &r, now.Add(-time.Microsecond)},
	} {
		if got := c.t.Deadline(); !got.Equal(c.want) {
			t.Errorf("%s: Deadline = %v, want %v, the deadline asked for", c.name, got, c.want)
		}
	}
	if d, ok := s.Deadline("k"); !ok || !d.Equal(now) {
		t.Errorf("Timeouts.Deadline = %v, %v; want %v, true", d, ok, now)
	}
	if next, ok := h.Next(); !ok || next.After(now) {
		t.Errorf("Next = %v, %v; want a time not after now (the deadline an hour ago is due), true", next, ok)
	}

	// At 1.5ms only the deadline an hour ago is due (its tick is long past);
	// every other one is due at the 2ms tick.
	if n := advanceWithin(t, h, "the timers armed in the past, at 1.5ms"); n != 1 || !ran["AtFunc(now-1h)"] {
		t.Errorf("Advance at 1.5ms ran %d callbacks (%v), want only AtFunc(now-1h)", n, ran)
	}
	if next, ok := h.Next(); !ok || !next.Equal(h.origin.Add(2*time.Millisecond)) {
		t.Errorf("Next = %v, %v; want the tick at 2ms after the origin, true", next, ok)
	}
	mock.Add(400 * time.Microsecond) // 1.9ms: still before the 2ms tick
	if n := advanceWithin(t, h, "at 1.9ms"); n != 0 {
		t.Errorf("Advance at 1.9ms ran %d callbacks due at the 2ms tick: early", n)
	}
	mock.Add(100 * time.Microsecond) // 2ms
	if n := advanceWithin(t, h, "at the 2ms tick"); n != 7 {
		t.Errorf("Advance at 2ms ran %d callbacks, want the 7 due at that tick", n)
	}
	for _, name := range []string{"AfterFunc(0)", "AfterFunc(-100µs)", "AtFunc(now-1µs)", "Init+Reset(0)", "ResetAt(now-1µs)", "Timeouts.Add(k, 0)", "AfterFunc(+100µs)"} {
		if !ran[name] {
			t.Errorf("%s, armed 1.5ms after the origin: not run at the 2ms tick", name)
		}
	}
	if h.Len() != 0 || s.Len() != 0 {
		t.Errorf("Len = %d, Timeouts.Len = %d; want 0, 0", h.Len(), s.Len())
	}
}
