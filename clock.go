package timingwheel

import (
	"fmt"
	"math"
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

// Start starts the driver: a goroutine that calls [Hierarchy.Advance]
// whenever [Hierarchy.Next] says there is work, sleeping on the clock in
// between. It does not wake every tick, nor at all while no timer is armed;
// arming a timer earlier than its wake-up wakes it. Start does nothing if the
// driver is already running.
//
// Callbacks run on the driver goroutine. A callback must not call Start or
// [Hierarchy.Stop]. A callback that panics there crashes the program, as a
// panic in any goroutine does; recover inside the callback if that is not
// wanted. Call Stop to end the goroutine when the hierarchy is no longer
// needed.
func (h *Hierarchy) Start() {
	h.runMu.Lock()
	defer h.runMu.Unlock()
	if h.stopCh != nil {
		return
	}
	h.stopCh, h.doneCh = make(chan struct{}), make(chan struct{})
	h.mu.Lock()
	h.running = true
	h.mu.Unlock()
	go h.drive(h.stopCh, h.doneCh)
}

// Stop stops the driver and waits for it to exit, which includes waiting for
// a callback it is running. Armed timers stay armed, to fire once the driver
// is started again or Advance is called. Stop returns at once if the driver
// is not running. A callback must not call Stop: it would wait for itself.
func (h *Hierarchy) Stop() {
	h.runMu.Lock()
	defer h.runMu.Unlock()
	if h.stopCh == nil {
		return
	}
	close(h.stopCh)
	<-h.doneCh
	h.stopCh, h.doneCh = nil, nil
	h.mu.Lock()
	h.running = false
	h.sleepUntil = math.MaxInt64
	h.mu.Unlock()
}

// drive is the driver goroutine.
func (h *Hierarchy) drive(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	var timer *clock.Timer // the clock timer the driver sleeps on, re-armed
	defer func() {
		h.mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		h.driverTimer = nil
		h.mu.Unlock()
	}()
	for {
		select {
		case <-stop:
			return
		default:
		}
		h.Advance()
		h.mu.Lock()
		e, ok := h.nextLocked()
		ok = ok && e <= h.lastTick // timers beyond the last tick never fire
		h.sleepUntil = math.MaxInt64
		if ok {
			h.sleepUntil = e
		}
		due := false
		for ok {
			before := h.elapsed()
			wait := satAdd(h.tickNanos(e), -before)
			if wait <= 0 {
				due = true
				break
			}
			if timer == nil {
				timer = h.clock.Timer(time.Duration(wait))
				h.driverTimer = timer
			} else {
				timer.Reset(time.Duration(wait))
			}
			// A clock moved by another goroutine (a mock's Add) between
			// the reading and the arming would leave the timer late by as
			// much: arm again until the clock held still within a tick.
			if h.elapsed()-before < h.tick {
				break
			}
		}
		h.mu.Unlock()
		if due {
			continue
		}
		var expired <-chan time.Time
		if ok {
			expired = timer.C
		}
		select {
		case <-stop:
			return
		case <-expired:
		case <-h.wake:
			// Stop and drain, so that a stale expiry cannot wake the next
			// sleep early (clocks with pre-Go 1.23 timer channels keep one).
			h.mu.Lock()
			if timer != nil && !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			h.mu.Unlock()
		}
	}
}
