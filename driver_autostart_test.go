package timingwheel

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// The rule of "Driving the wheels" in the package doc: a hierarchy on the
// default clock drives itself, its driver started by the first timer
// armed and, after a Stop, by the next; WithManualAdvance (or WithClock)
// makes the caller drive it, and then nothing starts by itself. The tests run on the real clock inside
// synctest bubbles, where a bubble that ends with a driver still running
// fails the test (its goroutine is blocked forever): that pins "no driver"
// as well as a callback that did not run pins "not driven".

// armings are the ways a timer gets armed, each of which must start the
// driver on its own.
var armings = []struct {
	name string
	arm  func(h *Hierarchy, d time.Duration, f func())
}{
	{"AfterFunc", func(h *Hierarchy, d time.Duration, f func()) { h.AfterFunc(d, f) }},
	{"AtFunc", func(h *Hierarchy, d time.Duration, f func()) { h.AtFunc(h.Now().Add(d), f) }},
	{"Every", func(h *Hierarchy, d time.Duration, f func()) {
		var once sync.Once
		h.Every(d, func() { once.Do(f) })
	}},
	{"Init+Reset", func(h *Hierarchy, d time.Duration, f func()) { new(Timer).Init(h, f).Reset(d) }},
	{"InitOn+ResetAt", func(h *Hierarchy, d time.Duration, f func()) {
		new(Timer).InitOn(h, func(run func()) { run() }, f).ResetAt(h.Now().Add(d))
	}},
	{"Timeouts.Add", func(h *Hierarchy, d time.Duration, f func()) {
		NewTimeouts(h, func(int) { f() }).Add(1, d)
	}},
}

func TestDriver_StartsOnFirstArming(t *testing.T) {
	for _, a := range armings {
		t.Run(a.name, func(t *testing.T) {
			inBubble(t, "a timer armed with no Start", func(t *testing.T) {
				h := mustNew(t)
				var fired atomic.Int32
				a.arm(h, time.Second, func() { fired.Add(1) })
				time.Sleep(time.Second)
				synctest.Wait()
				assert.Equal(t, int32(1), fired.Load(), "fired by the driver the arming started")
				h.Stop()
				assert.Equal(t, int64(autoStart), h.driver.sleepUntil.Load(), "the driver stopped, and the next arming starts it")
			})
		})
	}
}

// TestDriver_NotStartedWithManualAdvance: a caller that drives with its
// own Advance loop says so with WithManualAdvance and keeps every callback
// on its goroutine. (It replaces the test that pinned an Advance before the
// first arming as the way to say so: that ritual is gone.)
func TestDriver_NotStartedWithManualAdvance(t *testing.T) {
	inBubble(t, "an Advance loop", func(t *testing.T) {
		h := mustNew(t, WithManualAdvance())
		inCaller := false
		h.AfterFunc(time.Second, func() { inCaller = true }) // a race with a driver, if one ran
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.False(t, inCaller, "nothing advanced h but its caller, which has not yet")
		assert.Equal(t, 1, h.Advance())
		assert.True(t, inCaller, "the callback ran in the caller's Advance")
		h.Stop()
		h.AfterFunc(time.Second, func() {})
		assert.Equal(t, int64(notRunning), h.driver.sleepUntil.Load(), "no driver, also after Stop and an arming")
	})
}

// TestDriver_AdvanceKeepsNoDriverFromStarting: on a hierarchy that drives
// itself, an Advance of the caller's is one more Advance, not a way to say
// who drives: the first arming after it starts the driver all the same.
func TestDriver_AdvanceKeepsNoDriverFromStarting(t *testing.T) {
	inBubble(t, "an Advance before the first arming", func(t *testing.T) {
		h := mustNew(t)
		assert.Equal(t, 0, h.Advance())
		var fired atomic.Int32
		h.AfterFunc(time.Second, func() { fired.Add(1) })
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, int32(1), fired.Load(), "fired by the driver the arming started")
		h.Stop()
	})
}

// TestDriver_StopThenArmingStartsItAgain: Stop returns a hierarchy that
// drives itself to the state New left it in: a timer pending at Stop does
// not fire while no driver runs, and the next arming starts the driver,
// which fires both. (It replaces TestDriver_NotStartedAfterStop, which
// pinned "no driver after Stop until Start": a Stop at shutdown then left
// every later deadline silently unfired.)
func TestDriver_StopThenArmingStartsItAgain(t *testing.T) {
	inBubble(t, "a hierarchy stopped and armed again", func(t *testing.T) {
		h := mustNew(t)
		h.Stop() // before any arming: as if not called
		var fired atomic.Int32
		h.AfterFunc(time.Second, func() { fired.Add(1) })
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, int32(1), fired.Load(), "the arming after a Stop started the driver")

		h.AfterFunc(time.Second, func() { fired.Add(1) }) // pending at the Stop below
		h.Stop()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Equal(t, int32(1), fired.Load(), "a timer pending at Stop waits for the driver")
		assert.Equal(t, 1, h.Len(), "and stays armed")
		h.AfterFunc(time.Second, func() { fired.Add(1) })
		synctest.Wait()
		assert.Equal(t, int32(2), fired.Load(), "the next arming started the driver, which fired the pending timer at once")
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, int32(3), fired.Load(), "and the new one on time")
		h.Stop()
		assert.Equal(t, int64(autoStart), h.driver.sleepUntil.Load())
	})
}

