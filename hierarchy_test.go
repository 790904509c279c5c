package timingwheel

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// One test per guarantee of docs/guarantees.md, numbered in its order, then the slot and level
// arithmetic at every boundary, tiny layouts, concurrency and the driver.

func TestFiring_NeverEarlyAtMostOneTickLate(t *testing.T) {
	// Step table: tick 10ms. A deadline is due at the first tick at or after
	// it; Advance at clock time T fires exactly the timers due by T.
	h, clk := newFake(t, WithTick(10*time.Millisecond))
	var r recorder
	ms := time.Millisecond
	h.AfterFunc(10*ms, r.fn("10ms"))      // due 10ms
	h.AfterFunc(11*ms, r.fn("11ms"))      // due 20ms
	h.AfterFunc(20*ms, r.fn("20ms"))      // due 20ms
	h.AfterFunc(1, r.fn("1ns"))           // due 10ms
	h.AfterFunc(0, r.fn("zero"))          // due now (tick 0): next Advance
	h.AfterFunc(-time.Hour, r.fn("past")) // in the past: next Advance
	assert.Empty(t, r.take(), "nothing fires inside AfterFunc")

	steps := []struct {
		to   time.Duration // clock offset from origin
		want []string
	}{
		{0, []string{"past", "zero"}},
		{9*ms + 999_999, nil},
		{10 * ms, []string{"1ns", "10ms"}},
		{19 * ms, nil},
		{25 * ms, []string{"11ms", "20ms"}},
		{time.Hour, nil},
	}
	origin := clk.Now()
	for i, st := range steps {
		clk.Set(origin.Add(st.to))
		n := advanceWithin(t, h, fmt.Sprintf("step %d, at +%v", i, st.to))
		got := r.take()
		assert.ElementsMatch(t, st.want, got, "step %d: Advance at +%v", i, st.to)
		assert.Equal(t, len(st.want), n, "step %d: Advance's count", i)
		mustCheck(t, h)
	}
	assert.Equal(t, 0, h.Len())
}

func TestFiring_PastDeadlineFiresOnNextAdvanceNotInCall(t *testing.T) {
	h, mock := newMock(t)
	var r recorder
	tm := h.AtFunc(mock.Now().Add(-time.Second), r.fn("at"))
	h.AfterFunc(-1, r.fn("after"))
	assert.True(t, tm.Reset(-time.Minute), "Reset of an armed timer")
	assert.Empty(t, r.take())
	assert.Equal(t, 2, advanceWithin(t, h, "past deadlines"))
	assert.ElementsMatch(t, []string{"at", "after"}, r.take())
}

func TestPrecision_DoesNotDependOnDistance(t *testing.T) {
	day := 24 * time.Hour
	for _, d := range []time.Duration{
		time.Millisecond, time.Second + time.Millisecond, time.Hour + 7*time.Millisecond,
		day - time.Millisecond, day, day + time.Millisecond, 3*day + 5*time.Millisecond,
		400 * day, 200 * 365 * day,
	} {
		t.Run(d.String(), func(t *testing.T) {
			h, clk := newFake(t)
			origin := clk.Now()
			fired := 0
			h.AfterFunc(d, func() { fired++ })
			// Jump close in large steps, then to one ns before the deadline:
			// nothing may fire; at the deadline it must.
			for _, at := range []time.Duration{d / 3, d / 2, d - time.Second, d - 1} {
				if at > 0 {
					advanceTo(t, h, clk, origin.Add(at), "a jump towards the deadline")
					require.Equal(t, 0, fired, "fired early, at +%v", at)
					mustCheck(t, h)
				}
			}
			clk.Set(origin.Add(d))
			assert.Equal(t, 1, advanceWithin(t, h, "the deadline"))
			assert.Equal(t, 1, fired)
			assert.Equal(t, 0, h.Len())
		})
	}
}

func TestPrecision_LargestDurationDoesNotOverflow(t *testing.T) {
	h, clk := newFake(t)
	fired := false
	var tm, at *Timer
	mustReturn(t, 5*time.Second, "AfterFunc and AtFunc of deadlines at the end of time", func() {
		tm = h.AfterFunc(math.MaxInt64, func() { fired = true })
		at = h.AtFunc(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), func() { fired = true })
	})
	assert.Equal(t, clk.Now().Add(math.MaxInt64), tm.Deadline())
	for range 20 { // 20 jumps of ten years
		clk.Add(10 * 365 * 24 * time.Hour)
		advanceWithin(t, h, "a jump of ten years")
		mustCheck(t, h)
	}
	assert.False(t, fired)
	assert.Equal(t, 2, h.Len())
	assert.True(t, tm.Stop())
	assert.True(t, at.Stop())
}

func TestOrder_CallbacksRunInDeadlineOrderThroughEveryLevel(t *testing.T) {
	h, clk := newFake(t, WithLevels(10, 10, 10)) // cascades through every level
	r := rand.New(rand.NewPCG(3, 3))
	var got []time.Duration
	for range 2000 {
		d := time.Duration(r.Int64N(int64(5 * time.Second)))
		var tm *Timer
		tm = h.AfterFunc(d, func() { got = append(got, tm.Deadline().Sub(clk.Now())) })
	}
	clk.Add(10 * time.Second)
	assert.Equal(t, 2000, advanceWithin(t, h, "2000 timers through every level"))
	// Deadlines relative to the same now: rounded up to the tick they must
	// be non-decreasing.
	for i := 1; i < len(got); i++ {
		a, b := got[i-1].Truncate(time.Millisecond), got[i].Truncate(time.Millisecond)
		if got[i-1]%time.Millisecond != 0 {
			a += time.Millisecond
		}
		if got[i]%time.Millisecond != 0 {
			b += time.Millisecond
		}
		require.LessOrEqual(t, a, b, "callback %d out of order", i)
	}
}

