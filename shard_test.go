package timingwheel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Shards: timers of several shards merged in order, one timer hammered from
// many goroutines, cascades interrupted by arms, stops and resets, the
// Reset racing a cascade, Next's bounded scan, parallel callbacks.

func TestShards_AdvanceMergesInDueOrder(t *testing.T) {
	h, clk := newFake(t, WithShards(4))
	r := rand.New(rand.NewPCG(3, 4))
	var got []time.Duration
	var want []time.Duration
	for range 400 {
		d := time.Duration(1+r.IntN(5000)) * time.Millisecond
		want = append(want, d)
		h.AfterFunc(d, func() { got = append(got, d) })
	}
	for _, s := range h.shards {
		require.Equal(t, 100, s.count, "round robin spreads the timers")
	}
	slices.Sort(want)
	next, ok := h.Next()
	require.True(t, ok)
	assert.Equal(t, h.origin.Add(want[0]), next, "Next is the earliest deadline over all shards")
	clk.Add(10 * time.Second)
	assert.Equal(t, 400, advanceWithin(t, h, "four shards merged in due order"))
	assert.Equal(t, want, got, "callbacks of all shards run in deadline order")
	mustCheck(t, h)
}

// TestShards_AdvanceSeesWorkFiledIntoAPassedShard: an Advance passes over
// a shard with nothing due (its workFrom), but a timer filed there during
// the Advance, for a tick it has not reached, fires in this Advance and in
// order. Here a callback in shard 0 re-arms, with ResetAt (which does not
// read the clock), a timer that goes to the empty shard 1.
func TestShards_AdvanceSeesWorkFiledIntoAPassedShard(t *testing.T) {
	h, clk := newFake(t, WithShards(2))
	var got []string
	var b Timer
	dealNext(h, 0)
	b.Init(h, func() { got = append(got, "b at 150ms") })
	dealNext(h, 0)
	h.AfterFunc(100*time.Millisecond, func() {
		got = append(got, "a at 100ms")
		dealNext(h, 1) // b, unarmed, its shard contended, moves to the shard dealt next
		rearmContended(t, &b, func() bool { return b.ResetAt(h.origin.Add(150 * time.Millisecond)) })
	})
	dealNext(h, 0)
	h.AfterFunc(200*time.Millisecond, func() { got = append(got, "c at 200ms") })
	require.Zero(t, h.shards[1].count, "shard 1 starts empty")
	clk.Add(6 * time.Second)
	assert.Equal(t, 3, advanceWithin(t, h, "the Advance that passes over shard 1"))
	assert.Equal(t, []string{"a at 100ms", "b at 150ms", "c at 200ms"}, got,
		"the timer filed into the passed-over shard fires in this Advance, in order")
	assert.Same(t, h.shards[1], b.home(), "b moved to shard 1")
	mustCheck(t, h)
}

