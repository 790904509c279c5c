package wheeltest

import (
	"context"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// A Clock is a clock moved by hand, for tests that drive a hierarchy with
// [timingwheel.Hierarchy.Advance] or [AdvanceTo]: it reads the instant it
// was last moved to, and moves only when [Clock.Add] or [Clock.Set] is
// called, at once and without sleeping. (A [clock.Mock] sleeps 1 ms of
// real time on every Add and Set, to let goroutines woken by its timers
// run: a test that moves it 10,000 times waits 10 s for nothing.)
//
// A Clock satisfies [clock.Clock], so it can be given to
// [timingwheel.WithClock]. A hierarchy without its driver reads only Now
// and Since, and those are what a Clock implements, with Until. Its
// timers — After, AfterFunc, Sleep, Tick, Ticker, Timer, WithDeadline and
// WithTimeout — panic with a message that says so: a *clock.Timer or
// *clock.Ticker that works can only be made by package clock itself
// (a Mock's, which would bring its sleeps back). So the driver does not
// run on a Clock ([timingwheel.Hierarchy.Start] panics on the driver's
// goroutine once it has a timer to sleep for): drive the hierarchy from
// the test. To test code that starts the driver itself, sleeps, or arms
// timers from goroutines of its own, use the real clock inside a
// testing/synctest bubble (Go 1.25+) instead: h.Start(), then
// time.Sleep(d) and synctest.Wait() in the test.
//
// The zero Clock reads the zero time.Time. A Clock is safe for concurrent
// use: conns read it from their own goroutines while the test moves it.
// Its readings carry no monotonic clock reading: a time given to
// [NewClock] or Set is stripped of it (t.Round(0)), so readings compare
// and subtract by their wall clock, as the instants a test writes do.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

var _ clock.Clock = (*Clock)(nil)

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock {
	return &Clock{now: t.Round(0)}
}

// Now returns the instant the clock was last moved to.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Since returns c.Now().Sub(t).
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Until returns t.Sub(c.Now()).
func (c *Clock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// Add moves the clock by d, at once: forward if d > 0, back if d < 0 (a
// hierarchy then fires nothing early: see guarantee 6, "Clock anomalies",
// of the package timingwheel).
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t, at once, forward or back.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t.Round(0)
	c.mu.Unlock()
}

// setFrom moves the clock from old to t and reports true, or reports false
// and leaves it if it does not read old: someone else moved it.
func (c *Clock) setFrom(old, t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.now.Equal(old) {
		return false
	}
	c.now = t.Round(0)
	return true
}

// notImplemented panics: a Clock has no timers (see [Clock]).
func notImplemented(method string) {
	panic("wheeltest: Clock." + method + " is not implemented: a Clock has no timers, it only reads the " +
		"instant Add or Set moved it to; drive the hierarchy with Advance or wheeltest.AdvanceTo (not Start), " +
		"or test code that sleeps or starts the driver with the real clock in a testing/synctest bubble")
}

// After panics: a Clock has no timers (see [Clock]).
func (c *Clock) After(time.Duration) <-chan time.Time { notImplemented("After"); return nil }

// AfterFunc panics: a Clock has no timers (see [Clock]). The hierarchy's
// driver calls it, so a hierarchy on a Clock is driven by the test.
func (c *Clock) AfterFunc(time.Duration, func()) *clock.Timer {
	notImplemented("AfterFunc")
	return nil
}

// Sleep panics: a Clock has no timers (see [Clock]).
func (c *Clock) Sleep(time.Duration) { notImplemented("Sleep") }

// Tick panics: a Clock has no timers (see [Clock]).
func (c *Clock) Tick(time.Duration) <-chan time.Time { notImplemented("Tick"); return nil }

// Ticker panics: a Clock has no timers (see [Clock]).
func (c *Clock) Ticker(time.Duration) *clock.Ticker { notImplemented("Ticker"); return nil }

// Timer panics: a Clock has no timers (see [Clock]).
func (c *Clock) Timer(time.Duration) *clock.Timer { notImplemented("Timer"); return nil }

// WithDeadline panics: a Clock has no timers (see [Clock]). Request
// deadlines kept by the hierarchy (package wheelctx's) do work on a Clock:
// the hierarchy ends them as the test advances it.
func (c *Clock) WithDeadline(context.Context, time.Time) (context.Context, context.CancelFunc) {
	notImplemented("WithDeadline")
	return nil, nil
}

// WithTimeout panics: a Clock has no timers (see [Clock]); see
// [Clock.WithDeadline].
func (c *Clock) WithTimeout(context.Context, time.Duration) (context.Context, context.CancelFunc) {
	notImplemented("WithTimeout")
	return nil, nil
}