func TestExactlyOnce_FiredOrStoppedNeverBoth(t *testing.T) {
	h, clk := newFake(t)
	var r recorder

	a := h.AfterFunc(time.Second, r.fn("a"))
	assert.True(t, a.Stop(), "Stop of an armed timer")
	assert.False(t, a.Stop(), "second Stop")
	assert.False(t, a.Reset(time.Second), "Reset of a stopped timer re-arms, returns false")
	assert.True(t, a.Reset(2*time.Second), "Reset of an armed timer")

	// Timers collected in the same tick: a callback stops or resets another
	// one. True means the other had not started and never runs for that
	// arming; false means it had already run.
	var b, c *Timer
	var bStopped, cReset bool
	h.AfterFunc(time.Second, func() {
		r.fn("first")()
		bStopped = b.Stop()
		cReset = c.Reset(time.Hour)
	})
	b = h.AfterFunc(time.Second, r.fn("b"))
	c = h.AfterFunc(time.Second, r.fn("c"))
	clk.Add(time.Second)
	advanceWithin(t, h, "a tick with callbacks stopping and resetting others")
	clk.Add(2 * time.Second)
	advanceWithin(t, h, "the re-armed timers")
	counts := map[string]int{}
	for _, g := range r.take() {
		counts[g]++
	}
	assert.Equal(t, 1, counts["a"], "a fires once for its last arming")
	assert.Equal(t, 1, counts["first"])
	assert.Equal(t, !bStopped, counts["b"] == 1, "b fired iff Stop returned false")
	assert.Equal(t, !cReset, counts["c"] == 1, "c fired in that tick iff Reset returned false")
	assert.Equal(t, 1, h.Len(), "c is armed an hour out")
}

func TestExactlyOnce_StopTrueAfterCollection(t *testing.T) {
	// Many timers in one tick; the first to run stops every other one. All
	// those Stops return true and none of those timers fire.
	h, clk := newFake(t)
	const n = 100
	timers := make([]*Timer, n)
	ran := make([]int, n)
	stoppedTrue := 0
	for i := range n {
		timers[i] = h.AfterFunc(time.Second, func() {
			ran[i]++
			for j := range n {
				if j != i && timers[j].Stop() {
					stoppedTrue++
				}
			}
		})
	}
	clk.Add(time.Second)
	assert.Equal(t, 1, advanceWithin(t, h, "a callback stopping the others of its tick"))
	assert.Equal(t, n-1, stoppedTrue)
	total := 0
	for _, c := range ran {
		total += c
	}
	assert.Equal(t, 1, total)
	assert.Equal(t, 0, h.Len())
	mustCheck(t, h)
}

func TestExactlyOnce_ResetAfterFireArmsAgain(t *testing.T) {
	h, clk := newFake(t)
	n := 0
	tm := h.AfterFunc(time.Millisecond, func() { n++ })
	clk.Add(time.Millisecond)
	advanceWithin(t, h, "the first firing")
	assert.Equal(t, 1, n)
	assert.False(t, tm.Stop())
	assert.False(t, tm.Reset(time.Millisecond), "the timer had fired")
	assert.True(t, tm.Stop())
	assert.False(t, tm.Reset(time.Millisecond))
	clk.Add(time.Millisecond)
	advanceWithin(t, h, "the firing after the re-arming")
	assert.Equal(t, 2, n)
}

func TestCallback_FreeToCallBack(t *testing.T) {
	h, clk := newFake(t)
	set := NewTimeouts(h, func(string) {})
	var r recorder
	var retransmit *Timer
	tries := 0
	retransmit = h.AfterFunc(100*time.Millisecond, func() {
		tries++
		r.fn(fmt.Sprint("try", tries))()
		if tries < 4 {
			// Back off: re-arm itself, from inside its own callback.
			assert.False(t, retransmit.Reset(time.Duration(tries)*200*time.Millisecond))
		}
		other := h.AfterFunc(time.Hour, r.fn("never"))
		assert.True(t, other.Stop())
		if tries < 4 {
			assert.Positive(t, h.Len(), "Len from a callback")
		}
		set.Add("k", time.Minute)
		set.Remove("k")
		assert.Equal(t, 0, set.Len())
		_, _ = h.Next()
		h.AtFunc(clk.Now().Add(-time.Second), r.fn("past-from-callback"))
	})
	_ = retransmit
	for range 50 {
		clk.Add(50 * time.Millisecond)
		advanceWithin(t, h, "a callback calling back into the hierarchy")
	}
	got := r.take()
	assert.Equal(t, []string{"try1", "try2", "try3", "try4"}, filter(got, "try"))
	assert.Len(t, filter(got, "past-from-callback"), 4, "armed in the past from callbacks: fire on this Advance or the next")
	assert.Empty(t, filter(got, "never"))
	assert.Equal(t, 0, h.Len())
}

func filter(got []string, prefix string) []string {
	var out []string
	for _, g := range got {
		if len(g) >= len(prefix) && g[:len(prefix)] == prefix {
			out = append(out, g)
		}
	}
	return out
}