// TestShards_ConcurrentArmsFireOnTimeAndInOrder arms timers from several
// goroutines into eight shards while the test advances the clock in random
// steps, and others arm and stop timers for contention. Each Advance passes
// over most shards (workFrom); a timer whose arming returned before an
// Advance began, due by that Advance's clock, must fire in it, never
// earlier, and those timers fire in order of their due ticks.
func TestShards_ConcurrentArmsFireOnTimeAndInOrder(t *testing.T) {
	h, clk := newFake(t, WithShards(8))
	type armed struct {
		tm      Timer        // held by value: it exists before its callback can run
		done    atomic.Int64 // Advances begun when its arming had returned, plus one; 0 until then
		firedIn atomic.Int64 // the Advance that ran it; 0 until then
	}
	var (
		seq    atomic.Int64 // Advances begun
		clocks sync.Map     // Advance → the clock it advanced to
		mu     sync.Mutex
		all    []*armed
	)
	// Callbacks run one at a time, on the advancing goroutine.
	var lastTick, lastIn int64
	due := func(d time.Time) int64 { return ceilDiv(int64(d.Sub(h.origin)), int64(time.Millisecond)) }
	tick := func(c time.Time) int64 { return floorDiv(int64(c.Sub(h.origin)), int64(time.Millisecond)) }
	arm := func(r *rand.Rand) {
		a := &armed{}
		a.tm.Init(h, func() {
			k := seq.Load()
			a.firedIn.Store(k)
			c, _ := clocks.Load(k)
			d := due(a.tm.Deadline())
			if d > tick(c.(time.Time)) {
				t.Errorf("a timer due at tick %d fired in Advance %d, at tick %d: early", d, k, tick(c.(time.Time)))
			}
			if done := a.done.Load(); done != 0 && done-1 < k {
				if k == lastIn && d < lastTick {
					t.Errorf("Advance %d: a timer due at tick %d fired after one due at %d", k, d, lastTick)
				}
				lastTick, lastIn = d, k
			}
		})
		a.tm.Reset(time.Duration(r.Int64N(int64(40 * time.Millisecond))))
		a.done.Store(seq.Load() + 1)
		mu.Lock()
		all = append(all, a)
		mu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	goRandom(&wg, 4, 21, func(w int, r *rand.Rand) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if w < 3 {
				arm(r)
			} else {
				h.AfterFunc(time.Hour, func() {}).Stop() // contention only
			}
			runtime.Gosched()
		}
	})
	r := rand.New(rand.NewPCG(5, 6))
	for range 300 {
		clk.Add(time.Duration(r.Int64N(int64(8 * time.Millisecond))))
		now := clk.Now()
		clocks.Store(seq.Load()+1, now)
		k := seq.Add(1)
		advanceWithin(t, h, fmt.Sprintf("Advance %d", k))
		mu.Lock()
		for _, a := range all {
			if a.done.Load()-1 < k && a.firedIn.Load() == 0 && due(a.tm.Deadline()) <= tick(now) {
				sh := a.tm.home()
				t.Fatalf("Advance %d to tick %d did not fire a timer due at tick %d armed before it began (done %d; shard %d filed %d when %d now %d; firedIn %d)", k, tick(now), due(a.tm.Deadline()), a.done.Load(), sh.idx, a.tm.filed, a.tm.when.Load(), sh.now.Load(), a.firedIn.Load())
			}
		}
		mu.Unlock()
	}
	close(stop)
	waitWithin(t, 10*time.Second, &wg, "the arming goroutines")
	clk.Add(time.Second)
	clocks.Store(seq.Load()+1, clk.Now())
	seq.Add(1)
	advanceWithin(t, h, "the last Advance")
	for _, a := range all {
		require.NotZero(t, a.firedIn.Load(), "every timer fired")
	}
	assert.Equal(t, 0, h.Len())
	mustCheck(t, h)
}

// TestShards_HammerOneTimer resets, stops and fires one timer from many
// goroutines while another advances: every arming ends exactly once, by a
// firing, a Stop or a Reset that returned true, and callbacks never overlap.
func TestShards_HammerOneTimer(t *testing.T) {
	h, clk := newFake(t, WithShards(4))
	var fired, running atomic.Int64
	var tm Timer
	tm.Init(h, func() {
		if running.Add(1) != 1 {
			t.Error("callbacks overlap")
		}
		fired.Add(1)
		running.Add(-1)
	})
	var armings, endings atomic.Int64
	stop := advanceContinuously(t, h, clk)
	var wg sync.WaitGroup
	goRandom(&wg, 8, 9, func(_ int, r *rand.Rand) {
		for range 3000 {
			switch r.IntN(3) {
			case 0, 1:
				if tm.Reset(time.Duration(r.IntN(3)) * time.Millisecond) {
					endings.Add(1) // cancelled the arming before
				}
				armings.Add(1)
			case 2:
				if tm.Stop() {
					endings.Add(1)
				}
			}
		}
	})
	waitWithin(t, 30*time.Second, &wg, "the goroutines hammering one timer")
	stop()
	if tm.Stop() {
		endings.Add(1)
	}
	assert.Equal(t, armings.Load(), endings.Load()+fired.Load(), "armings = stops + fired")
	assert.Equal(t, 0, h.Len())
	mustCheck(t, h)
	t.Logf("%d armings, %d fired", armings.Load(), fired.Load())
}

