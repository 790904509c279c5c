package timingwheel

import (
	"fmt"
	"reflect"

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
func WithClock(c clock.Clock) Option {
	return optionFunc(func(cfg *config) error {
		if c == nil {
			return fmt.Errorf("%w: WithClock(nil)", ErrInvalidConfig)
		}
		if v := reflect.ValueOf(c); v.Kind() == reflect.Pointer && v.IsNil() {
			return fmt.Errorf("%w: WithClock(%T(nil))", ErrInvalidConfig, c)
		}
		cfg.clock = c
		return nil
	})
}