func TestCallback_SelfRearmForNowDoesNotSpin(t *testing.T) {
	// A callback that re-arms itself for "now" fires once per Advance; the
	// Advance returns.
	h, _ := newFake(t)
	n := 0
	var tm *Timer
	tm = h.AfterFunc(0, func() { n++; tm.Reset(0) })
	assert.Equal(t, 1, advanceWithin(t, h, "a callback re-arms itself for now"))
	assert.Equal(t, 1, advanceWithin(t, h, "a callback re-arms itself for now, again"))
	assert.Equal(t, 2, n)
	assert.True(t, tm.Stop())
}

func TestStop_WithoutDriverReturnsAtOnce(t *testing.T) {
	h, _ := newFake(t)
	stopWithin(t, h, "never started")
	stopWithin(t, h, "never started, a second time")
}

func TestClock_BackwardStepsAndForwardJumps(t *testing.T) {
	h, clk := newFake(t)
	origin := clk.Now()
	var r recorder
	h.AtFunc(origin.Add(time.Second), r.fn("1s"))
	h.AtFunc(origin.Add(time.Hour), r.fn("1h"))

	advanceTo(t, h, clk, origin.Add(500*time.Millisecond), "half a second")
	clk.Set(origin.Add(-time.Hour)) // backwards, before the origin
	assert.Equal(t, 0, advanceWithin(t, h, "the clock gone backwards"))
	h.AfterFunc(time.Second, r.fn("armed-while-back")) // due at origin-59m59s
	assert.Equal(t, 0, advanceWithin(t, h, "the clock still backwards"))
	next, ok := h.Next()
	require.True(t, ok)
	assert.False(t, next.After(origin.Add(-time.Hour+time.Second)))
	mustCheck(t, h)

	clk.Set(origin.Add(-time.Hour + time.Second))
	assert.Equal(t, 1, advanceWithin(t, h, "the deadline armed while backwards"))
	assert.Equal(t, []string{"armed-while-back"}, r.take())
	clk.Set(origin.Add(999 * time.Millisecond))
	assert.Equal(t, 0, advanceWithin(t, h, "a tick before 1s"))
	clk.Set(origin.Add(time.Second))
	assert.Equal(t, 1, advanceWithin(t, h, "1s"))
	assert.Equal(t, []string{"1s"}, r.take())

	// A forward jump of 200 years with a 1ms tick: ~6e12 ticks skipped. The
	// work is proportional to the occupied slots crossed, so this returns
	// at once (a tick-by-tick walk would not finish).
	clk.Set(origin.Add(200 * 365 * 24 * time.Hour))
	assert.Equal(t, 1, advanceWithin(t, h, "a jump of 200 years"))
	assert.Equal(t, []string{"1h"}, r.take())
	mustCheck(t, h)
}

func TestConstantCost_NoAllocationToRearmAndOneToArm(t *testing.T) {
	h, clk := newFake(t)
	f := func() {}
	for range 1000 {
		h.AfterFunc(time.Duration(rand.Int64N(int64(time.Hour))), f)
	}
	tm := h.AfterFunc(30*time.Second, f)

	// Reset of an armed timer allocates nothing, later or earlier.
	allocs := testing.AllocsPerRun(1000, func() {
		tm.Reset(40 * time.Second)
		tm.Reset(20 * time.Second)
	})
	assert.Zero(t, allocs, "Reset allocates")
	// Arming allocates only the Timer.
	allocs = testing.AllocsPerRun(1000, func() { h.AfterFunc(time.Minute, f).Stop() })
	assert.LessOrEqual(t, allocs, 1.0)

	// A stopped timer is unlinked at once: its slot holds nothing after.
	lone := h.AtFunc(clk.Now().Add(500*time.Millisecond+123), f) // level 0, a slot of its own
	require.True(t, lone.Stop())
	assert.Nil(t, lone.next)
	assert.Nil(t, lone.prev)
	mustCheck(t, h)
	l0 := lone.home().levels[0]
	s := l0.slotOf(lone.filed) // a stopped timer keeps the tick it was filed under
	assert.True(t, l0.slots[s].empty(), "no tombstone left in the slot")
}

// TestNext_NeverLaterThanTheEarliestDeadline: Next may be early — at the
// cascade of a coarse slot holding the earliest timer, or at the tick a
// timer moved later was filed at — but never later than the earliest
// deadline's tick, and walking by it reaches that tick (see nextReaches).
// Each case replays the steps up to it on a fresh hierarchy, then walks.
func TestNext_NeverLaterThanTheEarliestDeadline(t *testing.T) {
	type step struct {
		name  string
		do    func(h *Hierarchy, timers *[]*Timer)
		want  time.Duration // the earliest deadline's tick, from the origin
		moved int           // timers moved later in place
	}
	arm := func(d time.Duration) func(*Hierarchy, *[]*Timer) {
		return func(h *Hierarchy, timers *[]*Timer) { *timers = append(*timers, h.AfterFunc(d, func() {})) }
	}
	steps := []step{
		{"arm 1m30s, the minutes level, mid-slot", arm(90 * time.Second), 90 * time.Second, 0},
		{"arm 1h0m1.5s", arm(time.Hour + 1500*time.Millisecond), 90 * time.Second, 0},
		{"arm 1.5s, the seconds level, mid-slot", arm(1500 * time.Millisecond), 1500 * time.Millisecond, 0},
		{"arm 1.234567ms, rounded up to the tick", arm(1234567 * time.Nanosecond), 2 * time.Millisecond, 0},
		{"stop the earliest", func(_ *Hierarchy, ts *[]*Timer) { (*ts)[3].Stop() }, 1500 * time.Millisecond, 0},
		{"stop the next", func(_ *Hierarchy, ts *[]*Timer) { (*ts)[2].Stop() }, 90 * time.Second, 0},
		{"move a coarse timer later, in place", func(_ *Hierarchy, ts *[]*Timer) { (*ts)[0].Reset(100 * time.Second) }, 100 * time.Second, 1},
		{"move one earlier", func(_ *Hierarchy, ts *[]*Timer) { (*ts)[1].Reset(time.Second) }, time.Second, 1},
	}
	for i, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			h, clk := newFake(t)
			_, ok := h.Next()
			require.False(t, ok, "nothing armed")
			var timers []*Timer
			for _, s := range steps[:i+1] {
				s.do(h, &timers)
			}
			nextReaches(t, h, clk, h.origin.Add(st.want), st.moved, st.name)
			clk.Set(h.origin.Add(st.want))
			assert.Equal(t, 1, advanceWithin(t, h, "the earliest deadline"), "the earliest timer fires at its tick")
		})
	}
}