// TestCascade_TimersStayStoppableBetweenBatches cascades 20,000 timers of
// one coarse slot in batches of 16 while other goroutines stop and re-arm
// them: every arming ends exactly once, by firing or by a Stop or Reset
// that returned true, no timer fires before its deadline, and Len ends
// exact.
func TestCascade_TimersStayStoppableBetweenBatches(t *testing.T) {
	h, clk := newFake(t, WithShards(2), withBatch(16))
	const n = 20_000
	recs := make([]*countedTimer, n)
	for i := range recs {
		r := newCountedTimer()
		d := 30*time.Second + time.Duration(i%1000)*time.Millisecond // one seconds-level slot
		r.t = h.AfterFunc(d, func() {
			// Every later deadline of the timer is after d, so firing
			// before d is early whichever arming fired.
			if h.elapsed() < int64(d) {
				t.Errorf("timer %d fired early", i)
			}
			r.fired.Add(1)
		})
		recs[i] = r
	}
	clk.Add(29 * time.Second)
	advanceWithin(t, h, "the minutes level cascading into the seconds level") // cascades the minutes level into the seconds level
	var wg sync.WaitGroup
	var go1 atomic.Bool
	goRandom(&wg, 2, 5, func(g int, rnd *rand.Rand) {
		for !go1.Load() {
			runtime.Gosched()
		}
		for i := g; i < n; i += 7 {
			recs[i].stopOrRearm(rnd, func(tm *Timer) bool {
				w := int64(31*time.Second) + rnd.Int64N(int64(2*time.Second))
				return tm.ResetAt(h.origin.Add(time.Duration(w)))
			})
		}
	})
	clk.Add(time.Second + 500*time.Millisecond)
	go1.Store(true)
	mustReturn(t, 30*time.Second, "Advance (a cascade of 20,000 timers in batches, with goroutines stopping and re-arming them)", func() { h.Advance() })
	waitWithin(t, 30*time.Second, &wg, "the goroutines stopping and re-arming timers during the cascade")
	clk.Add(5 * time.Second)
	advanceWithin(t, h, "the timers left after the cascade")
	assertEachArmingEnded(t, recs)
	assert.Equal(t, 0, h.Len())
	mustCheck(t, h)
}

// TestLazyReset_CascadeBeforeStore covers a Reset that begins before a
// cascade of its timer's slot and swaps its later deadline in between two
// of the cascade's batches: the cascade filed the timer at level 0 by its
// old deadline, and there it stays, so Next must read its deadline, and
// it must fire by it. The timer, due mid-slot at 2m0.5s, is the first of
// the minute slot that cascades at 2m, in batches of one timer; the Reset,
// held at its clock reading, goes on between two batches, once its timer
// is at level 0.
func TestLazyReset_CascadeBeforeStore(t *testing.T) {
	h, clk := newGated(t, WithShards(1), withBatch(1))
	origin := h.origin
	s := h.shards[0]
	tm := h.AtFunc(origin.Add(2*time.Minute+500*time.Millisecond), func() {})
	var others []*Timer
	for i := range 3 { // later in the same minute slot: the cascade takes batches after tm's
		others = append(others, h.AtFunc(origin.Add(2*time.Minute+time.Duration(10+i)*time.Second), func() {}))
	}
	require.GreaterOrEqual(t, tm.filed-s.now.Load(), level0Span(h), "the timer is beyond level 0")

	// The Reset's goroutine and the cascade's hook wait for each other
	// at most 2s, then carry on and leave a flag for the test to report:
	// they must not call t's methods, which they may outlive.
	read, letStore := clk.gate()
	defer letStore() // should the test fail first, the Reset goes on
	resetDone := make(chan bool, 1)
	go func() { resetDone <- tm.Reset(time.Minute) }() // read at 2m: due at 3m
	recvWithin(t, 5*time.Second, read, "the Reset's clock reading")

	var cascaded, reset, returned bool
	// The goroutine waiting for the shard's lock gets it between two
	// batches: once a batch has moved tm down to level 0, filed by its old
	// deadline, the Reset stores its deadline, the cascade half done.
	stop := inWindows(t, s, func() bool {
		l0, f := s.levels[0], tm.filed
		return !cascaded && tm.next != nil && f >= l0.start && f <= l0.last && l0.slots[l0.slotOf(f)].next == tm
	}, func() {
		cascaded = true
		letStore()
		select {
		case reset = <-resetDone:
			returned = true
		case <-time.After(2 * time.Second):
		}
	})
	clk.Set(origin.Add(2 * time.Minute))
	assert.Equal(t, 0, advanceWithin(t, h, "a cascade in batches of one, a Reset storing between two"))
	stop()
	require.True(t, cascaded, "the first batch of the cascade took the timer down to level 0")
	require.True(t, returned, "hung: the Reset did not return within 2s while the cascade let the shard's lock go")
	assert.True(t, reset, "the Reset found the timer armed")
	mustCheck(t, h)
	for _, o := range others {
		require.True(t, o.Stop())
	}
	nextReaches(t, h, clk, origin.Add(3*time.Minute), 1, "Next: the new deadline, after at most an answer at the old one the cascade filed the timer by")
	clk.Set(origin.Add(2*time.Minute + 59*time.Second))
	assert.Equal(t, 0, advanceWithin(t, h, "up to just before the new deadline"), "the timer fired before its new deadline")
	clk.Set(origin.Add(3 * time.Minute))
	assert.Equal(t, 1, advanceWithin(t, h, "the new deadline"), "the timer fires at its new deadline")
	assert.Equal(t, 0, h.Len())
}

