package timingwheel

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests written during a mutation-testing pass: each one kills at least one
// small, plausible bug of the production code that the other tests let
// through, or caught only by the suite's 5-minute timeout. A test that can
// hang on such a bug runs the call that would hang under mustReturn, which
// fails with a message naming it.

// mustReturn runs f on a goroutine of its own and fails the test, naming
// what hung, unless f returns within d (the hung goroutine is left behind;
// it holds only the test's own hierarchy). A panic of f is raised again
// here. If f ends its goroutine by t.FailNow (a require inside it), the test
// stops here too.
func mustReturn(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	var p any
	returned := false
	go func() {
		defer close(done)
		defer func() { p = recover() }()
		f()
		returned = true
	}()
	select {
	case <-done:
		if p != nil {
			panic(p)
		}
		if !returned {
			t.FailNow() // f called t.FailNow (or runtime.Goexit): it has reported why
		}
	case <-time.After(d):
		t.Fatalf("hung: %s did not return within %v", what, d)
	}
}

// mustProgress runs f on a goroutine of its own, as mustReturn does, and
// fails the test, naming what hung and where, if progress (read with
// atomic loads; f moves it on as it works) stays put for stall.
func mustProgress(t *testing.T, stall time.Duration, what string, progress *atomic.Int64, f func()) {
	t.Helper()
	done := make(chan struct{})
	var p any
	returned := false
	go func() {
		defer close(done)
		defer func() { p = recover() }()
		f()
		returned = true
	}()
	tick := time.NewTicker(stall)
	defer tick.Stop()
	last := progress.Load()
	for {
		select {
		case <-done:
			if p != nil {
				panic(p)
			}
			if !returned {
				t.FailNow()
			}
			return
		case <-tick.C:
			now := progress.Load()
			if now == last {
				t.Fatalf("hung: %s made no progress for %v, at step %d", what, stall, now)
			}
			last = now
		}
	}
}

// stopWithin is h.Stop under mustReturn: Stop waits for the driver.
func stopWithin(t *testing.T, h *Hierarchy, what string) {
	t.Helper()
	mustReturn(t, 10*time.Second, "Stop of the driver ("+what+")", h.Stop)
}

// waitWithin is wg.Wait under mustReturn.
func waitWithin(t *testing.T, d time.Duration, wg *sync.WaitGroup, what string) {
	t.Helper()
	mustReturn(t, d, what, wg.Wait)
}

// recvWithin waits for a value on ch, failing the test, naming what hung,
// unless one comes within d.
func recvWithin[T any](t *testing.T, d time.Duration, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("hung: %s did not happen within %v", what, d)
		panic("unreachable")
	}
}

// inBubble runs f in a synctest bubble under mustReturn: a driver that
// spins keeps the bubble from ever blocking, and synctest.Wait from
// returning.
func inBubble(t *testing.T, what string, f func(t *testing.T)) {
	t.Helper()
	mustReturn(t, 10*time.Second, what+" (in a synctest bubble)", func() { synctest.Test(t, f) })
}

// advanceWithin is h.Advance under mustReturn.
func advanceWithin(t *testing.T, h *Hierarchy, what string) int {
	t.Helper()
	var n int
	mustReturn(t, 5*time.Second, "Advance ("+what+")", func() { n = h.Advance() })
	return n
}

// lazyTimerMidSlot arms, on a single-shard hierarchy, a timer due at 2m0.5s:
// it sits in the minutes level, in the slot that cascades at 2m straight
// down to level 0, and moving it later takes no lock.
func lazyTimerMidSlot(t *testing.T, f func()) (*Hierarchy, *fakeClock, *Timer) {
	h, clk := newFake(t, WithShards(1))
	tm := h.AfterFunc(2*time.Minute+500*time.Millisecond, f)
	require.GreaterOrEqual(t, tm.filed-tm.home().now.Load(), h.lazyTicks, "the timer is beyond level 0")
	return h, clk, tm
}