// TestNext_CascadeOfAFullSlot: with thousands of timers in the earliest
// coarse slot, Next reports that slot's cascade, which is no later than any
// deadline in it, without looking at them; once advanced there, it is the
// earliest deadline.
func TestNext_CascadeOfAFullSlot(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	for i := range 3 * batch {
		h.AfterFunc(30*time.Second+time.Duration(500+i)*time.Millisecond, func() {})
	}
	next, ok := h.Next()
	require.True(t, ok)
	assert.Equal(t, h.origin.Add(30*time.Second), next, "the slot's cascade")
	clk.Set(next)
	assert.Equal(t, 0, advanceWithin(t, h, "the cascade of a slot of thousands of timers"), "a cascade, no firing")
	next, ok = h.Next()
	require.True(t, ok)
	assert.Equal(t, h.origin.Add(30500*time.Millisecond), next, "the earliest deadline after the cascade")
}

// TestNext_FromACallbackSeesTheTimersCollected: from a callback, the other
// timers due at the tick being fired, collected and not yet run, are armed:
// Next reports that tick, not false when they are all there is, nor a
// later timer's.
func TestNext_FromACallbackSeesTheTimersCollected(t *testing.T) {
	for _, later := range []bool{false, true} {
		h, clk := newFake(t, WithShards(1))
		at := h.origin.Add(90 * time.Second)
		var next time.Time
		var ok, ran bool
		h.AtFunc(at, func() { next, ok = h.Next() })
		h.AtFunc(at, func() { ran = true })
		if later {
			h.AtFunc(at.Add(time.Millisecond), func() {})
		}
		assert.Equal(t, 2, advanceTo(t, h, clk, at, "the tick of both"))
		require.True(t, ran)
		assert.True(t, ok, "Next from the first callback, the second collected (a later timer: %v)", later)
		assert.Equal(t, at, next, "the tick being fired (a later timer: %v)", later)
		_, ok = h.Next()
		assert.Equal(t, later, ok, "armed after: the later timer only")
	}
}

func TestDeterministic_WithMock(t *testing.T) {
	h, mock := newMock(t)
	var r recorder
	h.AfterFunc(25*time.Millisecond, r.fn("a"))
	h.AfterFunc(time.Minute, r.fn("b"))
	mock.Add(30 * time.Millisecond)
	assert.Equal(t, 1, advanceWithin(t, h, "the mock at 30ms"))
	assert.Equal(t, []string{"a"}, r.take())
	mock.Add(time.Minute)
	assert.Equal(t, 1, advanceWithin(t, h, "the mock a minute later"))
	assert.Equal(t, []string{"b"}, r.take())
}

func TestDeterministic_InSynctest(t *testing.T) {
	inBubble(t, "four timers with the driver", func(t *testing.T) {
		h := newStarted(t, WithTick(10*time.Millisecond)) // the real clock, fake time
		defer h.Stop()
		start := time.Now()
		var mu sync.Mutex
		var at []time.Duration
		for _, d := range []time.Duration{30, 10, 20, 25} {
			h.AfterFunc(d*time.Millisecond, func() {
				mu.Lock()
				at = append(at, time.Since(start))
				mu.Unlock()
			})
		}
		time.Sleep(30 * time.Millisecond)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		// Each fires at its deadline rounded up to the 10ms tick, exactly.
		assert.Equal(t, []time.Duration{10e6, 20e6, 30e6, 30e6}, at)
	})
}

// countingClock counts the clock reads the hierarchy makes: each driver
// wake-up reads the clock.
type countingClock struct {
	clock.Clock
	reads atomic.Int64
}

func (c *countingClock) Since(t time.Time) time.Duration { c.reads.Add(1); return c.Clock.Since(t) }
func (c *countingClock) Now() time.Time                  { c.reads.Add(1); return c.Clock.Now() }

// startCounting starts, inside a synctest bubble, a hierarchy on the real
// (bubble) clock that counts its clock reads, with opts besides; it stops
// when the test ends.
func startCounting(t *testing.T, opts ...Option) (*Hierarchy, *countingClock) {
	clk := &countingClock{Clock: clock.New()}
	h := newStarted(t, append([]Option{WithClock(clk)}, opts...)...)
	t.Cleanup(h.Stop)
	return h, clk
}

