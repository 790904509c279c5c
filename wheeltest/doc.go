// Package wheeltest helps test code that uses a [timingwheel.Hierarchy],
// deterministically and fast: a [Clock] moved by hand, which never sleeps,
// and [AdvanceTo], which walks a hierarchy to an instant the way its
// driver would, firing every tick on the way in order.
//
//	c := wheeltest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
//	h, _ := timingwheel.New(timingwheel.WithClock(c)) // no driver: the test drives
//	// ... arm timers, as the code under test does ...
//	wheeltest.AdvanceTo(h, c, c.Now().Add(time.Minute)) // every callback due in the minute runs, in order
//
// With a Clock, the same calls in the same order and the same moves run
// the same callbacks in the same order (guarantee 8 of package
// timingwheel), and a move costs no real time: [clock.Mock], which a
// hierarchy accepts as well, sleeps 1 ms of real time on every Add and
// Set, so a test of 10,000 steps on it waits 10 s.
//
// A Clock has no timers of its own, so the hierarchy's driver cannot run
// on it. When the code under test starts the driver itself, sleeps, or arms
// timers from goroutines of its own (which a test moving a clock would
// race), use testing/synctest (Go 1.25+) instead: in a bubble, on the real
// clock, h.Start(), then time.Sleep(d) and synctest.Wait(); the bubble's
// clock jumps, and Wait returns once the driver has fired everything due
// and every goroutine of the bubble is blocked.
//
// This package imports only the core's exported API.
package wheeltest