// TestMutants_LazyResetStraddlingCascadeIntoLevel0: a lock-free Reset whose
// reads come before a cascade that takes its timer down to level 0 (filed
// by its old deadline) and whose store comes after must notice the cascade
// (seq changed) and file the timer again, or Next reports the old deadline.
// Here the store comes after the whole cascade; in
// TestLazyReset_CascadeBeforeStore it comes between two of its batches.
func TestMutants_LazyResetStraddlingCascadeIntoLevel0(t *testing.T) {
	h, clk, tm := lazyTimerMidSlot(t, func() {})
	origin := h.origin
	defer func() { testHookReset = nil }()
	cascaded := false
	testHookReset = func(*Timer) {
		testHookReset = nil
		clk.Set(origin.Add(2 * time.Minute))
		h.Advance() // cascades the minute slot: the timer lands at level 0, filed by its old deadline
		cascaded = tm.filed-tm.home().now.Load() < h.lazyTicks
	}
	var reset bool
	mustReturn(t, 5*time.Second, "ResetAt, with an Advance in its hook", func() { reset = tm.ResetAt(origin.Add(3 * time.Minute)) })
	assert.True(t, reset, "the Reset found the timer armed")
	require.True(t, cascaded, "the Advance in the hook cascaded the timer to level 0")
	next, ok := h.Next()
	require.True(t, ok)
	assert.Equal(t, origin.Add(3*time.Minute), next, "Next is the new deadline, not the old one the cascade filed the timer by")
	mustCheck(t, h)
}

// TestMutants_SelfRearmForNowOncePerAdvance: a callback that re-arms its
// timer for "now" (here at most 5 times) fires once per Advance: the
// re-arming waits for the next Advance, in its own shard and in another.
func TestMutants_SelfRearmForNowOncePerAdvance(t *testing.T) {
	for _, shards := range []int{1, 2} {
		h, clk := newFake(t, WithShards(shards))
		roundRobin(h)
		clk.Add(time.Second)
		fires := 0
		var tm *Timer
		f := func() {
			fires++
			if fires < 5 {
				tm.Reset(0)
			}
		}
		tm = h.AfterFunc(0, f)
		h.AfterFunc(0, func() {
			if fires < 5 {
				h.AfterFunc(0, func() {}) // a new timer for now, in either shard
			}
		})
		for i := 1; i <= 3; i++ {
			n := advanceWithin(t, h, "a callback re-arms its timer for now")
			assert.Equal(t, i, fires, "shards=%d: Advance %d: a timer re-armed by its callback for now fires again in the same Advance", shards, i)
			assert.LessOrEqual(t, n, 2, "shards=%d: Advance %d ran timers armed during it for now", shards, i)
		}
		mustCheck(t, h)
	}
}

// TestMutants_BatchesLetTheLockGo: between two batches of a long cascade
// or of sorting past deadlines, the shard's lock is free (the test hook
// runs there), and the work then carries on.
func TestMutants_BatchesLetTheLockGo(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	h.knobs().batch = 4
	s := h.shards[0]
	var yields, held int
	h.knobs().betweenBatches = func() {
		yields++
		if s.mu.TryLock() {
			s.mu.Unlock()
		} else {
			held++
			t.Errorf("batch %d: the shard's lock is held between batches", yields)
		}
	}
	fired := 0
	for i := range 20 {
		h.AfterFunc(-time.Duration(i+1)*time.Millisecond, func() { fired++ }) // past deadlines: sorted in batches
		h.AfterFunc(30*time.Second+time.Duration(i)*time.Millisecond, func() { fired++ })
	}
	clk.Add(31 * time.Second)
	assert.Equal(t, 40, advanceWithin(t, h, "batches of a sort and of a cascade"))
	assert.Equal(t, 40, fired)
	assert.Positive(t, yields, "the work was done in batches")
	assert.Zero(t, held, "the shard's lock was held between batches")
	mustCheck(t, h)
}

