package timingwheel

import (
	"fmt"
	"reflect"
	"time"

	"github.com/benbjohnson/clock"
)

// The injected clock is benbjohnson/clock's interface; both of these
// implement it.
var (
	_ clock.Clock = clock.New()
	_ clock.Clock = (*clock.Mock)(nil)
)

// WithClock sets the clock the hierarchy reads and the driver sleeps on,
// typically a [clock.Mock] in tests. The default is clock.New(), the real
// clock (which inside a testing/synctest bubble is the bubble's fake time).
// A hierarchy with a given clock does not drive itself: WithClock implies
// [WithManualAdvance]. It has one shard unless [WithShards] asks for more,
// and then its timers are dealt to the shards in turn: either way the same
// calls give the same order of callbacks.
//
// With a Mock, drive the hierarchy from the test itself: "mock.Add(d);
// h.Advance()" runs every callback due, on the test's goroutine, before
// Advance returns, so the test can check their effects at once. Do not
// combine a Mock with [Hierarchy.Start] in tests: the driver then fires on
// its own goroutine, some time after mock.Add returns, and a test that
// checks right after mock.Add passes on a quiet machine and fails under
// load. To test code that starts the driver itself, or that arms and
// re-arms timers from goroutines of its own (which a test moving a Mock
// races), leave the clock as it is and run the test in a testing/synctest
// bubble: "time.Sleep(d); synctest.Wait()" then returns once the driver
// has fired everything due and every goroutine of the bubble is blocked.
func WithClock(c clock.Clock) Option {
	return optionFunc(func(cfg *config) error {
		if c == nil {
			return fmt.Errorf("%w: WithClock(nil)", ErrInvalidConfig)
		}
		if v := reflect.ValueOf(c); v.Kind() == reflect.Pointer && v.IsNil() {
			return fmt.Errorf("%w: WithClock(%T(nil))", ErrInvalidConfig, c)
		}
		cfg.clock, cfg.manual = c, true
		return nil
	})
}

// Now returns the hierarchy's clock reading: the instant every deadline is
// measured from. With [WithClock] and a [clock.Mock] it is the Mock's time;
// with the default clock it is the current time, with a monotonic reading.
// A caller that arms many timers at once, or computes a deadline to pass to
// [Timer.ResetAt], reads it once.
func (h *Hierarchy) Now() time.Time {
	h.mustBeMade("Now")
	return h.origin.Add(time.Duration(h.elapsed()))
}

// Origin returns the hierarchy's origin: its clock's reading when [New]
// ran. Ticks count from it: a deadline is due at the first multiple of
// the tick after the origin that is at or after it. [Hierarchy.Now] is
// Origin().Add(Elapsed()).
func (h *Hierarchy) Origin() time.Time {
	h.mustBeMade("Origin")
	return h.origin
}

// Elapsed returns the time elapsed on the hierarchy's clock since its
// [Hierarchy.Origin]: the one clock reading every [Timer.Reset] and
// [Hierarchy.AfterFunc] takes. On the default clock it reads the monotonic
// clock alone, about half the price of Now. A layer that keeps instants
// of its own (an idle conn's last activity: package netidle) keeps them
// as Elapsed readings, and turns one into a time with
// Origin().Add(d). With a [clock.Mock] it is negative once the Mock is set
// before the origin.
func (h *Hierarchy) Elapsed() time.Duration {
	h.mustBeMade("Elapsed")
	return time.Duration(h.elapsed())
}
