package timingwheel

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/timingwheel/timingwheel/internal/watch"
)

// Callbacks may call back (docs/guarantees.md), but a callback must not call
// h.Advance, or h.Stop while h's driver runs: each waits for the callback
// that called it, which is a deadlock, documented as sync.Mutex documents a
// recursive Lock and, like it, not detected. These tests pin the waiting
// that makes it one: the same call, made on a goroutine of the callback's
// own, does not return while the callback runs, and returns once it has.
// The same calls from a callback of another hierarchy wait as any
// goroutine does. Each test has a watchdog.

// assertWaitsForCallback is called from a callback: it makes call on a
// goroutine of its own and asserts that call has not returned by the time
// the callback is about to return (after a moment to do so). It returns a
// channel closed once call has returned.
func assertWaitsForCallback(t *testing.T, what string, call func()) <-chan struct{} {
	returned, done := watch.ReturnsWithin(20*time.Millisecond, call)
	if returned {
		t.Errorf("%s returned while the callback it waits for was still running", what)
	}
	return done
}

func TestAdvance_FromItsOwnCallbackWaitsForIt(t *testing.T) {
	h, clk := newFake(t)
	var r recorder
	inner := make(chan int, 1)
	var returned <-chan struct{}
	h.AfterFunc(time.Millisecond, func() {
		returned = assertWaitsForCallback(t, "h.Advance", func() { inner <- h.Advance() })
	})
	h.AfterFunc(2*time.Millisecond, r.fn("after"))
	clk.Add(2 * time.Millisecond)
	assert.Equal(t, 2, advanceWithin(t, h, "a callback whose goroutine calls Advance"))
	recvWithin(t, 5*time.Second, returned, "h.Advance once the callback returned")
	assert.Equal(t, 0, <-inner, "the waiting Advance found nothing left")
	mustCheck(t, h)
	assert.Equal(t, []string{"after"}, r.take())
}

// TestAdvance_OfAnotherHierarchyFromACallbackRuns: a callback may advance
// another hierarchy, whose callbacks then run inside it.
func TestAdvance_OfAnotherHierarchyFromACallbackRuns(t *testing.T) {
	h, clk := newFake(t)
	h2, clk2 := newFake(t)
	var r recorder
	h2.AfterFunc(time.Millisecond, r.fn("h2"))
	h.AfterFunc(time.Millisecond, func() {
		clk2.Add(time.Millisecond)
		h2.Advance() // another hierarchy: allowed, and its callback runs here
	})
	clk.Add(time.Millisecond)
	assert.Equal(t, 1, advanceWithin(t, h, "a callback advancing another hierarchy"))
	assert.Equal(t, []string{"h2"}, r.take())
	mustCheck(t, h)
	mustCheck(t, h2)
}

// TestAdvance_FromAParallelCallbackWaitsForIt: with WithParallelCallbacks
// the callbacks run on goroutines of Advance's, which waits for them too.
func TestAdvance_FromAParallelCallbackWaitsForIt(t *testing.T) {
	h, clk := newFake(t, WithShards(2), WithParallelCallbacks())
	dealNext(h, 1)
	var returned <-chan struct{}
	h.AfterFunc(time.Millisecond, func() {
		returned = assertWaitsForCallback(t, "h.Advance", func() { h.Advance() })
	})
	clk.Add(time.Millisecond)
	assert.Equal(t, 1, advanceWithin(t, h, "a parallel callback whose goroutine calls Advance"))
	recvWithin(t, 5*time.Second, returned, "h.Advance once the callback returned")
	mustCheck(t, h)
}

// TestAdvance_FromAnExecutorRunningInlineWaitsForIt: an executor that runs
// the run at once runs f inside Advance.
func TestAdvance_FromAnExecutorRunningInlineWaitsForIt(t *testing.T) {
	h, clk := newFake(t)
	var tm Timer
	var returned <-chan struct{}
	tm.InitOn(h, func(run func()) { run() }, func() {
		returned = assertWaitsForCallback(t, "h.Advance", func() { h.Advance() })
	})
	tm.Reset(time.Millisecond)
	clk.Add(time.Millisecond)
	assert.Equal(t, 1, advanceWithin(t, h, "an inline executor's run whose goroutine calls Advance"))
	recvWithin(t, 5*time.Second, returned, "h.Advance once the run returned")
}

