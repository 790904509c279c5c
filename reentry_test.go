package timingwheel

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Callbacks may call back (docs/guarantees.md), but a callback must not call h.Advance or h.Stop, which wait for
// it. They panic with a message instead of hanging, and only then: the
// same calls from another goroutine, or from a callback of another
// hierarchy, wait as before. Each test has a watchdog: the code before
// hung.

const (
	advanceFromCallback = "timingwheel: Hierarchy.Advance called from a callback of the same Hierarchy; " +
		"it would wait forever for the Advance running that callback"
	stopFromCallback = "timingwheel: Hierarchy.Stop called from a callback of the same Hierarchy while its driver runs; " +
		"it would wait forever for the driver, which waits for the callback to return (stop the driver from another goroutine)"
)

func TestAdvance_FromItsOwnCallbackPanics(t *testing.T) {
	h, clk := newFake(t)
	var r recorder
	h.AfterFunc(time.Millisecond, func() { h.Advance() })
	h.AfterFunc(2*time.Millisecond, r.fn("after"))
	clk.Add(2 * time.Millisecond)
	var p any
	mustReturn(t, 5*time.Second, "Advance called from a callback", func() { p = recovered(func() { h.Advance() }) })
	assert.Equal(t, advanceFromCallback, p)
	// The panic left the hierarchy consistent: the rest fires next time.
	mustCheck(t, h)
	assert.Equal(t, 1, advanceWithin(t, h, "after the panic"))
	assert.Equal(t, []string{"after"}, r.take())
}

// TestAdvance_FromCodeACallbackCallsPanics: the call need not be in the
// callback itself; here it is two hierarchies down, from a callback of
// another hierarchy that h's callback advances.
func TestAdvance_FromCodeACallbackCallsPanics(t *testing.T) {
	h, clk := newFake(t)
	h2, clk2 := newFake(t)
	h2.AfterFunc(time.Millisecond, func() { h.Advance() })
	h.AfterFunc(time.Millisecond, func() {
		clk2.Add(time.Millisecond)
		h2.Advance() // another hierarchy: allowed, and its callback runs here
	})
	clk.Add(time.Millisecond)
	var p any
	mustReturn(t, 5*time.Second, "Advance called from a callback", func() { p = recovered(func() { h.Advance() }) })
	assert.Equal(t, advanceFromCallback, p)
	mustCheck(t, h)
	mustCheck(t, h2)
}

// TestAdvance_FromAParallelCallbackPanics: with WithParallelCallbacks the
// callbacks run on goroutines of Advance's, which wait for them too.
func TestAdvance_FromAParallelCallbackPanics(t *testing.T) {
	h, clk := newFake(t, WithShards(2), WithParallelCallbacks())
	h.knobs().pick = func() *shard { return h.shards[1] }
	h.AfterFunc(time.Millisecond, func() { h.Advance() })
	clk.Add(time.Millisecond)
	var p any
	mustReturn(t, 5*time.Second, "Advance called from a parallel callback", func() { p = recovered(func() { h.Advance() }) })
	assert.Equal(t, advanceFromCallback, p)
	mustCheck(t, h)
}

// TestAdvance_FromAnExecutorRunningInlinePanics: an executor that runs the
// run at once runs f inside Advance.
func TestAdvance_FromAnExecutorRunningInlinePanics(t *testing.T) {
	h, clk := newFake(t)
	var tm Timer
	tm.InitOn(h, func(run func()) { run() }, func() { h.Advance() })
	tm.Reset(time.Millisecond)
	clk.Add(time.Millisecond)
	var p any
	mustReturn(t, 5*time.Second, "Advance called from an inline executor's run", func() { p = recovered(func() { h.Advance() }) })
	assert.Equal(t, advanceFromCallback, p)
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

func TestStop_FromACallbackOfTheDriverPanics(t *testing.T) {
	h, err := New()
	require.NoError(t, err)
	h.Start()
	got := make(chan any, 1)
	h.AfterFunc(time.Millisecond, func() {
		got <- recovered(h.Stop) // recover: a panic on the driver would end the test binary
	})
	assert.Equal(t, stopFromCallback, recvWithin(t, 5*time.Second, got, "Stop from the driver's callback"))
	stopWithin(t, h, "after the Stop from a callback")
	assert.Equal(t, int64(notRunning), h.driver.sleepUntil.Load())
}

// TestStop_FromACallbackOfAnAdvanceLoopWhileTheDriverRunsPanics: the
// driver may be waiting for that Advance to return, so Stop would hang.
func TestStop_FromACallbackOfAnAdvanceLoopWhileTheDriverRunsPanics(t *testing.T) {
	h, mock := newMock(t)
	h.Start()
	defer stopWithin(t, h, "the driver")
	got := make(chan any, 1)
	h.AfterFunc(time.Hour, func() { got <- recovered(h.Stop) })
	mock.Add(time.Hour)
	go h.Advance() // or the driver runs it: both are inside Advance
	assert.Equal(t, stopFromCallback, recvWithin(t, 5*time.Second, got, "Stop from a callback"))
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
	h, err := New()
	require.NoError(t, err)
	h2, err := New()
	require.NoError(t, err)
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
	assert.Equal(t, int64(notRunning), h.driver.sleepUntil.Load(), "h's driver stopped")
}

// TestStart_FromItsOwnCallbackIsANoOp: the driver runs already.
func TestStart_FromItsOwnCallbackIsANoOp(t *testing.T) {
	h, err := New()
	require.NoError(t, err)
	h.Start()
	defer stopWithin(t, h, "the driver")
	done := make(chan struct{})
	h.AfterFunc(time.Millisecond, func() {
		h.Start()
		close(done)
	})
	recvWithin(t, 5*time.Second, done, "Start from the driver's callback")
}

// BenchmarkAdvance_Idle and BenchmarkAdvance_OneFiring measure what the
// stack mark costs every Advance: a few calls (compare with the code
// before it, interleaved: the machine's noise is larger than the cost).
func BenchmarkAdvance_Idle(b *testing.B) {
	h, clk := newFake(b, WithShards(1))
	h.AfterFunc(time.Hour, func() {})
	b.ReportAllocs()
	for b.Loop() {
		clk.Add(time.Millisecond)
		h.Advance()
	}
}

func BenchmarkAdvance_OneFiring(b *testing.B) {
	h, clk := newFake(b, WithShards(1))
	var tm Timer
	tm.Init(h, func() {})
	b.ReportAllocs()
	for b.Loop() {
		tm.Reset(time.Millisecond)
		clk.Add(time.Millisecond)
		h.Advance()
	}
}
