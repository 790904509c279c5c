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

	self bool // the hierarchy drives itself: an arming with no driver starts one
}

// idleState is what sleepUntil holds while no driver runs: autoStart on a
// hierarchy that drives itself, notRunning on one its caller drives.
func (dr *driver) idleState() int64 {
	if dr.self {
		return autoStart
	}
	return notRunning
}

// Markers kept in driver.sleepUntil.
const (
	notRunning = math.MinInt64     // no driver: arming never wakes one
	awake      = math.MinInt64 + 1 // the driver is awake and looks at every shard before it sleeps
	idleSleep  = math.MaxInt64     // asleep with nothing armed: any arming wakes it
	// autoStart: no driver, and the next arming starts one: the state of
	// a hierarchy that drives itself while its driver does not run. An
	// arming due at or after it (a tick 292 years out) starts none.
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
// driver ends with the Stop. When the driver starts by itself, and what it
// holds until Stop, is the rule "Driving the wheels" of the package doc.
//
// Callbacks run on the driver goroutine. A callback may call Start (a
// no-op) but must not call [Hierarchy.Stop], which would wait forever for
// the driver running that callback. A callback that panics there crashes
// the program, as a panic in any goroutine does; recover inside the
// callback if that is not wanted.
//
// In tests, prefer [Hierarchy.Advance] with a manual clock, or the real
// clock inside a testing/synctest bubble (Start may be called in the
// bubble even if New was not). With Start and a [clock.Mock], callbacks
// run on the driver's goroutine some time after mock.Add returns, and a
// test must wait for them itself.
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

// startAuto starts the driver for a timer armed on a hierarchy that drives
// itself and whose driver does not run (its state is autoStart). It waits
// for a Start or Stop of another goroutine to finish, and then starts the
// driver unless one runs: never is a timer left undriven because another
// call held runMu. It is called with no shard lock held.
func (h *Hierarchy) startAuto() {
	dr := &h.driver
	dr.runMu.Lock()
	defer dr.runMu.Unlock()
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

// Stop stops the driver and waits for it to exit. Timers stay armed; what
// that means for them, and for timers armed after Stop, is the rule
// "Driving the wheels" of the package doc: on a hierarchy that drives
// itself, the next arming starts the driver again.
//
// Waiting for the driver includes waiting for a callback it is running, and
// for the Advance of another goroutine that the driver waits behind. So a
// callback of h must not call Stop while the driver runs: Stop would wait
// for the callback that called it. Like a recursive Lock of a
// [sync.Mutex], that is a deadlock, and nothing detects it; stop the
// driver from another goroutine. Stop returns at once if the driver is not
// running, also from a callback (of an Advance loop of the caller's own).
func (h *Hierarchy) Stop() {
	h.mustBeMade("Stop")
	dr := &h.driver
	dr.runMu.Lock()
	if dr.stop == nil {
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
		dr.sleepUntil.Store(dr.idleState())
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
		e, ok := h.nextWork(false)
		for {
			v := int64(idleSleep)
			if ok {
				v = e
			}
			dr.sleepUntil.Store(v)
			// Look again: a timer armed before the store saw "awake" and
			// did not signal.
			e2, ok2 := h.nextWork(false)
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