// TestLaterMove_TakesNoLock: moving an armed timer's deadline later takes
// no lock, so it does not wait while a cascade batch (or anything else)
// holds its shard's lock: Reset, ResetAt and Timeouts.Add of a live key
// return at once, and Deadline reads the new deadline.
func TestLaterMove_TakesNoLock(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	start := clk.Now()
	tm := h.AfterFunc(2*time.Minute+500*time.Millisecond, func() {})
	near := h.AfterFunc(10*time.Millisecond, func() {}) // at level 0
	keys := NewTimeouts(h, func(int) {})
	keys.Add(1, time.Minute)
	s := tm.home()
	s.lock()
	done := make(chan bool, 4)
	go func() {
		done <- tm.ResetAt(start.Add(3 * time.Minute))
		done <- tm.Reset(4 * time.Minute)
		done <- near.Reset(20 * time.Millisecond)
		keys.Add(1, 2*time.Minute)
		done <- true
	}()
	for i := range 4 {
		select {
		case armed := <-done:
			assert.True(t, armed, "re-arm %d found its timer armed", i)
		case <-time.After(5 * time.Second):
			s.mu.Unlock()
			t.Fatalf("re-arm %d to a later deadline waited for the shard's lock", i)
		}
	}
	assert.Equal(t, start.Add(4*time.Minute), tm.Deadline())
	assert.Equal(t, start.Add(20*time.Millisecond), near.Deadline())
	s.mu.Unlock()
	d, ok := keys.Deadline(1)
	require.True(t, ok)
	assert.Equal(t, start.Add(2*time.Minute), d)
	mustCheck(t, h)
}

// TestParallelCallbacks fires a mass expiry with each shard's callbacks on
// a goroutine of its own: every timer fires once, in order within its
// shard, and Advance returns after all of them.
func TestParallelCallbacks(t *testing.T) {
	h, clk := newFake(t, WithShards(4), WithParallelCallbacks())
	const n = 4000
	var mu sync.Mutex
	last := map[*shard]time.Duration{}
	var fired atomic.Int64
	for i := range n {
		d := time.Duration(1+i%997) * time.Millisecond
		var tm *Timer
		ready := make(chan struct{})
		tm = h.AfterFunc(d, func() {
			<-ready
			mu.Lock()
			if d < last[tm.home()] {
				t.Errorf("out of order within shard %d", tm.home().idx)
			}
			last[tm.home()] = d
			mu.Unlock()
			fired.Add(1)
		})
		close(ready)
	}
	clk.Add(time.Second)
	assert.Equal(t, n, advanceWithin(t, h, "a mass expiry with parallel callbacks"))
	assert.Equal(t, int64(n), fired.Load())
	assert.Equal(t, 0, h.Len())
	mustCheck(t, h)
}

