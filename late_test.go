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

// TestLate_BurstSortedInBatches arms 20,000 timers for past deadlines in
// random order, then Advance sorts them in batches of 16 with the lock
// released in between, while other goroutines stop and re-arm them: they
// fire in deadline order, every arming ends exactly once, and the lock was
// let go many times.
func TestLate_BurstSortedInBatches(t *testing.T) {
	h, clk := newFake(t, WithShards(2), withBatch(16))
	clk.Add(time.Hour)
	const n = 20_000
	recs := make([]*countedTimer, n)
	var order sync.Mutex
	var fired []time.Duration
	r := rand.New(rand.NewPCG(8, 8))
	for i := range recs {
		x := newCountedTimer()
		ago := time.Duration(r.IntN(50*60*1000)) * time.Millisecond // up to 50 minutes ago
		x.t = h.AfterFunc(-ago, func() {
			order.Lock()
			fired = append(fired, x.t.Deadline().Sub(h.origin))
			order.Unlock()
			x.fired.Add(1)
		})
		recs[i] = x
	}
	var start atomic.Bool
	t.Cleanup(func() { start.Store(true) }) // should the sort never yield, the goroutines below still end
	var wg sync.WaitGroup
	advancing := func() bool { return h.shards[0].advancing } // its long work: a cascade, a sort
	stopWindows := inWindows(t, h.shards[0], advancing, func() { start.Store(true) })
	goRandom(&wg, 2, 6, func(g int, rnd *rand.Rand) {
		for !start.Load() {
			runtime.Gosched()
		}
		for i := g; i < n; i += 5 {
			recs[i].stopOrRearm(rnd, func(tm *Timer) bool {
				return tm.Reset(time.Duration(rnd.IntN(3)) * time.Hour)
			})
		}
	})
	mustReturn(t, 30*time.Second, "Advance (a sort of 20,000 past deadlines in batches, with goroutines stopping and re-arming them)", func() { h.Advance() })
	start.Store(true)
	waitWithin(t, 30*time.Second, &wg, "the goroutines stopping and re-arming timers during the sort")
	yields := stopWindows()
	clk.Add(3 * time.Hour)
	advanceWithin(t, h, "the re-armed timers, hours later")
	assertEachArmingEnded(t, recs)
	assert.Equal(t, 0, h.Len())
	assert.Positive(t, yields, "the lock was let go between batches")
	mustCheck(t, h)
}

// TestLate_OrderOfPastDeadlines: past deadlines armed in any order fire in
// deadline order, before the timers due now, also when a burst is larger
// than a batch.
func TestLate_OrderOfPastDeadlines(t *testing.T) {
	h, clk := newFake(t, WithShards(3), withBatch(8))
	clk.Add(time.Minute)
	var got []time.Duration
	rec := func(d time.Duration) func() { return func() { got = append(got, d) } }
	r := rand.New(rand.NewPCG(1, 1))
	var want []time.Duration
	for range 100 {
		d := time.Duration(r.IntN(60_000)) * time.Millisecond
		want = append(want, d)
		h.AtFunc(h.origin.Add(d), rec(d))
	}
	h.AtFunc(h.origin.Add(time.Minute), rec(time.Minute))
	want = append(want, time.Minute)
	assert.Equal(t, 101, advanceWithin(t, h, "past deadlines in three shards, sorted in batches"))
	assert.IsNonDecreasing(t, got)
	assert.ElementsMatch(t, want, got)
	mustCheck(t, h)
}

// TestLate_TimerLeavesLimboForAnotherHierarchy: timers taken off to be
// sorted are stopped between two batches and bound, by Init, to another
// hierarchy, where another goroutine keeps re-arming them while the sort
// goes on: the sort leaves them alone, and every other timer fires once.
// (The race this guards against, a read of a moved timer's links, was
// found by TestTimeouts_RemoveRacesExpiry under -race; this test drives the
// same path deterministically but the detector does not always see it.)
func TestLate_TimerLeavesLimboForAnotherHierarchy(t *testing.T) {
	h, clk := newFake(t, WithShards(1), withBatch(8))
	other, _ := newFake(t, WithShards(1))
	clk.Add(time.Hour)
	const n = 200
	timers := make([]Timer, n)
	var fired atomic.Int64
	for i := range timers {
		timers[i].Init(h, func() { fired.Add(1) })
		timers[i].Reset(-time.Duration(n-i) * time.Millisecond)
	}
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
	next, left := 0, 0
	s := h.shards[0]
	stop := inWindows(t, s, func() bool { return s.sorting }, func() {
		if next < n/2 {
			tm := &timers[next]
			next += 2
			if tm.Stop() {
				left++
				tm.Init(other, func() {})
				moved <- tm
			}
		}
	})
	advanceWithin(t, h, "a sort of past deadlines, timers leaving for another hierarchy between its batches")
	stop()
	close(moved)
	waitWithin(t, 10*time.Second, &wg, "the goroutine re-arming the timers that left")
	assert.Equal(t, int64(n-left), fired.Load())
	mustCheck(t, h)
	mustCheck(t, other)
}