// assertAsleep, in a synctest bubble, lets d of fake time pass and asserts
// that the driver did not read clk meanwhile: it did not wake.
func assertAsleep(t *testing.T, clk *countingClock, d time.Duration) {
	t.Helper()
	before := clk.reads.Load()
	time.Sleep(d)
	synctest.Wait()
	assert.Equal(t, before, clk.reads.Load(), "the driver woke with nothing armed")
}

func TestDriver_IdleMeansAsleep(t *testing.T) {
	inBubble(t, "a driver idle, then with one timer a minute away", func(t *testing.T) {
		h, clk := startCounting(t)
		synctest.Wait()
		before := clk.reads.Load()
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		assert.Equal(t, before, clk.reads.Load(), "the driver woke while nothing was armed")

		// One timer a minute away wakes the driver once per level it
		// cascades through (minutes, seconds, milliseconds), not per tick.
		fired := make(chan time.Time, 1)
		start := time.Now()
		h.AfterFunc(61500*time.Millisecond, func() { fired <- time.Now() })
		synctest.Wait()
		before = clk.reads.Load()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		assert.Equal(t, 61500*time.Millisecond, (<-fired).Sub(start))
		wakeups := (clk.reads.Load() - before) / 2 // each wake-up: Advance, then the next sleep
		assert.LessOrEqual(t, wakeups, int64(3))
		t.Logf("wake-ups for one timer 61.5s away: %d", wakeups)
	})
}

func TestDriver_WakesForEarlierTimer(t *testing.T) {
	inBubble(t, "a driver asleep for an hour, woken for an earlier timer", func(t *testing.T) {
		h := newStarted(t)
		defer h.Stop()
		start := time.Now()
		var mu sync.Mutex
		var at []time.Duration
		rec := func() { mu.Lock(); at = append(at, time.Since(start)); mu.Unlock() }
		h.AfterFunc(time.Hour, rec)
		synctest.Wait() // driver asleep until the hour's cascade
		h.AfterFunc(5*time.Millisecond, rec)
		time.Sleep(time.Hour)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []time.Duration{5 * time.Millisecond, time.Hour}, at)
	})
}

func TestDriver_StartStopRestart(t *testing.T) {
	inBubble(t, "a driver started, stopped and restarted", func(t *testing.T) {
		h := mustNew(t)
		var n atomic.Int32
		h.AfterFunc(time.Second, func() { n.Add(1) })
		h.Start()
		h.Start() // no-op
		h.Stop()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Equal(t, int32(0), n.Load(), "stopped driver fired")
		assert.Equal(t, 1, h.Len(), "timers stay armed across Stop")
		h.Start()
		synctest.Wait()
		assert.Equal(t, int32(1), n.Load(), "overdue timer fires when restarted")
		h.Stop()
	})
}

func TestBadInput_PanicsWithClearMessages(t *testing.T) {
	h, _ := newFake(t)
	assert.PanicsWithValue(t, "timingwheel: AfterFunc called with a nil func", func() { h.AfterFunc(time.Second, nil) })
	assert.PanicsWithValue(t, "timingwheel: AtFunc called with a nil func", func() { h.AtFunc(time.Now(), nil) })
	var zero Timer
	assert.Panics(t, func() { zero.Stop() })
	assert.Equal(t, 0, h.Len())

	for _, tc := range []struct {
		name string
		opts []Option
		msg  string
	}{
		{"zero tick", []Option{WithTick(0)}, "WithTick(0s)"},
		{"negative tick", []Option{WithTick(-time.Millisecond)}, "WithTick(-1ms)"},
		{"no levels", []Option{WithLevels()}, "WithLevels()"},
		{"one slot", []Option{WithLevels(60, 1)}, "level 1 has 1 slots"},
		{"negative slots", []Option{WithLevels(-5)}, "level 0 has -5 slots"},
		{"too many slots", []Option{WithLevels(MaxSlots + 1)}, "level 0"},
		{"too many slots in all shards", []Option{WithShards(MaxShards), WithLevels(MaxSlots)}, "(MaxTotalSlots)"},
		{"levels summing past the total", []Option{WithShards(4), WithLevels(MaxSlots, 2)}, "at most 16777216"},
		{"levels far deadlines add past the total", []Option{WithShards(2), WithTick(time.Nanosecond), WithLevels(2, MaxSlots)}, "(MaxTotalSlots)"},
		{"nil clock", []Option{WithClock(nil)}, "WithClock(nil)"},
		{"nil option", []Option{nil}, "nil Option"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := New(tc.opts...)
			assert.Nil(t, h)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrInvalidConfig))
			assert.Contains(t, err.Error(), tc.msg)
			assert.Contains(t, err.Error(), "timingwheel: invalid config")
		})
	}
}

func TestBadInput_PanicInCallbackLeavesTheRestToRun(t *testing.T) {
	h, clk := newFake(t)
	var r recorder
	h.AfterFunc(time.Millisecond, r.fn("before"))
	h.AfterFunc(2*time.Millisecond, func() { panic("boom") })
	h.AfterFunc(2*time.Millisecond, r.fn("same-tick"))
	h.AfterFunc(3*time.Millisecond, r.fn("after"))
	h.AfterFunc(time.Hour, r.fn("later"))
	clk.Add(5 * time.Millisecond)
	func() {
		defer func() { assert.Equal(t, "boom", recover()) }()
		advanceWithin(t, h, "a panicking callback")
	}()
	mustCheck(t, h)
	fired := r.take()
	assert.Contains(t, fired, "before")
	// Whatever did not run yet runs on the next Advance; Len is exact.
	assert.Equal(t, 4-len(fired), h.Len())
	advanceWithin(t, h, "the Advance after a panic")
	fired = append(fired, r.take()...)
	assert.ElementsMatch(t, []string{"before", "same-tick", "after"}, fired)
	assert.Equal(t, 1, h.Len())
	mustCheck(t, h)
}