// TestMutants_CascadeYieldsToWaiters: while a long cascade runs, another
// goroutine stops and re-arms its timers, taking the shard's lock each
// time, so it is often waiting for the lock when a batch ends: the cascade
// lets it in between batches (without the test hook, by letting the lock
// go and yielding), and both finish.
func TestMutants_CascadeYieldsToWaiters(t *testing.T) {
	for range 10 { // a round may happen to find no goroutine waiting
		cascadeWithWaiter(t)
	}
}

func cascadeWithWaiter(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	h.knobs().batch = 1
	const n = 2000
	timers := make([]*Timer, n)
	for i := range timers {
		timers[i] = h.AfterFunc(30*time.Second+time.Duration(i%1000)*time.Millisecond, func() {})
	}
	clk.Add(29 * time.Second)
	advanceWithin(t, h, "the Advance before the cascade")
	var stop atomic.Bool
	started := make(chan struct{})
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		for i, k := 0, 0; !stop.Load(); i, k = (i+1)%n, k+1 {
			if k == 1 {
				close(started)
			}
			timers[i].Stop() // takes the lock, as the re-arming after it does
			timers[i].ResetAt(h.origin.Add(30*time.Second + time.Duration(i%1000)*time.Millisecond))
		}
	}()
	recvWithin(t, 5*time.Second, started, "the goroutine stopping and re-arming timers getting going")
	clk.Add(time.Second + 500*time.Millisecond)
	advanceWithin(t, h, "a cascade in batches of one timer, with a goroutine waiting for the shard's lock")
	stop.Store(true)
	select {
	case <-churned:
	case <-time.After(5 * time.Second):
		t.Fatal("hung: the goroutine stopping and re-arming timers never got the shard's lock back")
	}
	mustCheck(t, h)
}