func TestParallelCallbacks_PanicPropagates(t *testing.T) {
	h, clk := newFake(t, WithShards(2), WithParallelCallbacks())
	var fired atomic.Int64
	for i := range 10 {
		h.AfterFunc(time.Duration(i+1)*time.Millisecond, func() {
			if i == 3 {
				panic("boom")
			}
			fired.Add(1)
		})
	}
	clk.Add(time.Second)
	assert.PanicsWithValue(t, "boom", func() { advanceWithin(t, h, "parallel callbacks, one panicking") })
	mustCheck(t, h)
	advanceWithin(t, h, "the rest after the panic")
	assert.Equal(t, int64(9), fired.Load(), "the rest fire on the next Advance")
	assert.Equal(t, 0, h.Len())
}

func TestStats(t *testing.T) {
	h, clk := newFake(t, WithShards(2))
	for i := range 10 {
		h.AfterFunc(time.Duration(i+1)*time.Millisecond, func() {})
	}
	h.AfterFunc(time.Hour, func() {}).Stop()
	clk.Add(20 * time.Millisecond) // the first timer fires 19ms late
	assert.Equal(t, 10, advanceWithin(t, h, "ten timers, for the stats"))
	st := h.Stats()
	assert.Equal(t, 0, st.Armed)
	assert.Equal(t, uint64(11), st.Started)
	assert.Equal(t, uint64(10), st.Fired)
	assert.Equal(t, uint64(1), st.Stopped)
	assert.Equal(t, 19*time.Millisecond, st.MaxLateness)
	var n uint64
	for _, c := range st.Lateness {
		n += c
	}
	assert.Equal(t, uint64(10), n)
	assert.Equal(t, 16384*time.Microsecond, st.LatenessQuantile(0.5), "10..19ms: the bucket below 16.4ms holds the median")
	assert.Equal(t, 19*time.Millisecond, st.LatenessQuantile(1))
}

// TestShards_Default: one shard per GOMAXPROCS unless told otherwise, and
// bad counts are config errors.
func TestShards_Default(t *testing.T) {
	h := mustNew(t)
	assert.Len(t, h.shards, runtime.GOMAXPROCS(0))
	for _, n := range []int{-1, MaxShards + 1} {
		_, err := New(WithShards(n))
		assert.ErrorIs(t, err, ErrInvalidConfig, fmt.Sprint(n))
	}
}

// Each processor's shard is dealt round robin as the pool makes it, so
// that with a shard per processor no two share one; a garbage collection
// drops them (for good at the second), and the processors are dealt shards
// afresh.
func TestShards_DealtRoundRobinAndAgainAfterCollection(t *testing.T) {
	h := mustNew(t, WithShards(3))
	var dealt []int
	for range 6 {
		dealt = append(dealt, h.hints.New().(*shard).idx)
	}
	assert.True(t, dealt[0] != dealt[1] && dealt[1] != dealt[2] && dealt[0] != dealt[2], "three hints in a row name three shards: %v", dealt)
	assert.Equal(t, dealt[:3], dealt[3:], "dealt in turn: %v", dealt)
	// After two collections the processor's hint is gone: the next pick
	// is a newly dealt one (here the one after the last dealt above).
	moved := false
	for range 20 {
		before := h.pickShard()
		runtime.GC()
		runtime.GC()
		if h.pickShard() != before {
			moved = true
			break
		}
	}
	assert.True(t, moved, "garbage collections never deal the processor another shard")
}

// The hints hold no reference that keeps a dropped hierarchy alive.
func TestShards_DealingKeepsNoHierarchyAlive(t *testing.T) {
	h := mustNew(t, WithShards(2))
	freed := weak.Make(h)
	h = nil
	assert.True(t, waitFreed(freed), "a dropped hierarchy is kept alive by its deals")
}

