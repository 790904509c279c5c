package timingwheel

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLate_FireInArmingOrderAheadOfLaterTicks: past deadlines armed in any
// order fire at the next Advance in the order they were armed, each
// shard's in turn (in the order of the shards), before the timers due at
// the clock's tick, which had not come when they were armed.
func TestLate_FireInArmingOrderAheadOfLaterTicks(t *testing.T) {
	h, clk := newFake(t, WithShards(3))
	dealNext(h, 1) // the i-th timer armed goes to shard (i+1) mod 3
	clk.Add(time.Minute)
	advanceWithin(t, h, "the clock a minute past the origin")
	clk.Add(time.Millisecond)
	var got []int
	r := rand.New(rand.NewPCG(1, 1))
	var want [3][]int
	for i := range 99 {
		d := time.Duration(r.IntN(60_000)) * time.Millisecond
		h.AtFunc(h.origin.Add(d), func() { got = append(got, i) })
		want[(i+1)%3] = append(want[(i+1)%3], i)
	}
	h.AfterFunc(0, func() { got = append(got, -1) }) // due at the tick the clock reached: not late
	assert.Equal(t, 100, advanceWithin(t, h, "past deadlines in three shards"))
	assert.Equal(t, append(append(append(want[0], want[1]...), want[2]...), -1), got)
	mustCheck(t, h)
}

// TestLate_BurstFiredWhileOthersStopAndRearm: a burst of 20,000 past
// deadlines fires with the lock released around each callback, while other
// goroutines stop and re-arm those timers: every arming ends exactly once,
// and the timers never stopped or re-armed fire in the order armed.
func TestLate_BurstFiredWhileOthersStopAndRearm(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	advanceTo(t, h, clk, h.origin.Add(time.Hour), "an hour past the origin")
	const n = 20_000
	recs := make([]*countedTimer, n)
	var order sync.Mutex
	var fired []int
	r := rand.New(rand.NewPCG(8, 8))
	for i := range recs {
		x := newCountedTimer()
		ago := time.Duration(r.IntN(50*60*1000)) * time.Millisecond // up to 50 minutes ago
		x.t = h.AfterFunc(-ago, func() {
			order.Lock()
			fired = append(fired, i)
			order.Unlock()
			x.fired.Add(1)
		})
		recs[i] = x
	}
	var start atomic.Bool
	var wg sync.WaitGroup
	goRandom(&wg, 2, 6, func(g int, rnd *rand.Rand) {
		for !start.Load() {
			runtime.Gosched()
		}
		for i := g; i < n; i += 5 { // the others are left alone
			recs[i].stopOrRearm(rnd, func(tm *Timer) bool {
				return tm.Reset(time.Duration(rnd.IntN(3)) * time.Hour)
			})
		}
	})
	start.Store(true)
	mustReturn(t, 30*time.Second, "Advance (20,000 past deadlines, goroutines stopping and re-arming them)", func() { h.Advance() })
	waitWithin(t, 30*time.Second, &wg, "the goroutines stopping and re-arming timers")
	clk.Add(3 * time.Hour)
	advanceWithin(t, h, "the re-armed timers, hours later")
	assertEachArmingEnded(t, recs)
	assert.Equal(t, 0, h.Len())
	var untouched []int
	order.Lock()
	for _, i := range fired {
		if i%5 >= 2 {
			untouched = append(untouched, i)
		}
	}
	order.Unlock()
	assert.IsIncreasing(t, untouched, "the timers left alone fired in the order armed")
	mustCheck(t, h)
}

// newBackwards returns a hierarchy of one shard on a fake clock that walks
// its late list in batches of 4, advanced to an hour past the origin and
// then set back to half an hour: past deadlines between the two are on
// the late list but not due.
func newBackwards(t *testing.T) (*Hierarchy, *fakeClock) {
	t.Helper()
	h, clk := newFake(t, WithShards(1), withBatch(4))
	advanceTo(t, h, clk, h.origin.Add(time.Hour), "an hour past the origin")
	clk.Set(h.origin.Add(30 * time.Minute))
	return h, clk
}

// walking reports, for inWindows, whether s walks its late list: the
// windows between batches of that walk.
func walking(s *shard) func() bool { return func() bool { return s.walk != nil } }

