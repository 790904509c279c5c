package timingwheel

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// The driver is a goroutine that calls Advance when there is work and
// otherwise sleeps on the clock: until the next tick with work, or, while
// nothing is armed, until an arming wakes it.
//
// Arming tells the driver about an earlier timer through sleepUntil, one
// word that arming only reads unless the new timer is due before the
// driver means to wake: then it lowers the word and signals the wake
// channel. The driver publishes the tick it will sleep until, then looks
// at the shards again, so an arming either sees the published tick or is
// seen by the second look.
type driver struct {
	// sleepUntil is the tick the driver sleeps until, or one of the
	// markers below. Arming a timer due before it wakes the driver.
	sleepUntil atomic.Int64

	wake atomic.Pointer[chan struct{}] // made by Start, so that it belongs to Start's synctest bubble, if any

	mu    sync.Mutex   // guards timer and its arming against idle()
	timer *clock.Timer // the clock timer the driver sleeps on; its func signals wake

	// runMu serializes Start and Stop. Stop does not hold it while it
	// waits for the driver to exit (stopping is set then), so a callback
	// the driver runs meanwhile may call Start.
	runMu      sync.Mutex
	stop, done chan struct{}
	stopping   bool // stop is closed: a Stop waits for done
}

// Markers kept in driver.sleepUntil.
const (
	notRunning = math.MinInt64     // no driver: arming never wakes one
	awake      = math.MinInt64 + 1 // the driver is awake and looks at every shard before it sleeps
	idleSleep  = math.MaxInt64     // asleep with nothing armed: any arming wakes it
	// autoStart: no driver yet, and the next arming starts one: the state
	// of a hierarchy on the default clock until its first Start, Advance,
	// Stop or arming. An arming due at or after it (a tick 292 years out)
	// starts none.
	autoStart = math.MaxInt64 - 1
)

// signal wakes the driver, if it runs; it never blocks.
func (dr *driver) signal() {
	if c := dr.wake.Load(); c != nil {
		select {
		case *c <- struct{}{}:
		default:
		}
	}
}

// wakeFor wakes the driver if it sleeps until after tick d, for which a
// timer was just armed. Usually it is one atomic load of a word that
// changes only when the driver goes to sleep.
func (h *Hierarchy) wakeFor(d int64) {
	dr := &h.driver
	for {
		s := dr.sleepUntil.Load()
		if d >= s {
			return
		}
		if s == autoStart {
			h.startAuto()
			return
		}
		if dr.sleepUntil.CompareAndSwap(s, d) {
			dr.signal()
			return
		}
	}
}

// idle is called when a Stop empties its shard. If no shard holds a timer
// any more, it stops the clock timer the driver sleeps on: with nothing
// armed, the driver does not wake at all.
func (h *Hierarchy) idle() {
	dr := &h.driver
	if s := dr.sleepUntil.Load(); s == notRunning || s == awake || s == idleSleep || s == autoStart {
		return
	}
	dr.mu.Lock()
	defer dr.mu.Unlock()
	s := dr.sleepUntil.Load()
	if s == notRunning || s == awake || s == idleSleep || s == autoStart {
		return
	}
	// From here on an arming wakes the driver, so a timer armed while the
	// shards are counted is not slept through.
	if !dr.sleepUntil.CompareAndSwap(s, idleSleep) {
		return // an arming lowered it (and signalled): the driver re-plans
	}
	for _, sh := range h.shards {
		sh.lock()
		n := sh.count
		sh.mu.Unlock()
		if n > 0 {
			dr.sleepUntil.CompareAndSwap(idleSleep, s) // keep the sleep as it was
			return
		}
	}
	if dr.timer != nil {
		dr.timer.Stop()
	}
}

// Start starts the driver: a goroutine that calls [Hierarchy.Advance]
// whenever a timer is due (or a coarse slot must cascade), sleeping on the
// clock in between. It does not wake every tick, nor at all while no timer
// is armed; arming a timer earlier than its wake-up wakes it. Start does
// nothing if the driver is already running, also while a Stop of another
// goroutine waits for it to exit: such a Start and Stop overlap, and the
// driver ends with the Stop.
//
// Callbacks run on the driver goroutine. A callback may call Start (a
// no-op: the driver runs, or is being stopped by a Stop of another
// goroutine, which then waits for the callback) but must not call
// [Hierarchy.Stop], which would
// wait forever for the driver running that callback. A callback that panics there crashes the
// program, as a panic in any goroutine does; recover inside the callback
// if that is not wanted. Call Stop to end the goroutine when the hierarchy
// is no longer needed.
//
// On the default clock (no [WithClock]), the first timer armed starts the
// driver as Start does, unless Advance, Start or Stop was called first;
// see [New]. With a clock given by WithClock, only Start starts it.
//
// In tests, prefer [Hierarchy.Advance] with a [clock.Mock], or Start with
// the real clock inside a testing/synctest bubble (Start may be called in
// the bubble even if New was not). With Start and a Mock, callbacks run on
// the driver's goroutine some time after mock.Add returns, and a test must
// wait for them itself.
func (h *Hierarchy) Start() {
	h.mustBeMade("Start")
	dr := &h.driver
	dr.runMu.Lock()
	defer dr.runMu.Unlock()
	if dr.stop != nil {
		return
	}
	dr.sleepUntil.Store(awake)
	h.startLocked()
}

