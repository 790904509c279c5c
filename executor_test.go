package timingwheel

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Callbacks on an executor (docs/guarantees.md, "Callbacks on an
// executor"). "Exactly once" holds across the hop: between the firing and the start of its run, Stop and Reset return
// true and cancel that arming.

// queue is an executor that keeps the runs it is handed, for the test to
// call when it likes.
type queue struct {
	mu   sync.Mutex
	runs []func()
}

func (q *queue) exec(run func()) {
	q.mu.Lock()
	q.runs = append(q.runs, run)
	q.mu.Unlock()
}

// runAll calls the runs q keeps, in order.
func (q *queue) runAll() {
	for _, run := range q.take() {
		run()
	}
}

func (q *queue) take() []func() {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := q.runs
	q.runs = nil
	return r
}

// onQueue returns an executor timer on h, not armed, that hands its runs
// to q; *ran counts f's calls.
func onQueue(t *testing.T) (h *Hierarchy, clk *fakeClock, q *queue, tm *Timer, ran *int) {
	h, clk = newFake(t)
	q, tm, ran = &queue{}, new(Timer), new(int)
	tm.InitOn(h, q.exec, func() { *ran++ })
	return h, clk, q, tm, ran
}

// firedOnQueue returns an executor timer, armed 1ms out on h and fired
// once, its run waiting on q; *ran counts f's calls.
func firedOnQueue(t *testing.T) (h *Hierarchy, clk *fakeClock, q *queue, tm *Timer, ran *int) {
	h, clk, q, tm, ran = onQueue(t)
	tm.Reset(time.Millisecond)
	clk.Add(time.Millisecond)
	advanceWithin(t, h, "the deadline")
	return h, clk, q, tm, ran
}

func TestExecutor_FiringHandsTheRunToExec(t *testing.T) {
	h, clk, q, tm, ran := onQueue(t)
	assert.False(t, tm.Reset(10*time.Millisecond))
	clk.Add(10 * time.Millisecond)
	assert.Equal(t, 1, advanceWithin(t, h, "the deadline"), "the firing counts as a callback run by Advance")
	runs := q.take()
	require.Len(t, runs, 1)
	assert.Zero(t, *ran, "f waits for the executor")
	assert.Equal(t, 1, h.Len(), "armed until its run starts")
	runs[0]()
	assert.Equal(t, 1, *ran)
	assert.Equal(t, 0, h.Len())
	assert.False(t, tm.Stop(), "fired: its run has started")
	st := h.Stats()
	assert.Equal(t, uint64(1), st.Fired)
	assert.Equal(t, st.Started, st.Fired+st.Stopped+uint64(st.Armed))
	mustCheck(t, h)
}

func TestExecutor_StopBetweenFiringAndRunWins(t *testing.T) {
	h, _, q, tm, ran := firedOnQueue(t)
	assert.True(t, tm.Stop(), "Stop before the run starts cancels the arming")
	assert.False(t, tm.Stop())
	q.runAll()
	assert.Zero(t, *ran, "f never runs for the stopped arming")
	assert.Equal(t, 0, h.Len())
	st := h.Stats()
	assert.Equal(t, uint64(0), st.Fired)
	assert.Equal(t, uint64(1), st.Stopped)
	mustCheck(t, h)
}

func TestExecutor_ResetBetweenFiringAndRunWins(t *testing.T) {
	h, clk := newFake(t)
	q := &queue{}
	var at []time.Duration
	start := clk.Now()
	var tm Timer
	tm.InitOn(h, q.exec, func() { at = append(at, clk.Now().Sub(start)) })
	tm.Reset(time.Millisecond)
	clk.Add(time.Millisecond)
	advanceWithin(t, h, "the deadline")
	old := q.take()
	assert.True(t, tm.Reset(5*time.Millisecond), "Reset before the run starts cancels the arming")
	for _, run := range old {
		run()
	}
	assert.Empty(t, at, "f never runs for the re-armed arming")
	assert.Equal(t, 1, h.Len())
	clk.Add(5 * time.Millisecond)
	advanceWithin(t, h, "the new deadline")
	q.runAll()
	assert.Equal(t, []time.Duration{6 * time.Millisecond}, at)
	mustCheck(t, h)
}

// A run called late, after its firing was stopped and a later firing of
// the same binding is pending, takes that later firing: f runs once, for
// the firing that stands, and the later firing's own run calls nothing. The
// same for a periodic timer stopped and armed again.
func TestExecutor_LateRunOfACancelledFiringTakesTheNextOnce(t *testing.T) {
	h, clk := newFake(t)
	q := &queue{}
	calls := 0
	var tm Timer
	tm.InitOn(h, q.exec, func() { calls++ })
	for _, periodic := range []bool{false, true} {
		calls = 0
		arm := func() {
			if periodic {
				tm.ResetEvery(time.Millisecond)
			} else {
				tm.Reset(time.Millisecond)
			}
		}
		arm()
		clk.Add(time.Millisecond)
		advanceWithin(t, h, "the first firing")
		late := q.take()
		require.Len(t, late, 1)
		require.True(t, tm.Stop(), "periodic=%v: Stop between the firing and its run", periodic)
		arm()
		clk.Add(time.Millisecond)
		advanceWithin(t, h, "the second firing")
		own := q.take()
		require.Len(t, own, 1)
		late[0]()
		assert.Equal(t, 1, calls, "periodic=%v: the late run did not take the pending firing", periodic)
		own[0]()
		assert.Equal(t, 1, calls, "periodic=%v: the second firing called f twice", periodic)
		tm.Stop()
	}
	mustCheck(t, h)
}

func TestExecutor_RunCalledTwiceCallsFOnce(t *testing.T) {
	h, _, q, _, ran := firedOnQueue(t)
	runs := q.take()
	require.Len(t, runs, 1)
	runs[0]()
	runs[0]()
	assert.Equal(t, 1, *ran)
	mustCheck(t, h)
}

// TestExecutor_PeriodicRunsThroughExec: each run of a periodic executor
// timer is handed over, the next armed first; Stop before a run starts
// cancels it and every later one.
func TestExecutor_PeriodicRunsThroughExec(t *testing.T) {
	h, clk, q, tm, ran := onQueue(t)
	tm.ResetEvery(time.Millisecond)
	for range 3 {
		clk.Add(time.Millisecond)
		advanceWithin(t, h, "one period")
		q.runAll()
	}
	assert.Equal(t, 3, *ran)
	clk.Add(time.Millisecond)
	advanceWithin(t, h, "one period")
	assert.True(t, tm.Stop())
	q.runAll()
	assert.Equal(t, 3, *ran, "the run handed over before Stop does not call f")
	assert.Equal(t, 0, h.Len())
	mustCheck(t, h)
}

func TestExecutor_BadInputPanics(t *testing.T) {
	h, _ := newFake(t)
	var tm Timer
	assert.PanicsWithValue(t, "timingwheel: Timer.InitOn called with a nil exec func", func() { tm.InitOn(h, nil, func() {}) })
	assert.PanicsWithValue(t, "timingwheel: Timer.InitOn called with a nil func", func() { tm.InitOn(h, func(func()) {}, nil) })
	assert.PanicsWithValue(t, "timingwheel: Timer.InitOn called with a nil or zero Hierarchy", func() { tm.InitOn(nil, func(func()) {}, func() {}) })
	assert.PanicsWithValue(t, "timingwheel: Timer.InitOn called on a nil *Timer", func() { (*Timer)(nil).InitOn(h, func(func()) {}, func() {}) })
	tm.InitOn(h, func(func()) {}, func() {})
	tm.Reset(time.Second)
	assert.PanicsWithValue(t, "timingwheel: Timer.Init called on an armed Timer", func() { tm.InitOn(h, func(func()) {}, func() {}) })
}

// TestExecutor_PendingRunCountsAsArmedForInit: Init of a timer whose run is
// pending panics, as for any armed timer.
func TestExecutor_PendingRunCountsAsArmedForInit(t *testing.T) {
	h, clk := newFake(t)
	var tm Timer
	tm.InitOn(h, func(func()) {}, func() {})
	tm.Reset(time.Millisecond)
	clk.Add(time.Millisecond)
	advanceWithin(t, h, "the deadline")
	assert.Panics(t, func() { tm.Init(h, func() {}) })
	assert.True(t, tm.Stop())
	tm.Init(h, func() {}) // unarmed now
}

// TestExecutor_ArmingAllocatesNothing: arming, firing, running and
// stopping an executor timer allocate nothing.
func TestExecutor_ArmingAllocatesNothing(t *testing.T) {
	h, clk := newFake(t)
	var pending func()
	ran := 0
	var tm Timer
	tm.InitOn(h, func(run func()) { pending = run }, func() { ran++ })
	allocs := testing.AllocsPerRun(1000, func() {
		tm.Reset(time.Millisecond)
		clk.Add(time.Millisecond)
		h.Advance()
		pending()
		tm.Reset(time.Millisecond)
		tm.Stop()
	})
	assert.Zero(t, allocs)
	assert.Equal(t, 1001, ran)
}

// TestExecutor_LoopOwnsItsTimers runs a loop goroutine that alone re-arms
// and stops its timers, and runs what the driver hands it, while the real
// driver fires them on its own goroutine (under -race in CI). Every f that
// runs must be for the loop's current arming: never before the deadline
// the loop last set, never after the loop stopped the timer.
func TestExecutor_LoopOwnsItsTimers(t *testing.T) {
	h := newStarted(t)
	defer stopWithin(t, h, "the driver")
	loop := make(chan func(), 1024)
	exec := func(run func()) {
		select {
		case loop <- run:
		default:
			t.Error("the loop's queue is full")
		}
	}
	const n = 16
	type conn struct {
		t        Timer
		armed    bool
		deadline time.Time
		fired    int
	}
	conns := make([]*conn, n)
	var bad atomic.Int32
	done := make(chan struct{})
	go func() { // the loop
		defer close(done)
		stopAt := time.Now().Add(300 * time.Millisecond)
		for i := range conns {
			c := &conns[i]
			*c = &conn{}
			cc := *c
			cc.t.InitOn(h, exec, func() {
				if !cc.armed || h.Now().Before(cc.deadline) {
					bad.Add(1) // a callback for an arming the loop cancelled
				}
				cc.armed = false
				cc.fired++
			})
		}
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		k := 0
		for time.Now().Before(stopAt) {
			select {
			case run := <-loop:
				run()
			case <-tick.C:
				c := conns[k%n]
				k++
				switch k % 3 {
				case 0: // traffic: push the deadline back
					c.t.Reset(time.Duration(1+k%3) * time.Millisecond)
					c.armed, c.deadline = true, c.t.Deadline()
				case 1:
					c.t.Stop()
					c.armed = false
				default:
					if !c.armed {
						c.t.Reset(time.Millisecond)
						c.armed, c.deadline = true, c.t.Deadline()
					}
				}
			}
		}
		for _, c := range conns {
			c.t.Stop()
		}
		for { // drain: stopped timers' runs must not call f
			select {
			case run := <-loop:
				run()
			default:
				return
			}
		}
	}()
	recvWithin(t, 10*time.Second, done, "the loop")
	assert.Zero(t, bad.Load(), "f ran for an arming that the loop had stopped or re-armed")
	fired := 0
	for _, c := range conns {
		fired += c.fired
	}
	assert.Greater(t, fired, 0, "no timer fired at all")
	assert.Equal(t, 0, h.Len())
}

// TestExecutor_StaleRunOfAnEarlierBindingCallsNothing: a run handed over,
// then cancelled by Stop and left queued on the executor, is called after
// the timer was bound again with InitOn and has fired for its new binding:
// it calls neither callback, and the new binding's own run still calls the
// new one (it took the new firing, and the new run found nothing, before).
func TestExecutor_StaleRunOfAnEarlierBindingCallsNothing(t *testing.T) {
	h, clk := newFake(t)
	var queue []func()
	exec := func(run func()) { queue = append(queue, run) }
	var tm Timer
	var old, cur int
	tm.InitOn(h, exec, func() { old++ })
	tm.Reset(time.Millisecond)
	clk.Add(time.Millisecond)
	h.Advance()
	require.Len(t, queue, 1)
	require.True(t, tm.Stop(), "the pending run is cancelled")
	tm.InitOn(h, exec, func() { cur++ })
	tm.Reset(time.Millisecond)
	clk.Add(time.Millisecond)
	h.Advance()
	require.Len(t, queue, 2)
	queue[0]() // the earlier binding's run, late
	assert.Equal(t, 0, old, "the cancelled run called its callback")
	assert.Equal(t, 0, cur, "the earlier binding's run called the new callback")
	assert.Equal(t, 1, h.Len(), "the new firing's run is still pending")
	queue[1]()
	assert.Equal(t, 1, cur, "the new binding's run did not call its callback")
	assert.Equal(t, 0, h.Len())
	mustCheck(t, h)
}