// TestLate_ClockBackKeepsWhatIsNotDue: after the clock went back, an
// Advance fires exactly the late timers due by its tick, in the order
// armed, in batches with the lock released in between; the others stay,
// with Next and the driver's next wake-up no later than the earliest, and
// fire in the order armed once the clock passes them, a timer stopped
// between two batches (the one the walk was to look at next) not at all.
func TestLate_ClockBackKeepsWhatIsNotDue(t *testing.T) {
	h, clk := newBackwards(t)
	origin := h.origin
	var got []time.Duration
	rec := func(d time.Duration) func() { return func() { got = append(got, d) } }
	mins := []time.Duration{50, 20, 45, 10, 55, 25, 40, 15, 35, 52, 5, 48}
	timers := map[time.Duration]*Timer{}
	for _, m := range mins {
		timers[m] = h.AtFunc(origin.Add(m*time.Minute), rec(m))
	}
	h.AtFunc(origin.Add(3*time.Hour), rec(180)) // in a wheel, for the driver's next wake-up not to take
	s := h.shards[0]
	// Each window the test gets in is counted once, by how many timers the
	// walk had looked at (those it moved to the firing list, and those it
	// kept, before walk), which grows from window to window: inWindows may
	// try again before the walk takes the lock back, and under -race the
	// scheduler may let the walk take it back before a try, so the first
	// window the test gets in is after the first or the second batch.
	var looked []int
	var ahead *Timer // the timer the walk looks at next, in the first window
	stop := inWindows(t, s, func() bool {
		if s.walk == nil {
			return false
		}
		n := 0
		for x := s.firing.next; x != &s.firing; x = x.next {
			n++
		}
		for x := s.late.next; x != s.walk; x = x.next {
			n++
		}
		if len(looked) > 0 && n <= looked[len(looked)-1] {
			return false
		}
		if looked = append(looked, n); len(looked) == 1 {
			ahead = s.walk
		}
		return true
	}, func() {
		if x := ahead; x != nil {
			ahead = nil
			assert.True(t, x.Stop(), "the timer the walk looks at next")
		}
	})
	assert.Equal(t, 5, advanceWithin(t, h, "an Advance after the clock went back"))
	stop()
	require.NotEmpty(t, looked, "a window between batches of the walk")
	assert.Subset(t, []int{4, 8}, looked, "the windows between batches of the walk (11 timers in batches of 4: two)")
	stopped, earliest := time.Duration(55), time.Duration(35) // 5th of 12, after the first batch
	if looked[0] == 8 {
		stopped, earliest = 35, 40 // 9th, after the second
	}
	assert.Equal(t, []time.Duration{20, 10, 25, 15, 5}, got, "the late timers due at 30 minutes, in the order armed")
	next, ok := h.Next()
	require.True(t, ok)
	assert.Equal(t, origin.Add(earliest*time.Minute), next, "Next: the earliest late timer not due")
	e, ok := h.nextWork(false)
	require.True(t, ok)
	assert.LessOrEqual(t, e, h.dueTick(int64(earliest*time.Minute)), "the driver's next wake-up")
	assert.Greater(t, e, h.dueTick(int64(30*time.Minute)), "the driver's next wake-up: not due yet")
	mustCheck(t, h)
	got = nil
	advanceTo(t, h, clk, origin.Add(2*time.Hour), "the clock past them all")
	var rest []time.Duration
	for _, m := range []time.Duration{50, 45, 55, 40, 35, 52, 48} {
		if m != stopped {
			rest = append(rest, m)
		}
	}
	assert.Equal(t, rest, got, "the rest, in the order armed, but the one stopped")
	assert.Equal(t, 1, h.Len(), "the timer 3 hours out")
	mustCheck(t, h)
}

// TestLate_ClockBackTimerLeavesForAnotherHierarchy: between two batches of
// the walk of the late list, timers are stopped and bound, by Init, to
// another hierarchy, where another goroutine keeps re-arming them: the walk
// goes on without them, and every other timer fires once.
func TestLate_ClockBackTimerLeavesForAnotherHierarchy(t *testing.T) {
	h, clk := newBackwards(t)
	other, _ := newFake(t, WithShards(1))
	const n = 200
	timers := make([]Timer, n)
	var fired atomic.Int64
	for i := range timers {
		timers[i].Init(h, func() { fired.Add(1) })
		timers[i].ResetAt(h.origin.Add(time.Hour - time.Duration(n-i)*time.Millisecond))
	}
	clk.Set(h.origin.Add(time.Hour - n/2*time.Millisecond)) // half are due
	moved := make(chan *Timer, n)
	var wg sync.WaitGroup
	wg.Go(func() {
		for tm := range moved {
			for range 50 {
				tm.Reset(time.Minute)
				tm.Stop()
			}
		}
	})
	next := 0
	s := h.shards[0]
	stop := inWindows(t, s, walking(s), func() {
		s.lock()
		w := s.walk
		s.mu.Unlock()
		for i := range timers {
			if tm := &timers[i]; tm == w && tm.Stop() { // the walk's next
				tm.Init(other, func() {})
				moved <- tm
				next++
			}
		}
	})
	first := advanceWithin(t, h, "a walk of the late list, timers leaving for another hierarchy between its batches")
	stop()
	clk.Set(h.origin.Add(2 * time.Hour))
	rest := advanceWithin(t, h, "the rest")
	close(moved)
	waitWithin(t, 10*time.Second, &wg, "the goroutine re-arming the timers that left")
	assert.Positive(t, next)
	assert.Equal(t, int64(n-next), fired.Load())
	assert.Equal(t, n-next, first+rest)
	mustCheck(t, h)
	mustCheck(t, other)
}

