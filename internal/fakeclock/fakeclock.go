// Package fakeclock holds a clock moved by hand for the root package's own
// tests. It is package wheeltest's Clock for a package that wheeltest
// cannot serve: wheeltest imports the root package, so the root package's
// internal tests (package timingwheel) cannot import it; fakeclock imports
// nothing of the library. Every other test in the module (netidle's, the
// examples') uses wheeltest, as users do.
package fakeclock

import (
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// Clock is a manual clock safe for concurrent use. Unlike clock.Mock,
// moving it does not sleep, so tests can take millions of steps. It
// answers only Now and Since, which is all a hierarchy reads without its
// driver; any other method of clock.Clock panics.
type Clock struct {
	clock.Clock // nil: only Now and Since are implemented
	mu          sync.Mutex
	now         time.Time
}

// New returns a Clock reading 2026-01-01 00:00 UTC.
func New() *Clock {
	return &Clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Since returns the time elapsed on the clock since t.
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}