// TestAdvance_FromAnotherHierarchysCallbackWaits: while one goroutine
// advances h, a callback of another hierarchy calling h.Advance waits for
// it, as any other goroutine does: no panic.
func TestAdvance_FromAnotherHierarchysCallbackWaits(t *testing.T) {
	h, clk := newFake(t)
	h2, clk2 := newFake(t)
	inF, release := make(chan struct{}), make(chan struct{})
	h.AfterFunc(time.Millisecond, func() {
		close(inF)
		<-release
	})
	clk.Add(time.Millisecond)
	first := make(chan int, 1)
	go func() { first <- h.Advance() }()
	recvWithin(t, 5*time.Second, inF, "h's callback starting")

	h.AfterFunc(time.Millisecond, func() {}) // for the second Advance of h
	clk.Add(time.Millisecond)
	second := make(chan any, 1)
	h2.AfterFunc(time.Millisecond, func() {
		second <- recovered(func() { h.Advance() }) // waits for the first
	})
	clk2.Add(time.Millisecond)
	done := make(chan int, 1)
	go func() { done <- h2.Advance() }()
	select {
	case p := <-second:
		t.Fatalf("h.Advance from h2's callback returned (or panicked with %v) while h's Advance ran", p)
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	assert.Equal(t, 1, recvWithin(t, 5*time.Second, first, "h's first Advance"))
	assert.Nil(t, recvWithin(t, 5*time.Second, second, "h.Advance from h2's callback"), "no panic")
	assert.Equal(t, 1, recvWithin(t, 5*time.Second, done, "h2's Advance"))
	assert.Equal(t, 0, h.Len())
}

// TestAdvance_ConcurrentCallsWaitForEachOther: many goroutines advancing
// one hierarchy at once, while its callbacks run: each waits its turn,
// none panics.
func TestAdvance_ConcurrentCallsWaitForEachOther(t *testing.T) {
	h, clk := newFake(t)
	var ran sync.WaitGroup
	const n = 200
	ran.Add(n)
	for i := range n {
		h.AfterFunc(time.Duration(i%5+1)*time.Millisecond, func() {
			time.Sleep(10 * time.Microsecond)
			ran.Done()
		})
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				clk.Add(100 * time.Microsecond)
				h.Advance()
			}
		})
	}
	waitWithin(t, 10*time.Second, &wg, "the concurrent Advances")
	clk.Add(time.Second)
	advanceWithin(t, h, "the rest")
	waitWithin(t, 5*time.Second, &ran, "every callback")
}

// TestStop_FromACallbackOfTheDriverWaitsForIt: Stop waits for the driver,
// which waits for its callback.
func TestStop_FromACallbackOfTheDriverWaitsForIt(t *testing.T) {
	h := newStarted(t)
	got := make(chan (<-chan struct{}), 1)
	h.AfterFunc(time.Millisecond, func() {
		got <- assertWaitsForCallback(t, "h.Stop", h.Stop)
	})
	returned := recvWithin(t, 5*time.Second, got, "the driver's callback")
	recvWithin(t, 10*time.Second, returned, "h.Stop once the callback returned")
	assert.Equal(t, h.driver.idleState(), h.driver.sleepUntil.Load())
}

// TestStop_FromACallbackOfAnAdvanceLoopWhileTheDriverRunsReturnsAfterIt:
// the driver may be waiting for that Advance to return, so Stop may wait
// for the callback too; once the callback has returned, Stop returns and
// the driver has stopped.
func TestStop_FromACallbackOfAnAdvanceLoopWhileTheDriverRunsReturnsAfterIt(t *testing.T) {
	h, mock := newMock(t)
	h.Start()
	defer stopWithin(t, h, "the driver")
	stopped := make(chan struct{})
	release := make(chan struct{})
	h.AfterFunc(time.Hour, func() {
		go func() {
			h.Stop()
			close(stopped)
		}()
		<-release
	})
	mock.Add(time.Hour)
	go h.Advance() // or the driver runs it: both are inside Advance
	close(release)
	recvWithin(t, 10*time.Second, stopped, "Stop from a callback's goroutine")
	assert.Equal(t, h.driver.idleState(), h.driver.sleepUntil.Load())
}

// TestStop_FromACallbackWithoutTheDriverReturns: with no driver running,
// Stop returns at once, also from a callback.
func TestStop_FromACallbackWithoutTheDriverReturns(t *testing.T) {
	h, clk := newFake(t)
	stopped := false
	h.AfterFunc(time.Millisecond, func() {
		h.Stop()
		stopped = true
	})
	clk.Add(time.Millisecond)
	assert.Equal(t, 1, advanceWithin(t, h, "a callback calling Stop"))
	assert.True(t, stopped)
}

// TestStop_FromAnotherHierarchysDriverCallbackWaits: the driver of h2
// stopping h from a callback stops h's driver as any goroutine does.
func TestStop_FromAnotherHierarchysDriverCallbackWaits(t *testing.T) {
	h := mustNew(t)
	h2 := mustNew(t)
	h.Start()
	h2.Start()
	defer stopWithin(t, h2, "h2's driver")
	ticks := make(chan struct{}, 1)
	h.Every(time.Millisecond, func() { // h's driver busy now and then
		select {
		case ticks <- struct{}{}:
		default:
		}
	})
	recvWithin(t, 5*time.Second, ticks, "h's driver running")
	got := make(chan any, 1)
	h2.AfterFunc(time.Millisecond, func() { got <- recovered(h.Stop) })
	assert.Nil(t, recvWithin(t, 5*time.Second, got, "h.Stop from h2's callback"), "no panic")
	assert.Equal(t, h.driver.idleState(), h.driver.sleepUntil.Load(), "h's driver stopped")
}

// TestStart_FromItsOwnCallbackIsANoOp: the driver runs already.
func TestStart_FromItsOwnCallbackIsANoOp(t *testing.T) {
	h := newStarted(t)
	defer stopWithin(t, h, "the driver")
	done := make(chan struct{})
	h.AfterFunc(time.Millisecond, func() {
		h.Start()
		close(done)
	})
	recvWithin(t, 5*time.Second, done, "Start from the driver's callback")
}