// startAuto starts the driver for the first timer armed on a hierarchy of
// the default clock, unless Advance, Start or Stop came first: the
// hierarchy's state is still autoStart. It never waits: if a Start or Stop
// holds runMu, the caller's Start or Stop decides, and the driver (if it
// runs) finds the timer when it first looks.
func (h *Hierarchy) startAuto() {
	dr := &h.driver
	if !dr.runMu.TryLock() {
		return
	}
	defer dr.runMu.Unlock()
	// A compare-and-swap, not a store: an Advance may clear autoStart at
	// any moment, and then the caller drives.
	if dr.stop == nil && dr.sleepUntil.CompareAndSwap(autoStart, awake) {
		h.startLocked()
	}
}

// startLocked starts the driver goroutine; sleepUntil says awake. runMu
// is held and the driver is not running.
func (h *Hierarchy) startLocked() {
	dr := &h.driver
	dr.stop, dr.done = make(chan struct{}), make(chan struct{})
	wake := make(chan struct{}, 1)
	dr.wake.Store(&wake)
	go h.drive(dr.stop, wake, dr.done)
}

// noAutoStart ends the autoStart state, if h is in it: the caller drives h
// (Advance), or has said that no driver is to run until Start (Stop).
func (h *Hierarchy) noAutoStart() {
	if h.driver.sleepUntil.Load() == autoStart {
		h.driver.sleepUntil.CompareAndSwap(autoStart, notRunning)
	}
}

// Stop stops the driver and waits for it to exit.
//
// Waiting for the driver includes waiting for a callback it is running, and
// for the Advance of another goroutine that the driver waits behind. So a
// callback of h must not call Stop while the driver runs: Stop would wait
// for the callback that called it. Like a recursive Lock of a
// [sync.Mutex], that is a deadlock, and nothing detects it; stop the
// driver from another goroutine. Armed timers stay armed, to fire once the
// driver is started again or Advance is called. Stop returns at once if
// the driver is not running, also from a callback (of an Advance loop of
// the caller's own).
//
// On the default clock, Stop also means that no driver is to run until
// Start: a hierarchy that Stop was called on before its first timer was
// armed does not start its driver by itself (see [New]).
func (h *Hierarchy) Stop() {
	h.mustBeMade("Stop")
	dr := &h.driver
	dr.runMu.Lock()
	if dr.stop == nil {
		h.noAutoStart()
		dr.runMu.Unlock()
		return
	}
	if !dr.stopping {
		dr.stopping = true
		close(dr.stop)
	}
	done := dr.done
	// Wait without runMu: the callback the driver is running may call
	// Start, which then returns at once (the driver is still running).
	dr.runMu.Unlock()
	<-done
	dr.runMu.Lock()
	if dr.done == done { // the first of concurrent Stops back
		dr.stop, dr.done, dr.stopping = nil, nil, false
		dr.sleepUntil.Store(notRunning)
		dr.wake.Store(nil)
	}
	dr.runMu.Unlock()
}

// drive is the driver goroutine.
func (h *Hierarchy) drive(stop <-chan struct{}, wake <-chan struct{}, done chan<- struct{}) {
	dr := &h.driver
	defer close(done)
	defer func() {
		dr.mu.Lock()
		if dr.timer != nil {
			dr.timer.Stop()
			dr.timer = nil // the next Start makes its own, in its own bubble
		}
		dr.mu.Unlock()
	}()
	for {
		select {
		case <-stop:
			return
		default:
		}
		dr.sleepUntil.Store(awake)
		h.Advance()
		e, ok := h.nextWake()
		for {
			v := int64(idleSleep)
			if ok {
				v = e
			}
			dr.sleepUntil.Store(v)
			// Look again: a timer armed before the store saw "awake" and
			// did not signal.
			e2, ok2 := h.nextWake()
			if !ok2 || (ok && e2 >= e) {
				break
			}
			e, ok = e2, true
		}
		if !ok {
			// Nothing armed: no clock timer may be left from an earlier
			// sleep, or it would wake the driver for nothing.
			dr.mu.Lock()
			if dr.timer != nil && dr.sleepUntil.Load() == idleSleep {
				dr.timer.Stop()
			}
			dr.mu.Unlock()
		} else if !h.sleepUntilTick(e) {
			continue // due already
		}
		select {
		case <-stop:
			return
		case <-wake:
		}
	}
}

// sleepUntilTick arms the driver's clock timer to signal the wake channel
// at tick e. It reports false if e is due already.
func (h *Hierarchy) sleepUntilTick(e int64) bool {
	dr := &h.driver
	for tries := 0; ; tries++ {
		before := h.elapsed()
		wait := satAdd(h.tickNanos(e), -before)
		if wait <= 0 {
			return false
		}
		dr.mu.Lock()
		if dr.sleepUntil.Load() != e {
			// An arming lowered it (and signalled), or idle() found nothing
			// armed: the wake channel decides.
			dr.mu.Unlock()
			return true
		}
		if dr.timer == nil {
			dr.timer = h.clock.AfterFunc(time.Duration(wait), dr.signal)
		} else {
			dr.timer.Reset(time.Duration(wait))
		}
		dr.mu.Unlock()
		if h.realClock {
			// The real clock moved by the time the arming took, which is
			// noise; if that reached e, the clock timer fires at once.
			return true
		}
		after := h.elapsed()
		if floorDiv(after, h.tick) >= e {
			return false // the clock reached e meanwhile
		}
		// A clock moved by another goroutine (a mock's Add) between the
		// reading and the arming left the timer late by as much: arm again.
		if after == before || tries == 100 {
			return true
		}
	}
}
