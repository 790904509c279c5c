package wheeltest

import (
	"fmt"
	"time"

	"github.com/timingwheel/timingwheel"
)

// maxAdvancesAtOneInstant bounds the Advances AdvanceTo makes at one
// instant while each finds more work due there; see AdvanceTo. A variable
// only so that the package's test can lower it.
var maxAdvancesAtOneInstant = 1 << 16

// AdvanceTo moves c to t step by step, advancing h at each step as h's
// driver would if c were the real clock, and returns the number of
// callbacks run (the sum of what each [timingwheel.Hierarchy.Advance]
// returned). It first advances h at c's reading, which fires what is due
// already (a deadline in the past); then, as long as
// [timingwheel.Hierarchy.Next] reports an instant no later than t, it sets c
// to that instant and advances h there; last it sets c to t and advances
// h once more. Next may be early — the tick a coarse slot of h cascades,
// before the timers in it are due — so the walk also stops there, as the
// driver does, and nothing fires at such a stop. So every tick with work
// on the way is advanced at, in order, each callback sees c at its own tick (c.Now() is the instant its
// timer was due, rounded up to the tick), and periodic timers run once per
// period: AdvanceTo(h, c, c.Now().Add(time.Hour)) runs an Every(time.Second)
// timer 3,600 times, where c.Add(time.Hour) and one Advance would run it
// once. A timer that a callback arms during the walk is found by the next
// Next and fired at its own tick if that is no later than t; one armed
// for a tick already reached (a deadline in the past, Reset(0)) fires at
// the same instant, by another Advance there, as the driver would fire it.
//
// AdvanceTo never stops early and does not skip: it returns only once c
// reads t and h has nothing due at t. It panics instead, with a message
// saying why, if
//   - h or c is nil;
//   - h does not read c (h was not made with [timingwheel.WithClock](c));
//   - t is before c's reading: AdvanceTo does not move a clock back (use
//     [Clock.Set] or [Clock.Add], then Advance or AdvanceTo, to test a
//     clock that steps back);
//   - c was moved by someone else (a callback, another goroutine) while
//     AdvanceTo walked it: the walk would no longer be a driver's;
//   - callbacks keep arming timers already due at one instant, 65,536
//     Advances in a row there (a callback that re-arms its own timer with
//     Reset(0) loops forever, as it would under the driver).
//
// h must not be driven by anything else meanwhile: no
// [timingwheel.Hierarchy.Start] (the driver does not run on a Clock), no
// Advance from another goroutine. Callbacks run on the caller's goroutine,
// inside AdvanceTo, one Advance at a time; they may arm, re-arm and stop
// timers of h, but not call Advance or AdvanceTo on h (guarantee 5 of
// package timingwheel).
func AdvanceTo(h *timingwheel.Hierarchy, c *Clock, t time.Time) int {
	if h == nil {
		panic("wheeltest: AdvanceTo called with a nil Hierarchy")
	}
	if c == nil {
		panic("wheeltest: AdvanceTo called with a nil Clock")
	}
	now := c.Now()
	if got, want := h.Elapsed(), c.Now().Sub(h.Origin()); got != want {
		panic(fmt.Sprintf("wheeltest: AdvanceTo: the hierarchy does not read this Clock (it reads %v since its origin %v, the Clock %v); make it with timingwheel.WithClock(c)",
			got, h.Origin(), want))
	}
	if t.Before(now) {
		panic(fmt.Sprintf("wheeltest: AdvanceTo(%v) is before the Clock's reading %v; AdvanceTo does not move a clock back: use c.Set or c.Add, then Advance or AdvanceTo",
			t, now))
	}
	n, again := 0, 0
	for {
		n += h.Advance()
		next, ok := h.Next()
		if ok && !next.After(now) {
			// A callback armed a timer for a tick already reached: it
			// fires at the next Advance, which the driver makes at once.
			if again++; again == maxAdvancesAtOneInstant {
				panic(fmt.Sprintf("wheeltest: AdvanceTo: %d Advances in a row at %v each left more due there: callbacks keep arming timers for deadlines already reached (a Reset(0) of a callback's own timer?)",
					again, now))
			}
			continue
		}
		again = 0
		if !now.Before(t) {
			return n
		}
		step := t
		if ok && next.Before(t) {
			step = next
		}
		if !c.setFrom(now, step) {
			panic(fmt.Sprintf("wheeltest: AdvanceTo: the Clock was moved to %v by someone else (a callback, another goroutine) while AdvanceTo walked it from %v to %v",
				c.Now(), now, t))
		}
		now = step
	}
}