// TestTimer_DeadlineBeforeFirstArming: a timer bound by Init and never
// armed since has the zero deadline, also after a second Init.
func TestTimer_DeadlineBeforeFirstArming(t *testing.T) {
	h, _ := newFake(t)
	var tm Timer
	tm.Init(h, func() {})
	assert.True(t, tm.Deadline().IsZero())
	tm.Reset(time.Second)
	assert.Equal(t, h.origin.Add(time.Second), tm.Deadline())
	tm.Stop()
	tm.Init(h, func() {})
	assert.True(t, tm.Deadline().IsZero(), "after Init again")
}

// TestShards_UnarmedTimerFollowsItsUser: a timer initialized on one
// processor and re-armed from another moves to the re-arming processor's
// shard when it is unarmed (never while armed) and its own shard's lock was
// contended; an uncontended re-arm leaves it where it is, sparing the
// lookup of the processor's shard. Every method finds it after a move.
func TestShards_UnarmedTimerFollowsItsUser(t *testing.T) {
	h, clk := newFake(t, WithShards(3))
	var fired atomic.Int32
	var tm Timer
	dealNext(h, 0)
	tm.Init(h, func() { fired.Add(1) })
	require.Same(t, h.shards[0], tm.home())

	dealNext(h, 1)
	assert.False(t, tm.Reset(time.Second), "first arming")
	assert.Same(t, h.shards[0], tm.home(), "unarmed, uncontended: it stays")
	assert.True(t, tm.Stop())
	dealNext(h, 1)
	assert.False(t, resetContended(t, &tm, time.Second), "armed again")
	assert.Same(t, h.shards[1], tm.home(), "unarmed, its shard contended: it moves to the shard dealt next")
	assert.True(t, tm.Stop())
	dealNext(h, 0)
	assert.False(t, resetContended(t, &tm, time.Second), "re-arming")
	assert.Same(t, h.shards[0], tm.home(), "its shard contended: it moves to the shard dealt next")
	dealNext(h, 2)
	assert.True(t, resetContended(t, &tm, 2*time.Second))
	assert.Same(t, h.shards[0], tm.home(), "an armed timer stays")
	dealNext(h, 2)
	assert.True(t, tm.Reset(3*time.Second))
	assert.Same(t, h.shards[0], tm.home(), "an armed timer stays, uncontended too")
	assert.True(t, tm.Stop())
	dealNext(h, 2)
	assert.False(t, resetContended(t, &tm, time.Second))
	require.Same(t, h.shards[2], tm.home()) // not shards[0], whose lock the test takes below
	assert.Equal(t, 1, h.Len())
	mustCheck(t, h)
	clk.Add(time.Second)
	assert.Equal(t, 1, advanceWithin(t, h, "the timer that moved shards"))
	assert.Equal(t, int32(1), fired.Load())

	// The processor's shard's lock is held: the timer stays where it is.
	h.shards[0].lock()
	dealNext(h, 0)
	assert.False(t, resetContended(t, &tm, time.Second))
	h.shards[0].mu.Unlock()
	assert.Same(t, h.shards[2], tm.home())
	mustCheck(t, h)
}

// resetContended calls tm.Reset(d) while the test holds the lock of tm's
// shard, and lets go of it once Reset waits for it, so that Reset finds its
// shard contended (a Reset that takes no lock returns without waiting). It
// returns what Reset returned.
func resetContended(t *testing.T, tm *Timer, d time.Duration) bool {
	t.Helper()
	return rearmContended(t, tm, func() bool { return tm.Reset(d) })
}

// rearmContended is resetContended for any re-arm. It reports a hang with
// t.Errorf, not t.Fatal, so that a callback may call it.
func rearmContended(t *testing.T, tm *Timer, rearm func() bool) bool {
	t.Helper()
	s := tm.home()
	s.lock()
	done := make(chan bool, 1)
	go func() { done <- rearm() }()
	for deadline := time.Now().Add(5 * time.Second); s.waiting.Load() == 0 && len(done) == 0; {
		if time.Now().After(deadline) {
			s.mu.Unlock()
			t.Errorf("hung: the re-arm neither returned nor waited for its shard's lock within 5s")
			return false
		}
		runtime.Gosched()
	}
	s.mu.Unlock()
	select {
	case armed := <-done:
		return armed
	case <-time.After(5 * time.Second):
		t.Errorf("hung: the re-arm did not return within 5s of its shard's lock being let go")
		return false
	}
}

