package netidle_test

import (
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/internal/watch"
)

// hookClock is a clock.Mock that runs a hook at a chosen reading: the
// k-th reading (Now or Since) after arm, on the goroutine that reads it.
// Armed around an Advance, it puts the hook inside the Advance at one of
// its clock readings, for example between the look at a conn's state and
// the look's decision: deterministic races, without sleeps.
type hookClock struct {
	*clock.Mock
	mu    sync.Mutex
	left  int // readings before the hook runs; 0: none armed
	hook  func()
	reads int // readings since arm
}

func newHookClock() *hookClock { return &hookClock{Mock: clock.NewMock()} }

// arm makes the k-th reading from now on (k >= 1) run hook.
func (c *hookClock) arm(k int, hook func()) {
	c.mu.Lock()
	c.left, c.hook, c.reads = k, hook, 0
	c.mu.Unlock()
}

// disarm drops the hook if it has not run, and returns how many readings
// were taken since arm.
func (c *hookClock) disarm() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.left, c.hook = 0, nil
	return c.reads
}

func (c *hookClock) reading() {
	c.mu.Lock()
	c.reads++
	var f func()
	if c.left > 0 {
		c.left--
		if c.left == 0 {
			f, c.hook = c.hook, nil
		}
	}
	c.mu.Unlock()
	if f != nil {
		f()
	}
}

func (c *hookClock) Now() time.Time {
	c.reading()
	return c.Mock.Now()
}

func (c *hookClock) Since(t time.Time) time.Duration {
	c.reading()
	return c.Mock.Now().Sub(t)
}

// newHooked returns a hierarchy of one shard on a fresh hookClock.
func newHooked(t *testing.T) (*timingwheel.Hierarchy, *hookClock) {
	t.Helper()
	clk := newHookClock()
	h, err := timingwheel.New(timingwheel.WithClock(clk), timingwheel.WithShards(1))
	require.NoError(t, err)
	return h, clk
}

// raced runs f on a goroutine of its own, from a hook, and waits for it to
// return for up to d (watch.ReturnsWithin): it reports whether f returned
// within d, that is while the hook's caller (an Advance) was still inside
// the reading. A call that waits for the Advance's look (a lock it holds)
// does not return within d; one that does not wait returns at once. done
// is closed when f has returned, whenever that is.
var raced = watch.ReturnsWithin