// TestLevelBoundaries arms timers at n*width-1, n*width and n*width+1 ticks
// for every level of several layouts and checks each fires at exactly its
// tick, neither before nor after.
func TestLevelBoundaries(t *testing.T) {
	for _, slots := range [][]int{{1000, 60, 60, 24}, {2, 2, 2}, {3}, {7, 5, 3}, {64, 64}} {
		t.Run(fmt.Sprint(slots), func(t *testing.T) {
			h, clk := newFake(t, WithLevels(slots...))
			origin := clk.Now()
			var dues []int64
			width := int64(1)
			for _, n := range append(slots, slots[len(slots)-1]) { // one overflow level too
				for _, k := range []int64{1, 2, int64(n) - 1, int64(n), int64(n) + 1} {
					for _, delta := range []int64{-1, 0, 1} {
						if d := k*width + delta; d > 0 && !slices.Contains(dues, d) {
							dues = append(dues, d)
						}
					}
				}
				width *= int64(n)
			}
			firedAt := map[int64][]int64{}
			for _, d := range dues {
				h.AtFunc(origin.Add(time.Duration(d)*time.Millisecond), func() {
					now := int64(clk.Now().Sub(origin) / time.Millisecond)
					firedAt[d] = append(firedAt[d], now)
				})
			}
			mustCheck(t, h)
			// Walk time by Next: each step is the next deadline (or a
			// cascade), so the walk takes a few steps per timer at most.
			for steps := 0; h.Len() > 0; steps++ {
				require.Less(t, steps, 10*len(dues), "hung: the walk by Next does not end: %d timers armed after %d steps", h.Len(), steps)
				next, ok := h.Next()
				require.True(t, ok)
				advanceTo(t, h, clk, next, "a step of the walk by Next")
				mustCheck(t, h)
			}
			for _, d := range dues {
				assert.Equal(t, []int64{d}, firedAt[d], "timer due at tick %d", d)
			}
		})
	}
}

// TestConcurrentChurn has goroutines arm, stop and reset shared timers while
// another advances the clock. Every arming must end exactly once: fired,
// or cancelled by a Stop or Reset that returned true.
func TestConcurrentChurn(t *testing.T) {
	h, clk := newFake(t, WithLevels(8, 8, 8)) // small levels: resets take the lazy path too
	const timers, workers = 200, 8
	ops := 20000
	if testing.Short() {
		ops = 2000
	}
	type counted struct {
		t        *Timer
		armings  atomic.Int64
		endings  atomic.Int64
		inflight atomic.Int32
	}
	all := make([]*counted, timers)
	for i := range all {
		c := &counted{}
		c.armings.Store(1)
		c.t = h.AfterFunc(time.Duration(i)*time.Millisecond, func() {
			if c.inflight.Add(1) != 1 {
				t.Error("callback running twice at once")
			}
			c.endings.Add(1)
			c.inflight.Add(-1)
		})
		all[i] = c
	}
	stopAdvancing := advanceContinuously(t, h, clk)
	var wg sync.WaitGroup
	goRandom(&wg, workers, 9, func(_ int, r *rand.Rand) {
		for range ops {
			c := all[r.IntN(timers)]
			switch r.IntN(4) {
			case 0:
				if c.t.Stop() {
					c.endings.Add(1)
				}
			default:
				c.armings.Add(1)
				d := time.Duration(r.Int64N(int64(600 * time.Millisecond)))
				if c.t.Reset(d) {
					c.endings.Add(1)
				}
			}
		}
	})
	waitWithin(t, 30*time.Second, &wg, "the workers arming, stopping and resetting timers")
	stopAdvancing()
	for _, c := range all {
		if c.t.Stop() {
			c.endings.Add(1)
		}
	}
	clk.Add(time.Hour)
	advanceWithin(t, h, "an hour after the churn")
	mustCheck(t, h)
	assert.Equal(t, 0, h.Len())
	for i, c := range all {
		assert.Equal(t, c.armings.Load(), c.endings.Load(), "timer %d: armings vs fired+cancelled", i)
	}
}