// TestMutants_StopEmptyingOneShardKeepsDriver: a Stop that empties its
// shard while another shard still holds a timer must leave the driver's
// sleep alone: the other timer fires on time.
func TestMutants_StopEmptyingOneShardKeepsDriver(t *testing.T) {
	inBubble(t, "a driver with timers in two shards, one emptied by a Stop", func(t *testing.T) {
		h, err := New(WithShards(2))
		require.NoError(t, err)
		roundRobin(h)
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

// TestMutants_DriverRearmsAfterMockMovedBeforeArming: the mock moves by
// less than the wait between the driver's clock reading and its arming of
// the clock timer. The driver must arm it again for the remaining wait,
// or the timer fires late by the move.
func TestMutants_DriverRearmsAfterMockMovedBeforeArming(t *testing.T) {
	mock := clock.NewMock()
	clk := &injectingClock{Mock: mock, after: func(int64) {}}
	h, err := New(WithClock(clk), WithShards(1))
	require.NoError(t, err)
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

// TestMutants_NewTimerAvoidsHeldShard: arming a new timer while its
// shard's lock is held puts it in another shard, without waiting.
func TestMutants_NewTimerAvoidsHeldShard(t *testing.T) {
	h, _ := newFake(t, WithShards(3))
	s := h.shards[1]
	h.knobs().pick = func() *shard { return s }
	s.mu.Lock()
	done := make(chan *Timer, 1)
	go func() { done <- h.AfterFunc(time.Second, func() {}) }()
	var tm *Timer
	select {
	case tm = <-done:
	case <-time.After(2 * time.Second):
		t.Error("AfterFunc waited for its shard's held lock instead of using another shard")
		s.mu.Unlock()
		tm = recvWithin(t, 5*time.Second, done, "AfterFunc, once the shard's lock was let go")
		s.mu.Lock()
	}
	s.mu.Unlock()
	assert.NotSame(t, s, tm.home(), "the new timer went to a shard whose lock was free")
	assert.Equal(t, 1, h.Len())
	mustCheck(t, h)
}

// TestMutants_MaxShards: WithShards accepts every count up to MaxShards.
func TestMutants_MaxShards(t *testing.T) {
	h, err := New(WithShards(MaxShards), WithLevels(2))
	require.NoError(t, err)
	assert.Len(t, h.shards, MaxShards)
}

// TestMutants_LatenessQuantileZero: the 0-quantile is bounded by the
// bucket of the smallest lateness, not by the first (empty) bucket.
func TestMutants_LatenessQuantileZero(t *testing.T) {
	var st Stats
	st.Lateness[3] = 5 // 4µs to 8µs
	st.Lateness[5] = 5
	st.MaxLateness = 30 * time.Microsecond
	assert.Equal(t, LatenessBound(3), st.LatenessQuantile(0))
	assert.Equal(t, LatenessBound(3), st.LatenessQuantile(0.5))
	assert.Equal(t, st.MaxLateness, st.LatenessQuantile(1))
}

// TestMutants_NextWithManyPastDeadlines: with more past deadlines in one
// shard than Next looks at, Next still reports one no later than the
// earliest (armed last, beyond the budget).
func TestMutants_NextWithManyPastDeadlines(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	clk.Add(time.Hour)
	advanceWithin(t, h, "the next Advance")
	now := clk.Now()
	const n = 2 * nextBudget
	for i := range n {
		h.AtFunc(now.Add(-time.Duration(i+1)*time.Millisecond), func() {})
	}
	next, ok := h.Next()
	require.True(t, ok)
	assert.Equal(t, now.Add(-n*time.Millisecond), next, "Next is the earliest past deadline")
	assert.Equal(t, n, advanceWithin(t, h, "firing many past deadlines"))
}

// TestMutants_NextWhileSortingPastDeadlines: while Advance sorts past
// deadlines with the shard's lock released, the timers taken off to be
// sorted still count for Next, also after a later past deadline is armed
// meanwhile; and they fire in order.
func TestMutants_NextWhileSortingPastDeadlines(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	h.knobs().batch = 4
	clk.Add(time.Hour)
	advanceWithin(t, h, "the next Advance")
	now := clk.Now()
	var got []time.Duration
	rec := func(d time.Duration) func() { return func() { got = append(got, d) } }
	for i := range 10 {
		d := -time.Duration(10-i) * time.Second // the earliest first
		h.AtFunc(now.Add(d), rec(d))
	}
	s := h.shards[0]
	checked := false
	h.knobs().betweenBatches = func() {
		s.lock()
		limbo := s.sorting && s.late.empty()
		s.mu.Unlock()
		if !limbo || checked {
			return
		}
		checked = true // every past timer is in limbo, being sorted
		next, ok := h.Next()
		assert.True(t, ok, "Next while sorting")
		assert.Equal(t, now.Add(-10*time.Second), next, "Next while past deadlines are sorted")
		h.AtFunc(now.Add(-time.Second/2), rec(-time.Second/2))
		next, ok = h.Next()
		assert.True(t, ok, "Next while sorting, after a later past deadline was armed")
		assert.Equal(t, now.Add(-10*time.Second), next, "Next after a later past deadline was armed while sorting")
		e, ok := h.nextWake()
		assert.True(t, ok)
		assert.Equal(t, h.dueTick(int64(now.Add(-10*time.Second).Sub(h.origin))), e, "the driver's next wake while sorting")
	}
	advanceWithin(t, h, "a sort of past deadlines, Next called between its batches")
	h.knobs().betweenBatches = nil
	require.True(t, checked, "the hook saw every past timer in limbo")
	advanceWithin(t, h, "the Advance after")
	assert.Len(t, got, 11)
	assert.IsNonDecreasing(t, got)
	mustCheck(t, h)
}

// TestMutants_MergeIntoOverdueWhileStopping: the clock went backwards, so
// the overdue list keeps timers between Advances and new past deadlines are
// merged into it in batches. A timer of the overdue list stopped between
// two batches must not derail the merge.
func TestMutants_MergeIntoOverdueWhileStopping(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	h.knobs().batch = 4
	origin := h.origin
	clk.Set(origin.Add(time.Hour))
	advanceWithin(t, h, "the next Advance")
	var got []time.Duration
	rec := func(d time.Duration) func() { return func() { got = append(got, d) } }
	var overdue []*Timer
	for _, m := range []time.Duration{50, 51, 52} {
		overdue = append(overdue, h.AtFunc(origin.Add(m*time.Minute), rec(m*time.Minute)))
	}
	clk.Set(origin.Add(30 * time.Minute)) // backwards
	assert.Equal(t, 0, advanceWithin(t, h, "an Advance after the clock went backwards"), "the past deadlines are sorted into the overdue list, not due yet")
	for m := time.Duration(40); m < 48; m++ {
		h.AtFunc(origin.Add(m*time.Minute), rec(m*time.Minute))
	}
	h.knobs().betweenBatches = func() {
		if len(overdue) > 0 && overdue[0].Stop() { // the merge's place in the overdue list, once merging
			overdue = overdue[1:]
		}
	}
	assert.Equal(t, 0, advanceWithin(t, h, "a merge of past deadlines into the overdue list"))
	h.knobs().betweenBatches = nil
	mustCheck(t, h)
	clk.Set(origin.Add(2 * time.Hour))
	advanceWithin(t, h, "firing the merged overdue list")
	want := []time.Duration{}
	for m := time.Duration(40); m < 48; m++ {
		want = append(want, m*time.Minute)
	}
	for _, x := range overdue {
		want = append(want, x.Deadline().Sub(origin))
	}
	assert.Equal(t, want, got, "the merged timers fire in deadline order, the stopped ones not at all")
	assert.Equal(t, 0, h.Len())
}

// TestMutants_DriverFiresPastDeadlineArmedByCallback: a callback run by
// the driver arms a timer for a time already passed; it waits on the late
// list for the next Advance, which the driver must make at once, not when
// its next wheel event (an hour away) comes.
func TestMutants_DriverFiresPastDeadlineArmedByCallback(t *testing.T) {
	inBubble(t, "a driver whose callback arms a past deadline", func(t *testing.T) {
		h, err := New(WithShards(1))
		require.NoError(t, err)
		h.Start()
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

// TestMutants_LazyResetAsAdvanceEnds races a lock-free Reset with the end
// of an Advance. A callback arms, in the last shard (whose now lags far
// behind: it had no work), a timer for a tick already fired: it waits on
// the late list, filed beyond that shard's now but not beyond the Advance's
// frontier. Another goroutine moves it later (still before the Advance's
// tick) as soon as it sees the frontier cleared: by then the shard's now
// must have caught up, so the Reset takes the lock and files the timer by
// its new deadline; the next Advance fires it. A frontier cleared before
// the shards' now moved lets the Reset take the lock-free path, keeping
// the old filing, and the timer misses the next Advance.
func TestMutants_LazyResetAsAdvanceEnds(t *testing.T) {
	const shards = 32 // the last shard's now catches up after 31 others'
	iterations := 4000
	if testing.Short() || raceEnabled {
		iterations = 1000
	}
	stopAt := time.Now().Add(5 * time.Second)
	var ended atomic.Bool
	t.Cleanup(func() { ended.Store(true) }) // should the test fail, the spinning goroutine below ends
	for iter := 0; iter < iterations && time.Now().Before(stopAt); iter++ {
		h, clk := newFake(t, WithShards(shards), WithLevels(8, 8, 8, 8))
		origin := h.origin
		first, last := h.shards[0], h.shards[shards-1]
		var pick atomic.Pointer[shard]
		pick.Store(first)
		h.knobs().pick = func() *shard { return pick.Load() }
		armed := make(chan *Timer, 1)
		var yFired atomic.Int32
		h.AfterFunc(2*time.Second, func() {
			pick.Store(last)
			armed <- h.AtFunc(origin.Add(2*time.Second), func() { yFired.Add(1) })
		})
		reset := make(chan struct{})
		var advanced atomic.Bool
		go func() {
			defer close(reset)
			y := <-armed
			// Wait for the frontier to be cleared (or for the Advance to
			// return, should it leave the frontier set).
			for spins := 0; h.frontier.Load() != math.MinInt64 && !advanced.Load() && !ended.Load(); spins++ {
				if spins%1024 == 1023 {
					runtime.Gosched()
				}
			}
			y.ResetAt(origin.Add(2500 * time.Millisecond))
		}()
		clk.Set(origin.Add(2900 * time.Millisecond))
		require.Equal(t, 1, advanceWithin(t, h, "the Advance racing a Reset"))
		advanced.Store(true)
		select {
		case <-reset:
		case <-time.After(5 * time.Second):
			t.Fatal("hung: the Reset racing the end of the Advance")
		}
		clk.Set(origin.Add(3 * time.Second))
		advanceWithin(t, h, "the next Advance")
		if n := yFired.Load(); n != 1 {
			t.Fatalf("iteration %d: a timer moved, as its Advance ended, to a tick before that Advance's had fired %d times after the next Advance, want once", iter, n)
		}
		mustCheck(t, h)
	}
}

// TestMutants_ArmingAsDriverGoesToSleep races arming with the driver
// going to sleep. Each timer's callback hands over to the test goroutine,
// which at once arms the next timer, a tick out, into the first of 32
// shards, while the driver, done with the callback, looks over the shards
// for its next wake-up (an hour away) and publishes it. An arming that the
// driver's look missed and that saw it still awake (so did not wake it)
// must be caught by the driver's second look, or it is slept through.
// Time is synctest's: a timer slept through shows as not fired a second
// after its deadline.
func TestMutants_ArmingAsDriverGoesToSleep(t *testing.T) {
	iterations := 20000
	if testing.Short() || raceEnabled {
		iterations = 2000
	}
	inBubble(t, "a driver racing armings as it goes to sleep", func(t *testing.T) {
		h, err := New(WithShards(32), WithLevels(8, 8, 8, 8, 8))
		require.NoError(t, err)
		first := h.shards[0]
		h.knobs().pick = func() *shard { return first }
		h.Start()
		defer h.Stop()
		h.AfterFunc(time.Hour, func() {})
		fired := make(chan struct{}, 1)
		f := func() { fired <- struct{}{} }
		h.AfterFunc(time.Millisecond, f)
		for i := range iterations {
			select {
			case <-fired:
			case <-time.After(time.Second):
				t.Fatalf("iteration %d: a timer armed a tick out as the driver went to sleep did not fire in a second: the driver slept through it", i)
			}
			h.AfterFunc(time.Millisecond, f)
		}
	})
}

// TestMutants_StopAndRearmSameTickWhileSorting: between two batches of the
// sort of past deadlines, a timer taken off to be sorted is stopped and
// re-armed for the same past deadline: it is on the late list again, filed
// at the same tick as when it was taken off, and the sort must leave it
// there. It fires once, on the next Advance.
func TestMutants_StopAndRearmSameTickWhileSorting(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	h.knobs().batch = 4
	clk.Add(time.Hour)
	advanceWithin(t, h, "the next Advance")
	now := clk.Now()
	fired := map[int]int{}
	var timers []*Timer
	for i := range 10 {
		timers = append(timers, h.AtFunc(now.Add(-time.Duration(10-i)*time.Second), func() { fired[i]++ }))
	}
	yields := 0
	h.knobs().betweenBatches = func() {
		yields++
		if yields == 1 { // the first batch is in limbo
			x := timers[0]
			assert.True(t, x.Stop())
			assert.False(t, x.ResetAt(x.Deadline()), "re-armed after the Stop")
		}
	}
	n := advanceWithin(t, h, "a sort of past deadlines with a timer stopped and re-armed meanwhile")
	h.knobs().betweenBatches = nil
	mustCheck(t, h)
	n += advanceWithin(t, h, "the Advance after")
	assert.Equal(t, 10, n)
	for i := range 10 {
		assert.Equal(t, 1, fired[i], "timer %d fired once", i)
	}
	assert.Equal(t, 0, h.Len())
	mustCheck(t, h)
}

// TestMutants_TimeoutsKeysKeepTheirOwnEntries: many keys added to a fresh
// set each get an entry of their own (no entry is handed out twice), keep
// their own deadlines, and expire once each, in order.
func TestMutants_TimeoutsKeysKeepTheirOwnEntries(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	var got []int
	set := NewTimeouts(h, func(k int) { got = append(got, k) })
	const n = 3 * timeoutShards * 4
	mustReturn(t, 5*time.Second, "Timeouts.Add of fresh keys", func() {
		for k := range n {
			set.Add(k, time.Duration(k+1)*time.Millisecond)
		}
	})
	assert.Equal(t, n, set.Len())
	assert.Equal(t, n, h.Len(), "one armed timer per key")
	assert.NoError(t, set.check())
	for k := range n {
		d, ok := set.Deadline(k)
		if assert.True(t, ok, "key %d is in the set", k) {
			assert.Equal(t, time.Duration(k+1)*time.Millisecond, d.Sub(h.origin), "key %d's deadline", k)
		}
	}
	clk.Add(time.Second)
	advanceWithin(t, h, "expiring every key")
	want := make([]int, n)
	for k := range want {
		want[k] = k
	}
	assert.Equal(t, want, got, "every key expired once, in deadline order")
	assert.Equal(t, 0, set.Len())
}

// TestMutants_DeadlineBeforeRepresentableRange: a deadline further back
// than the largest Duration before the origin (the zero Time) is held at
// that limit, clear of the markers: the timer is armed (Stop says so,
// Deadline reports the limit, not "never armed") and fires on the next
// Advance, on every tick size.
func TestMutants_DeadlineBeforeRepresentableRange(t *testing.T) {
	for _, tick := range []time.Duration{time.Nanosecond, time.Millisecond} {
		h, clk := newFake(t, WithTick(tick))
		fired := 0
		a := h.AtFunc(time.Time{}, func() { fired++ })
		b := h.AtFunc(time.Time{}, func() {})
		assert.Equal(t, h.origin.Add(math.MinInt64+2), a.Deadline(), "tick %v: the deadline is held at the limit", tick)
		assert.Equal(t, 2, h.Len())
		assert.True(t, b.Stop(), "tick %v: Stop of a timer armed for the zero Time", tick)
		clk.Add(time.Second)
		assert.Equal(t, 1, advanceWithin(t, h, "a deadline at the limit"), "tick %v", tick)
		assert.Equal(t, 1, fired, "tick %v", tick)
		assert.Equal(t, 0, h.Len())
		mustCheck(t, h)
	}
}

// TestMutants_LastTickOfRevolution: a deadline on the last tick of a
// level's current revolution belongs to that level, not the one above
// (whose current slot it would be in, behind now); each fires on its tick.
func TestMutants_LastTickOfRevolution(t *testing.T) {
	h, clk := newFake(t, WithShards(1), WithLevels(10, 10, 10))
	origin := h.origin
	firedAt := map[int64]int64{}
	for _, d := range []int64{9, 99, 999, 9999} { // the last tick of each level's revolution (one overflow level)
		h.AtFunc(origin.Add(time.Duration(d)*time.Millisecond), func() {
			firedAt[d] = int64(clk.Now().Sub(origin) / time.Millisecond)
		})
		require.NoError(t, h.check(), "after arming a timer for tick %d", d)
	}
	for steps := 0; h.Len() > 0; steps++ {
		require.Less(t, steps, 100, "hung: the walk by Next does not end: %d timers armed after %d steps", h.Len(), steps)
		next, ok := h.Next()
		require.True(t, ok)
		clk.Set(next)
		advanceWithin(t, h, "walking the level boundaries by Next")
		require.NoError(t, h.check())
	}
	assert.Equal(t, map[int64]int64{9: 9, 99: 99, 999: 999, 9999: 9999}, firedAt, "each timer fired on its tick")
}

// TestMutants_LazyResetReadsFrontierBeforeNow: a lock-free Reset loads the
// running Advance's frontier, then its shard's now; endAdvance moves every
// shard's now, then clears the frontier. So whatever happens between the
// two loads, one of them sees the Advance's progress. Here the end of the
// Advance runs exactly between them (test hook, stage 2). The timer was
// armed by a callback, into a shard whose now lagged (it had no work), for
// a tick already fired: it waits on the late list, filed beyond that
// shard's now but not beyond the frontier. The Reset moves it later, still
// before the Advance's tick: it must take the lock and file it by its new
// deadline, so that Next reports that deadline and the next Advance fires
// it. Loaded the other way round (now, hook, frontier), the Reset sees the
// old now and the cleared frontier and keeps the old filing lock-free:
// Next is early and the timer misses the next Advance.
func TestMutants_LazyResetReadsFrontierBeforeNow(t *testing.T) {
	h, clk := newFake(t, WithShards(2))
	origin := h.origin
	first, last := h.shards[0], h.shards[1]
	var pick atomic.Pointer[shard]
	pick.Store(first)
	h.knobs().pick = func() *shard { return pick.Load() }

	// The goroutines below wait for each other at most 2s, then carry on
	// and leave a flag for the test to report: they must not call t's
	// methods, which they may outlive if the test fails first.
	armed := make(chan *Timer, 1)
	atHook := make(chan struct{})
	ended := make(chan struct{})
	var endOnce sync.Once
	end := func() { endOnce.Do(func() { close(ended) }) }
	defer end() // should the test fail first, the Reset goes on
	var yFired atomic.Int32
	var noHook, noEnd atomic.Bool
	h.AfterFunc(2*time.Second, func() {
		pick.Store(last)
		y := h.AtFunc(origin.Add(2*time.Second), func() { yFired.Add(1) })
		armed <- y
		select { // the Reset loads the frontier while this Advance runs
		case <-atHook:
		case <-time.After(2 * time.Second):
			noHook.Store(true)
		}
	})
	defer func() { testHookReset = nil }()
	var y *Timer
	testHookReset = func(x *Timer) {
		if x != y {
			return
		}
		testHookReset = nil
		close(atHook)
		select { // the Advance ends: the shards' now moves, the frontier is cleared
		case <-ended:
		case <-time.After(2 * time.Second):
			noEnd.Store(true)
		}
	}
	resetDone := make(chan bool, 1)
	go func() {
		y = <-armed
		resetDone <- y.ResetAt(origin.Add(2500 * time.Millisecond))
	}()

	clk.Set(origin.Add(2900 * time.Millisecond))
	n := advanceWithin(t, h, "the Advance whose callback arms the timer")
	end()
	require.False(t, noHook.Load(), "hung: the Reset never reached its hook between its loads of the frontier and of now")
	require.Equal(t, 1, n, "the Advance ran the callback that arms the timer, and only that")
	reset := recvWithin(t, 5*time.Second, resetDone, "the Reset's return after the Advance ended")
	require.False(t, noEnd.Load(), "hung: the Advance did not end while the Reset waited between its loads")
	assert.True(t, reset, "the Reset found the timer armed")
	assert.Same(t, last, y.home(), "the timer is in the shard that had no work")
	assert.Equal(t, 1, h.Len())
	next, ok := h.Next()
	require.True(t, ok)
	assert.Equal(t, origin.Add(2500*time.Millisecond), next, "Next is the timer's new (past) deadline, not the tick it was filed at before the Reset")
	mustCheck(t, h)
	clk.Set(origin.Add(3 * time.Second))
	advanceWithin(t, h, "the next Advance")
	assert.Equal(t, int32(1), yFired.Load(), "a timer moved to a past deadline fires once, on the next Advance")
	assert.Equal(t, 0, h.Len())
	mustCheck(t, h)
}

// TestMutants_DriverSeesDeadlineReachedOnLastRearm: while the driver arms
// its clock timer, another goroutine keeps moving the mock (here: 1µs
// after each of the driver's readings before arming), so the driver arms
// again and again, at most 101 times. If the mock reaches the deadline
// during the last try, the timer is due: the driver must see it and fire,
// not go to sleep on a clock timer armed late by the moves.
func TestMutants_DriverSeesDeadlineReachedOnLastRearm(t *testing.T) {
	mock := clock.NewMock()
	start := mock.Now()
	clk := &injectingClock{Mock: mock, after: func(int64) {}}
	h, err := New(WithClock(clk), WithShards(1))
	require.NoError(t, err)
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