// TestNext_ManyPastDeadlines: with many past deadlines in one shard, Next
// reports the earliest (armed last), from the late list's bound, without
// looking at them.
func TestNext_ManyPastDeadlines(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	clk.Add(time.Hour)
	advanceWithin(t, h, "the next Advance")
	now := clk.Now()
	const n = 512
	for i := range n {
		h.AtFunc(now.Add(-time.Duration(i+1)*time.Millisecond), func() {})
	}
	next, ok := h.Next()
	require.True(t, ok)
	assert.Equal(t, now.Add(-n*time.Millisecond), next, "Next is the earliest past deadline")
	assert.Equal(t, n, advanceWithin(t, h, "firing many past deadlines"))
}

// TestLate_StopAndRearmSameTickWhileWalking: between two batches of the
// walk of the late list (the clock went back), a timer already looked at
// is stopped and re-armed for the same past deadline: it is on the late
// list again, behind the walk, and fires once, on an Advance whose clock
// has reached it.
func TestLate_StopAndRearmSameTickWhileWalking(t *testing.T) {
	h, clk := newBackwards(t)
	fired := map[int]int{}
	var timers []*Timer
	for i := range 10 {
		timers = append(timers, h.AtFunc(h.origin.Add(time.Hour-time.Duration(10-i)*time.Second), func() { fired[i]++ }))
	}
	yields := 0
	s := h.shards[0]
	stop := inWindows(t, s, walking(s), func() {
		if yields++; yields == 1 {
			x := timers[0]
			assert.True(t, x.Stop())
			assert.False(t, x.ResetAt(x.Deadline()), "re-armed after the Stop")
		}
	})
	n := advanceWithin(t, h, "a walk of the late list with a timer stopped and re-armed meanwhile")
	assert.Positive(t, stop(), "the walk let the lock go between batches")
	assert.Zero(t, n, "none is due yet")
	mustCheck(t, h)
	n += advanceTo(t, h, clk, h.origin.Add(time.Hour), "the Advance after")
	assert.Equal(t, 10, n)
	for i := range 10 {
		assert.Equal(t, 1, fired[i], "timer %d fired once", i)
	}
	assert.Equal(t, 0, h.Len())
	mustCheck(t, h)
}

// TestLate_ClockBackByOneTick: a timer armed by a callback for the tick that
// Advance is firing is filed at the shard's now, on the late list; when the
// clock then goes back by one tick, it is not due, and fires once the clock
// is back at its tick.
func TestLate_ClockBackByOneTick(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	at := h.origin.Add(time.Hour)
	fired := 0
	h.AtFunc(at, func() { h.AtFunc(at, func() { fired++ }) })
	assert.Equal(t, 1, advanceTo(t, h, clk, at, "the hour"))
	assert.Equal(t, 0, advanceTo(t, h, clk, at.Add(-time.Millisecond), "a tick back"), "the timer armed for the hour: early")
	assert.Equal(t, 1, advanceTo(t, h, clk, at, "the hour again"))
	assert.Equal(t, 1, fired)
	mustCheck(t, h)
}

// TestLate_MovedLeftoverStillDueFires: a timer moved later in its slot and
// left on the firing list by a panicking callback goes to the late list,
// filed at its old tick; the next Advance, whose tick is past its new one,
// finds it moved and still due, and fires it.
func TestLate_MovedLeftoverStillDueFires(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	o := h.origin
	h.AtFunc(o.Add(5*time.Millisecond), func() { panic("boom") })
	fired := 0
	x := h.AtFunc(o.Add(5*time.Millisecond), func() { fired++ })
	require.True(t, x.ResetAt(o.Add(7*time.Millisecond)), "moved later, in place")
	clk.Set(o.Add(10 * time.Millisecond))
	assert.Panics(t, func() { h.Advance() })
	mustCheck(t, h)
	assert.Equal(t, 1, advanceWithin(t, h, "the Advance after the panic, the clock unmoved"))
	assert.Equal(t, 1, fired)
	mustCheck(t, h)
}

// TestLate_PanicLeftoversBoundTheDriversWake: after a walk of the late list
// left nothing (the clock went back), a panicking callback's leftovers go on
// the late list, and the driver's next wake-up is no later than their tick.
func TestLate_PanicLeftoversBoundTheDriversWake(t *testing.T) {
	h, clk := newBackwards(t)
	o := h.origin
	h.AtFunc(o.Add(10*time.Minute), func() {})
	assert.Equal(t, 1, advanceWithin(t, h, "a walk that fires the one late timer"))
	at := o.Add(time.Hour + 5*time.Millisecond)
	h.AtFunc(at, func() { panic("boom") })
	h.AtFunc(at, func() {})
	clk.Set(at)
	assert.Panics(t, func() { h.Advance() })
	e, ok := h.nextWork(false)
	require.True(t, ok, "the driver wakes for the timer left")
	assert.LessOrEqual(t, e, h.dueTick(int64(at.Sub(o))))
	assert.Equal(t, 1, advanceWithin(t, h, "the Advance after the panic"))
	mustCheck(t, h)
}
