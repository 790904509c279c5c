package timingwheel

import (
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// A deadline already past fires on the next Advance (API.md 1), also when
// the clock sits between two ticks and the deadline lies within the tick
// the clock is in, where rounding it up would make it wait for the next
// tick boundary. Found by an outside review: before the fix none of these
// ran until the clock reached 2ms.
func TestGuarantee1_PastDeadlineBetweenTicks(t *testing.T) {
	mock := clock.NewMock()
	h, err := New(WithClock(mock), WithShards(2))
	if err != nil {
		t.Fatal(err)
	}
	mock.Add(1500 * time.Microsecond) // between the ticks at 1ms and 2ms
	now := mock.Now()
	tickStart := h.origin.Add(time.Millisecond)
	ran := map[string]bool{}
	arm := func(name string) func() { return func() { ran[name] = true } }

	t0 := h.AfterFunc(0, arm("AfterFunc(0)"))
	t1 := h.AfterFunc(-100*time.Microsecond, arm("AfterFunc(-100µs)"))
	t2 := h.AtFunc(now.Add(-time.Microsecond), arm("AtFunc(now-1µs)"))
	t3 := h.AtFunc(now.Add(-time.Hour), arm("AtFunc(now-1h)"))
	var v Timer
	v.Init(h, arm("Init+Reset(0)"))
	v.Reset(0)
	s := NewTimeouts(h, func(k string) { ran["Timeouts.Add("+k+", 0)"] = true })
	s.Add("k", 0)
	// Not past: a deadline later within this tick, and ResetAt, which does
	// not read the clock (documented), wait for the tick boundary.
	h.AfterFunc(100*time.Microsecond, arm("AfterFunc(+100µs)"))
	var r Timer
	r.Init(h, arm("ResetAt(now-1µs)"))
	r.ResetAt(now.Add(-time.Microsecond))

	for _, c := range []struct {
		name string
		t    *Timer
		want time.Time
	}{
		{"AfterFunc(0)", t0, tickStart},
		{"AfterFunc(-100µs)", t1, tickStart},
		{"AtFunc(now-1µs)", t2, tickStart},
		{"AtFunc(now-1h)", t3, now.Add(-time.Hour)}, // before the tick: kept as is
		{"Init+Reset(0)", &v, tickStart},
		{"ResetAt(now-1µs)", &r, now.Add(-time.Microsecond)},
	} {
		if got := c.t.Deadline(); !got.Equal(c.want) {
			t.Errorf("%s: Deadline = %v, want %v", c.name, got, c.want)
		}
	}
	if d, ok := s.Deadline("k"); !ok || !d.Equal(tickStart) {
		t.Errorf("Timeouts.Deadline = %v, %v; want %v, true", d, ok, tickStart)
	}
	if next, ok := h.Next(); !ok || next.After(now) {
		t.Errorf("Next = %v, %v; want a time not after now (%v): timers are due", next, ok, now)
	}

	if n := advanceWithin(t, h, "the timers armed in the past"); n != 6 {
		t.Errorf("Advance ran %d callbacks, want 6", n)
	}
	for _, name := range []string{"AfterFunc(0)", "AfterFunc(-100µs)", "AtFunc(now-1µs)", "AtFunc(now-1h)", "Init+Reset(0)", "Timeouts.Add(k, 0)"} {
		if !ran[name] {
			t.Errorf("%s, armed 1.5ms after the origin: not run by the next Advance", name)
		}
	}
	for _, name := range []string{"AfterFunc(+100µs)", "ResetAt(now-1µs)"} {
		if ran[name] {
			t.Errorf("%s ran before the clock reached its tick (2ms)", name)
		}
	}
	mock.Add(500 * time.Microsecond) // 2ms
	if n := advanceWithin(t, h, "the next tick"); n != 2 || !ran["AfterFunc(+100µs)"] || !ran["ResetAt(now-1µs)"] {
		t.Errorf("at 2ms Advance ran %d callbacks, want the 2 due at that tick", n)
	}
	if h.Len() != 0 || s.Len() != 0 {
		t.Errorf("Len = %d, Timeouts.Len = %d; want 0, 0", h.Len(), s.Len())
	}
}