// TestStress_RealClockDriver has 8 goroutines arm, stop and re-arm short
// timers (1–50ms) on the real clock for a while (1s; 2s with
// TIMINGWHEEL_LONG=1), with the driver running.
// Every arming ends exactly once: fired, or cancelled by a Stop or Reset
// that returned true; never both, never twice.
func TestStress_RealClockDriver(t *testing.T) {
	run := volume(time.Second, 2*time.Second)
	if testing.Short() {
		run = 300 * time.Millisecond
	}
	h := newStarted(t)
	type counted struct {
		t                *Timer
		armings, endings atomic.Int64
	}
	const workers = 8
	var all sync.Map // *counted -> struct{}
	deadline := time.Now().Add(run)
	var wg sync.WaitGroup
	var early atomic.Int64
	goRandom(&wg, workers, 77, func(_ int, r *rand.Rand) {
		var mine []*counted
		for time.Now().Before(deadline) {
			switch op := r.IntN(10); {
			case op < 3 || len(mine) == 0:
				c := &counted{}
				c.armings.Store(1)
				at := time.Now().Add(time.Duration(1+r.IntN(50)) * time.Millisecond)
				c.t = h.AtFunc(at, func() {
					// Only the first arming's deadline is known here;
					// a Reset (counted before it is made) moves it.
					if now := time.Now(); c.armings.Load() == 1 && now.Before(at) {
						early.Add(1)
					}
					c.endings.Add(1)
				})
				mine = append(mine, c)
				all.Store(c, struct{}{})
			case op < 5:
				if c := mine[r.IntN(len(mine))]; c.t.Stop() {
					c.endings.Add(1)
				}
			default:
				c := mine[r.IntN(len(mine))]
				c.armings.Add(1)
				if c.t.Reset(time.Duration(1+r.IntN(50)) * time.Millisecond) {
					c.endings.Add(1)
				}
			}
			if len(mine) > 500 {
				mine = mine[250:]
			}
			if r.IntN(64) == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	})
	waitWithin(t, run+30*time.Second, &wg, "the workers arming, stopping and re-arming timers")
	time.Sleep(60 * time.Millisecond) // let the last timers fire
	stopWithin(t, h, "after the stress")
	n := 0
	all.Range(func(k, _ any) bool {
		c := k.(*counted)
		if c.t.Stop() {
			c.endings.Add(1)
		}
		n++
		require.Equal(t, c.armings.Load(), c.endings.Load(), "armings vs fired+cancelled")
		return true
	})
	assert.Zero(t, early.Load(), "timers fired before their deadline")
	assert.Zero(t, h.Len())
	mustCheck(t, h)
	t.Logf("%d timers", n)
}

// TestLatenessUnderLoad arms 10^5 timers on the real clock with the driver
// running while other goroutines burn CPU, and reports how late they fire.
// None may fire early.
func TestLatenessUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	h := newStarted(t)
	defer stopWithin(t, h, "after the load")
	stop := make(chan struct{})
	var burners sync.WaitGroup
	defer func() { // also if the test fails: the burners must not outlive it
		close(stop)
		waitWithin(t, 10*time.Second, &burners, "the goroutines burning CPU")
	}()
	for range 2 {
		burners.Go(func() {
			x := 0
			for {
				select {
				case <-stop:
					return
				default:
					for i := range 10000 {
						x += i
					}
				}
			}
		})
	}
	n := 100_000
	if raceEnabled {
		n = 20_000 // the race detector slows each callback tenfold
	}
	late := make([]time.Duration, n)
	var done sync.WaitGroup
	done.Add(n)
	r := rand.New(rand.NewPCG(1, 1))
	start := time.Now().Add(100 * time.Millisecond) // arming takes a while too
	for i := range n {
		at := start.Add(time.Duration(r.Int64N(int64(time.Second))))
		h.AtFunc(at, func() {
			late[i] = time.Since(at)
			done.Done()
		})
	}
	waitWithin(t, 30*time.Second, &done, fmt.Sprintf("%d timers due within 1.1s firing under CPU load", n))
	slices.Sort(late)
	assert.GreaterOrEqual(t, late[0], time.Duration(0), "a timer fired early")
	t.Logf("lateness of %d timers under CPU load: p50 %v, p99 %v, max %v",
		n, late[n/2], late[n*99/100], late[n-1])
}

// TestOrder_KeptAfterRecoveredPanic: what a panicking callback left
// unrun fires at the next Advance ahead of timers armed after the panic
// (in its shard: one here, as timers of different shards go shard by shard).
func TestOrder_KeptAfterRecoveredPanic(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	origin := clk.Now()
	var r recorder
	h.AtFunc(origin.Add(2*time.Millisecond), func() { panic("boom") })
	h.AtFunc(origin.Add(2*time.Millisecond), r.fn("B@2"))
	clk.Set(origin.Add(2 * time.Millisecond))
	func() {
		defer func() { recover() }()
		advanceWithin(t, h, "a panicking callback")
	}()
	got := r.take()
	h.AtFunc(origin.Add(time.Millisecond), r.fn("C@1"))
	advanceWithin(t, h, "the Advance after a panic")
	got = append(got, r.take()...)
	// B, collected before the panic, comes before C, armed after it for a
	// tick already come: in the order armed.
	assert.Equal(t, []string{"B@2", "C@1"}, got)
	mustCheck(t, h)
}

// TestOrder_PanicLeftoversAheadOfTimersArmedMeanwhile: what a panicking
// callback left goes back ahead of a past deadline a callback armed before
// the panic: they fire at the next Advance in the order armed, and nothing
// is left on the firing list in between.
func TestOrder_PanicLeftoversAheadOfTimersArmedMeanwhile(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	o := h.origin
	var r recorder
	at := o.Add(2 * time.Millisecond)
	h.AtFunc(at, func() { h.AtFunc(o, r.fn("X")) })
	h.AtFunc(at, func() { panic("boom") })
	h.AtFunc(at, r.fn("B"))
	clk.Set(at)
	assert.Panics(t, func() { h.Advance() })
	mustCheck(t, h)
	advanceWithin(t, h, "the Advance after a panic")
	assert.Equal(t, []string{"B", "X"}, r.take(), "B, armed before X")
	mustCheck(t, h)
}

// TestConstantCost_PastDeadlinesInAnyOrder arms many timers with past
// deadlines in decreasing order (the worst case for a sorted insert): each
// arming is O(1), and they fire in the order armed (in one shard).
func TestConstantCost_PastDeadlinesInAnyOrder(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	clk.Add(time.Hour)
	advanceWithin(t, h, "an hour")
	const n = 100_000
	var got []time.Time
	now := clk.Now()
	for i := range n {
		at := now.Add(-time.Duration(i+1) * time.Millisecond)
		h.AtFunc(at, func() { got = append(got, at) })
	}
	mustCheck(t, h)
	var ran int
	mustReturn(t, 30*time.Second, "Advance (100,000 past deadlines)", func() { ran = h.Advance() })
	assert.Equal(t, n, ran)
	assert.True(t, slices.IsSortedFunc(got, func(a, b time.Time) int { return b.Compare(a) }), "in the order armed: the latest deadline first")
}