// TestStats_LatenessOfAncientDeadline: a deadline centuries before the
// clock is counted as very late, not as on time (the subtraction saturates).
func TestStats_LatenessOfAncientDeadline(t *testing.T) {
	h, clk := newFake(t)
	clk.Add(time.Second)
	h.AtFunc(time.Time{}, func() {})
	advanceWithin(t, h, "a deadline centuries past")
	st := h.Stats()
	assert.Equal(t, uint64(1), st.Lateness[LatenessBuckets-1])
	assert.Equal(t, time.Duration(math.MaxInt64), st.MaxLateness)
}

// TestShards_LenIsOneInstant: Len and Stats see all shards at one instant.
// Read one shard after the other, a timer counted in the first shard, then
// stopped, while another was armed in the second before Len got to it, was
// counted as well: Len reported 2 while never more than 1 timer was armed.
// BenchmarkStall caught it: Len waited for a cascading shard's lock while
// new timers were armed and stopped around it. Here the test holds the
// second shard's lock to make Len wait, and arms the other timer under it,
// as a goroutine that got the lock between two batches of a cascade would.
func TestShards_LenIsOneInstant(t *testing.T) {
	for _, method := range []string{"Len", "Stats"} {
		t.Run(method, func(t *testing.T) {
			h, _ := newFake(t, WithShards(2))
			s1 := h.shards[1]
			dealNext(h, 0)
			x := h.AfterFunc(time.Hour, func() {})

			s1.mu.Lock()
			got := make(chan int, 1)
			go func() {
				if method == "Len" {
					got <- h.Len()
				} else {
					got <- h.Stats().Armed
				}
			}()
			for deadline := time.Now().Add(10 * time.Second); s1.waiting.Load() == 0; {
				if time.Now().After(deadline) {
					s1.mu.Unlock()
					t.Fatalf("%s did not come to wait for the second shard's lock within 10s", method)
				}
				runtime.Gosched()
			}
			stopped := make(chan bool, 1)
			go func() { stopped <- x.Stop() }()
			select {
			case <-stopped: // Len did not hold the first shard: x is gone, arm y
				y := &Timer{f: func() {}}
				w := h.after(time.Hour)
				y.b.Store(&s1.oneShot)
				s1.tallyLocked(+1, &s1.stats.armed)
				s1.fileLocked(y, h.dueTick(w), true)
				y.publishLocked(h, w)
				s1.mu.Unlock()
			case <-time.After(200 * time.Millisecond): // Stop waits for Len
				s1.mu.Unlock()
				select {
				case <-stopped:
				case <-time.After(10 * time.Second):
					t.Fatal("Stop did not return within 10s of Len's end")
				}
			}
			select {
			case n := <-got:
				if n != 1 {
					t.Errorf("%s = %d; at no instant was more than 1 timer armed", method, n)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s did not return within 10s", method)
			}
		})
	}
}

// BenchmarkAdvance_Shards measures the ordered merge's cost per shard: one
// Advance firing 100 timers one tick apart, all in one shard, with 1 to 64
// shards (the others empty). ns/op is one such Advance; tick-ns is per tick
// with work.
func BenchmarkAdvance_Shards(b *testing.B) {
	for _, n := range []int{1, 8, 32, 64} {
		b.Run(fmt.Sprintf("shards=%d", n), func(b *testing.B) {
			h, clk := newFake(b, WithShards(n))
			f := func() {}
			for b.Loop() {
				b.StopTimer()
				for i := range 100 {
					dealNext(h, 0)
					h.AfterFunc(time.Duration(i+1)*time.Millisecond, f)
				}
				clk.Add(100 * time.Millisecond)
				b.StartTimer()
				if ran := h.Advance(); ran != 100 {
					b.Fatalf("Advance ran %d, want 100", ran)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "tick-ns")
		})
	}
}

// TestCascade_BatchesLetTheLockGo: between two batches of a long cascade,
// the shard's lock is free (the test hook
// runs there), and the work then carries on.
func TestCascade_BatchesLetTheLockGo(t *testing.T) {
	h, clk := newFake(t, WithShards(1), withBatch(4))
	s := h.shards[0]
	// The goroutine waiting for the lock gets it with the work half done:
	// the late list being walked, or the 30s slot being cascaded.
	slot := int64(30_000)
	stop := inWindows(t, s, func() bool {
		l, ok := s.levels[1], s.now.Load() == slot
		return s.walk != nil || ok && l.slots[l.slotOf(slot)].next != &l.slots[l.slotOf(slot)]
	}, func() {})
	fired := 0
	for i := range 20 {
		h.AfterFunc(-time.Duration(i+1)*time.Millisecond, func() { fired++ }) // past deadlines: on the late list
		h.AfterFunc(30*time.Second+time.Duration(i)*time.Millisecond, func() { fired++ })
	}
	clk.Add(31 * time.Second)
	assert.Equal(t, 40, advanceWithin(t, h, "past deadlines and the batches of a cascade"))
	assert.Equal(t, 40, fired)
	assert.Positive(t, stop(), "the lock was let go with the work half done")
	mustCheck(t, h)
}

// TestCascade_YieldsToWaiters: while a long cascade runs, another
// goroutine stops and re-arms its timers, taking the shard's lock each
// time, so it is often waiting for the lock when a batch ends: the cascade
// lets it in between batches (without the test hook, by letting the lock
// go and yielding), and both finish.
func TestCascade_YieldsToWaiters(t *testing.T) {
	for range 10 { // a round may happen to find no goroutine waiting
		cascadeWithWaiter(t)
	}
}

func cascadeWithWaiter(t *testing.T) {
	h, clk := newFake(t, WithShards(1), withBatch(1))
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

// TestShards_NewTimerAvoidsHeldShard: arming a new timer while its
// shard's lock is held puts it in another shard, without waiting.
func TestShards_NewTimerAvoidsHeldShard(t *testing.T) {
	h, _ := newFake(t, WithShards(3))
	s := h.shards[1]
	dealNext(h, 1)
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

// TestShards_MaxShardsAccepted: WithShards accepts every count up to MaxShards.
func TestShards_MaxShardsAccepted(t *testing.T) {
	h := mustNew(t, WithShards(MaxShards), WithLevels(2))
	assert.Len(t, h.shards, MaxShards)
}

// TestDueInWheel_IsInWheelOfTheDueTick: the later-move's division-free
// test agrees with inWheel of the deadline's due tick, for deadlines and
// nows across the range, the frontier cleared or set.
func TestDueInWheel_IsInWheelOfTheDueTick(t *testing.T) {
	for _, tick := range []time.Duration{time.Nanosecond, 7 * time.Nanosecond, time.Millisecond, time.Hour} {
		h, _ := newFake(t, WithShards(1), WithTick(tick))
		s := h.shards[0]
		r := rand.New(rand.NewPCG(uint64(tick), 1))
		values := []int64{math.MinInt64 + 2, -1, 0, 1, int64(tick) - 1, int64(tick), int64(tick) + 1, math.MaxInt64 - 1, math.MaxInt64}
		pick := func() int64 {
			if r.IntN(3) == 0 {
				return values[r.IntN(len(values))]
			}
			return r.Int64N(1<<40) - 1<<20
		}
		for range 20000 {
			now, fr, w := max(0, pick()/int64(tick)), pick()/int64(tick), pick()
			if r.IntN(2) == 0 {
				fr = math.MinInt64
			}
			s.now.Store(now)
			h.frontier.Store(fr)
			if got, want := s.dueInWheel(w), s.inWheel(h.dueTick(w)); got != want {
				t.Fatalf("tick %v, now %d, frontier %d, deadline %d: dueInWheel %v, inWheel of its due tick %v", tick, now, fr, w, got, want)
			}
		}
	}
}