// TestNext_ManyPastDeadlines: with more past deadlines in one
// shard than Next looks at, Next still reports one no later than the
// earliest (armed last, beyond the budget).
func TestNext_ManyPastDeadlines(t *testing.T) {
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

// newSortingBy4 returns a hierarchy of one shard on a fake clock that
// sorts past deadlines in batches of 4, its clock an hour past the origin
// and advanced there, nothing armed.
func newSortingBy4(t *testing.T) (*Hierarchy, *fakeClock) {
	t.Helper()
	h, clk := newFake(t, WithShards(1), withBatch(4))
	clk.Add(time.Hour)
	advanceWithin(t, h, "the next Advance")
	return h, clk
}

// TestNext_WhileSortingPastDeadlines: while Advance sorts past
// deadlines with the shard's lock released, the timers taken off to be
// sorted still count for Next, also after a later past deadline is armed
// meanwhile; and they fire in order.
func TestNext_WhileSortingPastDeadlines(t *testing.T) {
	h, clk := newSortingBy4(t)
	now := clk.Now()
	var got []time.Duration
	rec := func(d time.Duration) func() { return func() { got = append(got, d) } }
	for i := range 10 {
		d := -time.Duration(10-i) * time.Second // the earliest first
		h.AtFunc(now.Add(d), rec(d))
	}
	s := h.shards[0]
	checked := false
	stop := inWindows(t, s, func() bool { return s.sorting && s.late.empty() }, func() {
		if checked {
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
	})
	advanceWithin(t, h, "a sort of past deadlines, Next called between its batches")
	stop()
	require.True(t, checked, "the hook saw every past timer in limbo")
	advanceWithin(t, h, "the Advance after")
	assert.Len(t, got, 11)
	assert.IsNonDecreasing(t, got)
	mustCheck(t, h)
}

// TestLate_MergeIntoOverdueWhileStopping: the clock went backwards, so
// the overdue list keeps timers between Advances and new past deadlines are
// merged into it in batches. A timer of the overdue list stopped between
// two batches must not derail the merge.
func TestLate_MergeIntoOverdueWhileStopping(t *testing.T) {
	h, clk := newFake(t, WithShards(1), withBatch(4))
	origin := h.origin
	advanceTo(t, h, clk, origin.Add(time.Hour), "the next Advance")
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
	s := h.shards[0]
	stop := inWindows(t, s, func() bool { return s.sorting }, func() {
		if len(overdue) > 0 && overdue[0].Stop() { // the merge's place in the overdue list, once merging
			overdue = overdue[1:]
		}
	})
	assert.Equal(t, 0, advanceWithin(t, h, "a merge of past deadlines into the overdue list"))
	stop()
	mustCheck(t, h)
	advanceTo(t, h, clk, origin.Add(2*time.Hour), "firing the merged overdue list")
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

// TestLate_StopAndRearmSameTickWhileSorting: between two batches of the
// sort of past deadlines, a timer taken off to be sorted is stopped and
// re-armed for the same past deadline: it is on the late list again, filed
// at the same tick as when it was taken off, and the sort must leave it
// there. It fires once, on the next Advance.
func TestLate_StopAndRearmSameTickWhileSorting(t *testing.T) {
	h, clk := newSortingBy4(t)
	now := clk.Now()
	fired := map[int]int{}
	var timers []*Timer
	for i := range 10 {
		timers = append(timers, h.AtFunc(now.Add(-time.Duration(10-i)*time.Second), func() { fired[i]++ }))
	}
	yields := 0
	s := h.shards[0]
	stop := inWindows(t, s, func() bool { return s.sorting }, func() {
		if yields++; yields == 1 { // the first batch is in limbo
			x := timers[0]
			assert.True(t, x.Stop())
			assert.False(t, x.ResetAt(x.Deadline()), "re-armed after the Stop")
		}
	})
	n := advanceWithin(t, h, "a sort of past deadlines with a timer stopped and re-armed meanwhile")
	stop()
	mustCheck(t, h)
	n += advanceWithin(t, h, "the Advance after")
	assert.Equal(t, 10, n)
	for i := range 10 {
		assert.Equal(t, 1, fired[i], "timer %d fired once", i)
	}
	assert.Equal(t, 0, h.Len())
	mustCheck(t, h)
}