// TestPrecision_DeadlinePastEndOfTimeNeverFires: a deadline past the largest Duration from the
// origin saturates there; it never fires (firing it at the saturated time
// would be early), Next does not offer it, and the driver does not spin on
// it once the clock is past that point.
func TestPrecision_DeadlinePastEndOfTimeNeverFires(t *testing.T) {
	for _, tick := range []time.Duration{time.Nanosecond, time.Millisecond} {
		t.Run(tick.String(), func(t *testing.T) {
			h, mock := newMock(t, WithTick(tick))
			mock.Add(time.Hour)
			fired := false
			var tm *Timer
			mustReturn(t, 5*time.Second, "AfterFunc of the largest Duration", func() { tm = h.AfterFunc(math.MaxInt64, func() { fired = true }) })
			_, ok := h.Next()
			assert.False(t, ok, "Next offers a deadline that can never come")
			assert.Equal(t, 1, h.Len())
			mock.Add(math.MaxInt64 - 30*time.Minute) // past the saturated deadline, before the asked one
			advanceWithin(t, h, "past the saturated deadline")
			assert.False(t, fired, "fired before its deadline")
			mustCheck(t, h)

			clk := &countingClock{Clock: mock}
			h2 := mustNew(t, WithClock(clk), WithTick(tick))
			mustReturn(t, 5*time.Second, "AfterFunc of the largest Duration", func() { h2.AfterFunc(math.MaxInt64, func() {}) })
			mock.Add(math.MaxInt64) // the clock saturates
			h2.Start()
			time.Sleep(20 * time.Millisecond)
			stopWithin(t, h2, "with the clock past the end of time")
			assert.Less(t, clk.reads.Load(), int64(1000), "the driver spins")
			assert.True(t, tm.Stop())
		})
	}
}

// TestPrecision_LastTickFires: a deadline due at the last tick the clock
// can reach is in a wheel, not with those that never fire: Next offers it,
// and it fires once the clock saturates, beside one past the end of time
// that does not.
func TestPrecision_LastTickFires(t *testing.T) {
	for _, tick := range []time.Duration{time.Nanosecond, time.Millisecond, 7 * time.Millisecond} {
		t.Run(tick.String(), func(t *testing.T) {
			h, clk := newFake(t, WithTick(tick))
			last := h.origin.Add(time.Duration(h.lastTick * int64(tick)))
			fired := 0
			h.AtFunc(last, func() { fired++ })
			h.AfterFunc(math.MaxInt64, func() { t.Error("a deadline past the end of time fired") })
			next, ok := h.Next()
			require.True(t, ok, "Next offers the last tick")
			assert.False(t, next.After(last), "Next = %v, after the last tick %v", next, last)
			mustCheck(t, h)
			assert.Equal(t, 1, advanceTo(t, h, clk, h.origin.Add(math.MaxInt64), "the clock saturated"))
			assert.Equal(t, 1, fired)
			_, ok = h.Next()
			assert.False(t, ok, "Next offers the deadline that never comes")
			assert.Equal(t, 1, h.Len())
			mustCheck(t, h)
		})
	}
}

func TestDriver_StopOfLastTimerMeansAsleep(t *testing.T) {
	inBubble(t, "a driver whose last timer is stopped", func(t *testing.T) {
		h, clk := startCounting(t)
		tm := h.AfterFunc(time.Hour, func() {})
		synctest.Wait()
		require.True(t, tm.Stop())
		assertAsleep(t, clk, 2*time.Hour)
	})
}

func TestNew_NilMockClock(t *testing.T) {
	var mock *clock.Mock
	h, err := New(WithClock(mock))
	assert.Nil(t, h)
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

// TestCallback_SelfRearmForNowRunsOncePerAdvance: a callback that re-arms its
// timer for "now" (here at most 5 times) fires once per Advance: the
// re-arming waits for the next Advance, in its own shard and in another.
func TestCallback_SelfRearmForNowRunsOncePerAdvance(t *testing.T) {
	for _, shards := range []int{1, 2} {
		h, clk := newFake(t, WithShards(shards))
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

// maxSlots counts the levels that far deadlines add, each with the last
// level's slots, until one spans every tick: a shard never holds more.
func TestNew_MaxSlotsCountsTheLevelsFarDeadlinesAdd(t *testing.T) {
	for _, levels := range [][]int{{1000, 60, 60, 24}, {2}, {7, 3}, {3, 5, 2}, {60}} {
		h, clk := newFake(t, WithShards(1), WithTick(time.Nanosecond), WithLevels(levels...))
		h.AtFunc(clk.Now().Add(time.Duration(math.MaxInt64)), func() {}) // the farthest deadline
		h.AtFunc(clk.Now().Add(-time.Duration(math.MaxInt64)), func() {})
		s := h.shards[0]
		s.lock()
		held := 0
		for _, l := range s.levels {
			held += len(l.slots)
		}
		s.mu.Unlock()
		assert.LessOrEqual(t, held, maxSlots(levels), "levels %v: a shard holds %d slots", levels, held)
	}
}
