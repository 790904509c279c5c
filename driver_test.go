package timingwheel

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel/internal/watch"
)

// The driver against a clock.Mock that other goroutines move, including
// moves injected between the driver's clock reads and its arming, and the
// driver started in a synctest bubble the hierarchy was not made in.

// injectingClock is a clock.Mock that runs after(n) right after its n-th
// reading (Now or Since) returns its value to the reader: the clock moves
// between the reading and whatever the reader does next with it.
type injectingClock struct {
	*clock.Mock
	reads atomic.Int64
	after func(n int64)
}

func (c *injectingClock) Now() time.Time {
	now := c.Mock.Now()
	c.after(c.reads.Add(1))
	return now
}

func (c *injectingClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// TestDriver_MockMovedOntoDeadlineBetweenReadAndArm is the regression test
// for a driver that read the clock, was overtaken by a mock moved onto the
// deadline by less than a tick, and then slept past the due timer. The
// move is injected after each of the first clock reads in turn.
func TestDriver_MockMovedOntoDeadlineBetweenReadAndArm(t *testing.T) {
	for k := int64(1); k <= 6; k++ {
		mock := clock.NewMock()
		var injected atomic.Bool
		clk := &injectingClock{Mock: mock, after: func(int64) {}}
		h := mustNew(t, WithClock(clk))
		fired := make(chan struct{})
		h.AfterFunc(10*time.Millisecond, func() { close(fired) })
		mock.Add(9500 * time.Microsecond)
		clk.reads.Store(0)
		clk.after = func(n int64) { // the driver's reads only
			if n == k && injected.CompareAndSwap(false, true) {
				mock.Add(500 * time.Microsecond) // 9.5ms -> 10ms: onto the deadline
			}
		}
		h.Start()
		// If the driver made fewer than k reads before sleeping, move the
		// clock now: the timer must fire all the same.
		time.Sleep(20 * time.Millisecond)
		if injected.CompareAndSwap(false, true) {
			mock.Add(500 * time.Microsecond)
		}
		recvWithin(t, 5*time.Second, fired, fmt.Sprintf("a due timer left unfired by the driver on a mock moved after read %d", k))
		stopWithin(t, h, fmt.Sprintf("after a mock moved after read %d", k))
	}
}

// TestDriver_MockMovedConcurrentlyDoesNotDeadlock is the regression test
// for a driver that left a stale value in its clock timer's channel: the
// mock's next firing then blocked inside mock.Add, holding the mock's
// lock, while the driver waited on the mock. Moves are made by another
// goroutine right after the driver's clock reads, many times over.
func TestDriver_MockMovedConcurrentlyDoesNotDeadlock(t *testing.T) {
	mock := clock.NewMock()
	var moves sync.WaitGroup
	var budget atomic.Int64
	budget.Store(40)
	clk := &injectingClock{Mock: mock}
	clk.after = func(int64) {
		if budget.Add(-1) >= 0 {
			moves.Go(func() { mock.Add(5 * time.Millisecond) })
		}
	}
	h := mustNew(t, WithClock(clk))
	var fired atomic.Int64
	for i := range 50 {
		h.AfterFunc(time.Duration(i+1)*time.Millisecond, func() { fired.Add(1) })
	}
	h.Start()
	done := make(chan struct{})
	go func() {
		defer close(done)
		moves.Wait()
		for range 50 { // every method still answers
			h.AfterFunc(time.Hour, func() {}).Stop()
			h.Len()
			h.Next()
		}
		mock.Add(time.Second) // all 50 are due now
		for fired.Load() < 50 {
			time.Sleep(time.Millisecond)
		}
	}()
	recvWithin(t, 10*time.Second, done, "the hierarchy or the mock after concurrent mock moves")
	stopWithin(t, h, "after concurrent mock moves")
	assert.Equal(t, int64(50), fired.Load())
}

// TestDriver_MockMovedByAnotherGoroutine drives timers with the driver on a
// mock that another goroutine moves in random steps, sub-tick and larger:
// every timer fires, none before its deadline, none twice.
func TestDriver_MockMovedByAnotherGoroutine(t *testing.T) {
	mock := clock.NewMock()
	h := newStarted(t, WithClock(mock))
	defer stopWithin(t, h, "after timers on a mock moved by another goroutine")
	quit := make(chan struct{})
	defer close(quit) // the goroutine moving the mock ends with the test, also if it fails
	r := rand.New(rand.NewPCG(1, 2))
	const n = 300
	var fired [n]atomic.Int32
	var early atomic.Int32
	start := mock.Now()
	for i := range n {
		d := time.Duration(r.Int64N(int64(200 * time.Millisecond)))
		h.AfterFunc(d, func() {
			if mock.Now().Before(start.Add(d)) {
				early.Add(1)
			}
			fired[i].Add(1)
		})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for mock.Now().Sub(start) < 250*time.Millisecond {
			select {
			case <-quit:
				return
			default:
			}
			mock.Add(time.Duration(r.Int64N(int64(3 * time.Millisecond))))
		}
		for h.Len() > 0 {
			select {
			case <-quit:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	recvWithin(t, 30*time.Second, done, "timers on a mock moved by another goroutine, with the driver")
	for i := range n {
		assert.Equal(t, int32(1), fired[i].Load(), "timer %d", i)
	}
	assert.Zero(t, early.Load(), "fired before the deadline")
}

// TestDriver_StartInBubbleOfNewOutside is the regression test for a driver
// started inside a testing/synctest bubble on a hierarchy made outside it:
// the driver waited on channels made outside, so the bubble never saw it
// durably blocked and hung.
func TestDriver_StartInBubbleOfNewOutside(t *testing.T) {
	h := mustNew(t)
	inBubble(t, "the driver of a hierarchy made outside the bubble", func(t *testing.T) {
		h.Start()
		defer h.Stop()
		var n atomic.Int32
		h.AfterFunc(time.Second, func() { n.Add(1) })
		synctest.Wait()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Equal(t, int32(1), n.Load())
	})
}

// TestDriver_StopOfLastTimerStopsClockTimer checks, with a mock, that
// stopping the last armed timer leaves the driver without a clock timer:
// moving the mock past the old deadline wakes nothing.
func TestDriver_StopOfLastTimerStopsClockTimer(t *testing.T) {
	mock := clock.NewMock()
	clk := &injectingClock{Mock: mock, after: func(int64) {}}
	h := newStarted(t, WithClock(clk))
	defer stopWithin(t, h, "after its last timer was stopped")
	tm := h.AfterFunc(time.Second, func() { t.Error("stopped timer fired") })
	time.Sleep(10 * time.Millisecond) // the driver goes to sleep until 1s
	require.True(t, tm.Stop())
	time.Sleep(10 * time.Millisecond)
	before := clk.reads.Load()
	mock.Add(2 * time.Second)
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, before, clk.reads.Load(), "the driver woke after its last timer was stopped")
}

// TestDriver_LastTimerStoppedWhileAwake: the driver sleeps until a timer a
// second away, is woken for a timer due now, whose callback stops the
// first: with nothing armed it must not wake at the second either.
func TestDriver_LastTimerStoppedWhileAwake(t *testing.T) {
	inBubble(t, "a driver woken for a timer whose callback stops the last other", func(t *testing.T) {
		h, clk := startCounting(t)
		far := h.AfterFunc(time.Second, func() { t.Error("stopped timer fired") })
		synctest.Wait() // asleep until 1s
		h.AfterFunc(0, func() { far.Stop() })
		synctest.Wait() // woken, fired, asleep with nothing armed
		require.Equal(t, 0, h.Len())
		assertAsleep(t, clk, 2*time.Second)
	})
}

// TestDriver_StopEmptyingOneShardKeepsItForTheOthers: a Stop that empties its
// shard while another shard still holds a timer must leave the driver's
// sleep alone: the other timer fires on time.
func TestDriver_StopEmptyingOneShardKeepsItForTheOthers(t *testing.T) {
	inBubble(t, "a driver with timers in two shards, one emptied by a Stop", func(t *testing.T) {
		h := mustNew(t, WithClock(clock.New()), WithShards(2)) // the bubble's clock, shards dealt in turn
		h.Start()
		defer h.Stop()
		// Arm once the driver sleeps: a timer armed while the driver holds
		// its shard's lock goes to another shard, maybe the other timer's.
		synctest.Wait()
		a := h.AfterFunc(time.Second, func() {})
		var fired atomic.Int32
		b := h.AfterFunc(2*time.Second, func() { fired.Add(1) })
		require.NotSame(t, a.home(), b.home(), "the two timers are in different shards")
		synctest.Wait() // the driver sleeps until 1s
		require.True(t, a.Stop())
		time.Sleep(3 * time.Second)
		synctest.Wait()
		assert.Equal(t, int32(1), fired.Load(), "the timer of the other shard did not fire: the Stop that emptied one shard put the driver to sleep for good")
	})
}

// TestDriver_RearmsAfterMockMovedBeforeArming: the mock moves by
// less than the wait between the driver's clock reading and its arming of
// the clock timer. The driver must arm it again for the remaining wait,
// or the timer fires late by the move.
func TestDriver_RearmsAfterMockMovedBeforeArming(t *testing.T) {
	mock := clock.NewMock()
	clk := &injectingClock{Mock: mock, after: func(int64) {}}
	h := mustNew(t, WithClock(clk), WithShards(1))
	fired := make(chan struct{})
	h.AfterFunc(10*time.Millisecond, func() { close(fired) })
	var moved atomic.Bool
	clk.reads.Store(0)
	// Read 1 is the driver's Advance; read 2 is sleepUntilTick's reading
	// before it arms the clock timer.
	clk.after = func(n int64) {
		if n == 2 && moved.CompareAndSwap(false, true) {
			mock.Add(4 * time.Millisecond)
		}
	}
	h.Start()
	defer mustReturn(t, 5*time.Second, "Stop of the driver", h.Stop)
	deadline := time.Now().Add(5 * time.Second)
	for clk.reads.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	require.True(t, moved.Load(), "the mock was moved between the driver's reading and its arming")
	time.Sleep(50 * time.Millisecond) // the driver arms its clock timer and sleeps
	mock.Add(6 * time.Millisecond)    // the mock is at 10ms: the deadline
	select {
	case <-fired:
	case <-time.After(2 * time.Second):
		t.Fatal("the timer due at 10ms did not fire with the mock at 10ms: the driver's clock timer was left armed late by the mock's move")
	}
}

// TestDriver_FiresPastDeadlineArmedByCallback: a callback run by
// the driver arms a timer for a time already passed; it waits on the late
// list for the next Advance, which the driver must make at once, not when
// its next wheel event (an hour away) comes.
func TestDriver_FiresPastDeadlineArmedByCallback(t *testing.T) {
	inBubble(t, "a driver whose callback arms a past deadline", func(t *testing.T) {
		h := newStarted(t, WithShards(1))
		defer h.Stop()
		h.AfterFunc(time.Hour, func() {})
		start := time.Now()
		var firedAt atomic.Int64
		h.AfterFunc(time.Second, func() {
			h.AfterFunc(-time.Second, func() { firedAt.Store(int64(time.Since(start))) })
		})
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Equal(t, int64(time.Second), firedAt.Load(), "the past deadline armed by a callback at 1s fired at (ns since start; 0: not by 2s)")
	})
}

// TestDriver_ArmingAsItGoesToSleep races arming with the driver
// going to sleep. Each timer's callback hands over to the test goroutine,
// which at once arms the next timer, a tick out, into the first of 32
// shards, while the driver, done with the callback, looks over the shards
// for its next wake-up (an hour away) and publishes it. An arming that the
// driver's look missed and that saw it still awake (so did not wake it)
// must be caught by the driver's second look, or it is slept through.
// Time is synctest's: a timer slept through shows as not fired a second
// after its deadline.
func TestDriver_ArmingAsItGoesToSleep(t *testing.T) {
	iterations := 20000
	if testing.Short() || raceEnabled {
		iterations = 2000
	}
	inBubble(t, "a driver racing armings as it goes to sleep", func(t *testing.T) {
		// The real clock of the bubble, given by WithClock so that every
		// timer can be dealt to the first shard.
		h := mustNew(t, WithClock(clock.New()), WithShards(32), WithLevels(8, 8, 8, 8, 8))
		h.Start()
		defer h.Stop()
		dealNext(h, 0)
		h.AfterFunc(time.Hour, func() {})
		fired := make(chan struct{}, 1)
		f := func() { fired <- struct{}{} }
		dealNext(h, 0)
		h.AfterFunc(time.Millisecond, f)
		for i := range iterations {
			select {
			case <-fired:
			case <-time.After(time.Second):
				t.Fatalf("iteration %d: a timer armed a tick out as the driver went to sleep did not fire in a second: the driver slept through it", i)
			}
			dealNext(h, 0)
			h.AfterFunc(time.Millisecond, f)
		}
	})
}

// TestDriver_SeesDeadlineReachedOnLastRearm: while the driver arms
// its clock timer, another goroutine keeps moving the mock (here: 1µs
// after each of the driver's readings before arming), so the driver arms
// again and again, at most 101 times. If the mock reaches the deadline
// during the last try, the timer is due: the driver must see it and fire,
// not go to sleep on a clock timer armed late by the moves.
func TestDriver_SeesDeadlineReachedOnLastRearm(t *testing.T) {
	mock := clock.NewMock()
	start := mock.Now()
	clk := &injectingClock{Mock: mock, after: func(int64) {}}
	h := mustNew(t, WithClock(clk), WithShards(1))
	fired := make(chan time.Duration, 1)
	h.AfterFunc(10*time.Millisecond, func() { fired <- mock.Now().Sub(start) })
	clk.reads.Store(0)
	// Read 1 is the driver's Advance. Then try k (k = 0..100) of its
	// arming reads the clock before arming (read 2+2k) and after (3+2k).
	// The mock moves 1µs after each reading before arming, so every try
	// sees it moved; after the last try's, read 202, onto the deadline.
	clk.after = func(n int64) {
		switch {
		case n >= 2 && n < 202 && n%2 == 0:
			mock.Add(time.Microsecond)
		case n == 202:
			mock.Add(10*time.Millisecond - mock.Now().Sub(start))
		}
	}
	h.Start()
	defer stopWithin(t, h, "after a mock moved during each of its armings")
	select {
	case at := <-fired:
		assert.Equal(t, 10*time.Millisecond, at, "the timer fired with the mock at its deadline")
	case <-time.After(5 * time.Second):
		t.Fatalf("the timer due at 10ms did not fire with the mock at %v, after %d clock readings by the driver: it slept on a clock timer armed late", mock.Now().Sub(start), clk.reads.Load())
	}
	assert.GreaterOrEqual(t, clk.reads.Load(), int64(203), "the driver armed its clock timer 101 times")
}

// A callback may call Start also while a Stop of another goroutine waits
// for the driver running that callback: Start returns at once, Stop and
// the other Stops return once the callback has, and the driver is then
// stopped, for a later Start to start again.
func TestDriver_StartFromACallbackWhileStopWaitsForIt(t *testing.T) {
	h, err := New(WithClock(clock.New()))
	require.NoError(t, err)
	inCallback, stopping := make(chan struct{}), make(chan struct{})
	var startReturned atomic.Bool
	h.AfterFunc(time.Millisecond, func() {
		close(inCallback)
		<-stopping
		time.Sleep(20 * time.Millisecond) // the Stops wait for the driver
		ok, _ := watch.ReturnsWithin(5*time.Second, h.Start)
		startReturned.Store(ok)
	})
	h.Start()
	<-inCallback
	var stops sync.WaitGroup
	for range 3 {
		stops.Go(h.Stop)
	}
	close(stopping)
	if ok, _ := watch.ReturnsWithin(10*time.Second, stops.Wait); !ok {
		t.Fatalf("hung: three Stops did not return within 10s; the callback's Start returned within 5s: %v", startReturned.Load())
	}
	require.True(t, startReturned.Load(), "Start from a callback while Stop waits for the driver did not return within 5s")
	h.driver.runMu.Lock()
	running := h.driver.stop != nil
	h.driver.runMu.Unlock()
	require.False(t, running, "the driver runs after the Stops returned")
	fired := make(chan struct{})
	h.AfterFunc(time.Millisecond, func() { close(fired) })
	h.Start()
	defer h.Stop()
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("a timer armed after the Stops did not fire within 5s of Start")
	}
}