// TestDriver_NotStartedByArmingWithAGivenClock: with WithClock, tests
// drive with mock.Add and Advance, deterministically.
func TestDriver_NotStartedByArmingWithAGivenClock(t *testing.T) {
	h, mock := newMock(t)
	fired := false
	h.AfterFunc(time.Millisecond, func() { fired = true })
	assert.Equal(t, int64(notRunning), h.driver.sleepUntil.Load(), "no driver")
	h.driver.runMu.Lock()
	assert.Nil(t, h.driver.stop, "no driver goroutine")
	h.driver.runMu.Unlock()
	mock.Add(time.Millisecond)
	assert.False(t, fired, "nothing but Advance fires it")
	assert.Equal(t, 1, h.Advance())
	assert.True(t, fired)
}

// in20Bubbles runs f on a new hierarchy (default options: the bubble's
// clock) in each of 20 synctest bubbles, so that a race the scheduler
// decides is run 20 times.
func in20Bubbles(t *testing.T, what string, f func(t *testing.T, h *Hierarchy)) {
	t.Helper()
	for range 20 {
		inBubble(t, what, func(t *testing.T) { f(t, mustNew(t)) })
	}
}

// TestDriver_FirstArmingsRacingStartOneDriver: many goroutines arming the
// first timers of a hierarchy at once, and Start beside them: one driver,
// which fires every timer, and one Stop ends it.
func TestDriver_FirstArmingsRacingStartOneDriver(t *testing.T) {
	in20Bubbles(t, "first armings racing Start", func(t *testing.T, h *Hierarchy) {
		var fired sync.WaitGroup
		var arms sync.WaitGroup
		for i := range 8 {
			fired.Add(1)
			arms.Go(func() { h.AfterFunc(time.Duration(i)*time.Millisecond, fired.Done) })
		}
		arms.Go(h.Start)
		arms.Wait()
		time.Sleep(10 * time.Millisecond)
		fired.Wait()
		h.Stop() // the bubble fails if a second driver were left
		assert.Equal(t, int64(autoStart), h.driver.sleepUntil.Load())
	})
}

// TestDriver_FirstArmingRacingAdvance: an arming racing an Advance of the
// caller's starts the driver all the same; the timer fires once (by the
// driver, or by the caller's next Advance) and one driver runs.
func TestDriver_FirstArmingRacingAdvance(t *testing.T) {
	in20Bubbles(t, "a first arming racing Advance", func(t *testing.T, h *Hierarchy) {
		var fired atomic.Int32
		var wg sync.WaitGroup
		wg.Go(func() { h.AfterFunc(time.Millisecond, func() { fired.Add(1) }) })
		wg.Go(func() { h.Advance() })
		wg.Wait()
		time.Sleep(time.Millisecond)
		synctest.Wait()
		h.Advance()
		assert.Equal(t, int32(1), fired.Load())
		h.Stop()
	})
}

// TestDriver_ArmingNeverLeavesTheStartToAnotherCall: an arming that finds
// no driver while a Start or Stop of another goroutine holds the driver's
// lock waits for it, then starts the driver unless one runs: it never
// leaves the start to a call that will not make it (a Stop of a hierarchy
// whose driver does not run). The test holds that lock itself while the
// arming comes.
func TestDriver_ArmingNeverLeavesTheStartToAnotherCall(t *testing.T) {
	h := mustNew(t)
	defer h.Stop()
	fired := make(chan struct{})
	h.driver.runMu.Lock()
	go h.AfterFunc(time.Millisecond, func() { close(fired) })
	time.Sleep(20 * time.Millisecond) // the arming reaches the held lock, most likely
	h.driver.runMu.Unlock()
	recvWithin(t, 10*time.Second, fired, "the timer armed while another call held the driver's lock")
}

// TestDriver_ArmingRacingStopFiresWithTheNextArming: an arming racing the
// Stop of a running driver, or of none, is pending at that Stop or armed
// after it: either way it fires, by the driver it started or at the latest
// by the one the next arming starts.
func TestDriver_ArmingRacingStopFiresWithTheNextArming(t *testing.T) {
	for _, running := range []bool{false, true} {
		in20Bubbles(t, "an arming racing Stop", func(t *testing.T, h *Hierarchy) {
			if running {
				h.AfterFunc(time.Hour, func() {}) // the driver runs
			}
			var fired atomic.Int32
			var wg sync.WaitGroup
			wg.Go(func() { h.AfterFunc(time.Millisecond, func() { fired.Add(1) }) })
			wg.Go(h.Stop)
			wg.Wait()
			h.AfterFunc(time.Millisecond, func() { fired.Add(1) })
			time.Sleep(time.Millisecond)
			synctest.Wait()
			assert.Equal(t, int32(2), fired.Load(), "both fired once the driver ran again")
			h.Stop()
		})
	}
}
