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

// watchdog fails the test with what, unless done is closed within d.
func watchdog(t *testing.T, d time.Duration, what string, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("hung: %s (no progress in %v)", what, d)
	}
}

// TestDriver_MockMovedOntoDeadlineBetweenReadAndArm is the regression test
// for a driver that read the clock, was overtaken by a mock moved onto the
// deadline by less than a tick, and then slept past the due timer. The
// move is injected after each of the first clock reads in turn.
func TestDriver_MockMovedOntoDeadlineBetweenReadAndArm(t *testing.T) {
	for k := int64(1); k <= 6; k++ {
		mock := clock.NewMock()
		var injected atomic.Bool
		clk := &injectingClock{Mock: mock, after: func(int64) {}}
		h, err := New(WithClock(clk))
		require.NoError(t, err)
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
		watchdog(t, 5*time.Second, fmt.Sprintf("a due timer left unfired by the driver on a mock moved after read %d", k), fired)
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
	h, err := New(WithClock(clk))
	require.NoError(t, err)
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
	watchdog(t, 10*time.Second, "the hierarchy or the mock after concurrent mock moves", done)
	stopWithin(t, h, "after concurrent mock moves")
	assert.Equal(t, int64(50), fired.Load())
}

// TestDriver_MockMovedByAnotherGoroutine drives timers with the driver on a
// mock that another goroutine moves in random steps, sub-tick and larger:
// every timer fires, none before its deadline, none twice.
func TestDriver_MockMovedByAnotherGoroutine(t *testing.T) {
	mock := clock.NewMock()
	h, err := New(WithClock(mock))
	require.NoError(t, err)
	h.Start()
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
	watchdog(t, 30*time.Second, "timers on a mock moved by another goroutine, with the driver", done)
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
	h, err := New()
	require.NoError(t, err)
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
	h, err := New(WithClock(clk))
	require.NoError(t, err)
	h.Start()
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
		before := clk.reads.Load()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Equal(t, before, clk.reads.Load(), "the driver woke with nothing armed")
	})
}
