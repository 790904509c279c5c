package timingwheel

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Periodic timers (docs/guarantees.md, "Periodic timers"). The cases follow what the standard
// library checks for time.Ticker (runs on its grid, dropped ticks for a
// slow receiver, Stop, Reset, a non-positive period panics), plus the
// wheel's own: the next run is armed before f starts, Stop during f wins.

// runTimes collects the clock's reading (since start) at each run.
type runTimes struct {
	mu  sync.Mutex
	at  []time.Duration
	now func() time.Duration
}

func (r *runTimes) fn() func() {
	return func() {
		r.mu.Lock()
		r.at = append(r.at, r.now())
		r.mu.Unlock()
	}
}

func (r *runTimes) take() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	at := r.at
	r.at = nil
	return at
}

func TestPeriodic_RunsOnItsGrid(t *testing.T) {
	h, clk := newFake(t)
	start := clk.Now()
	r := &runTimes{now: func() time.Duration { return clk.Now().Sub(start) }}
	tm := h.Every(10*time.Millisecond, r.fn())
	for range 5 {
		next, ok := h.Next()
		require.True(t, ok)
		advanceTo(t, h, clk, next, "to the next run")
	}
	assert.Equal(t, []time.Duration{10e6, 20e6, 30e6, 40e6, 50e6}, r.take())
	assert.Equal(t, start.Add(60*time.Millisecond), tm.Deadline(), "Deadline is the next run's instant")
	assert.Equal(t, 1, h.Len(), "a periodic timer stays armed")
	mustCheck(t, h)
}

// TestPeriodic_NoDriftWhenRunsAreLate: each Advance comes late, by a
// different amount; the k-th run is still due at A+k*p.
func TestPeriodic_NoDriftWhenRunsAreLate(t *testing.T) {
	h, clk := newFake(t)
	start := clk.Now()
	var due []time.Duration
	var tm *Timer
	tm = new(Timer).Init(h, func() { due = append(due, tm.Deadline().Sub(start)) })
	tm.ResetEvery(100 * time.Millisecond)
	for k, late := range []time.Duration{7, 93, 0, 50, 99} {
		clk.Set(start.Add(time.Duration(k+1)*100*time.Millisecond + late*time.Millisecond))
		require.Equal(t, 1, advanceWithin(t, h, "a late run"), "run %d", k+1)
	}
	// Seen from inside f, Deadline is already the next instant.
	assert.Equal(t, []time.Duration{200e6, 300e6, 400e6, 500e6, 600e6}, due)
	mustCheck(t, h)
}

// TestPeriodic_NeverEarlyOffTheTick: a period that is not a multiple of the
// tick, started between ticks: every instant is rounded up, never down.
func TestPeriodic_NeverEarlyOffTheTick(t *testing.T) {
	h, clk := newFake(t)
	clk.Add(300 * time.Microsecond)
	a := clk.Now()
	r := &runTimes{now: func() time.Duration { return clk.Now().Sub(a) }}
	h.Every(2500*time.Microsecond, r.fn())
	for range 2008 { // 0.25ms steps over 502ms: the 200th instant, at 500.3ms, is due at 501ms
		clk.Add(250 * time.Microsecond)
		advanceWithin(t, h, "a quarter tick on")
	}
	at := r.take()
	require.Len(t, at, 200)
	for k, got := range at {
		want := time.Duration(k+1) * 2500 * time.Microsecond
		assert.GreaterOrEqual(t, got, want, "run %d early", k+1)
		assert.Less(t, got, want+time.Millisecond, "run %d more than a tick late", k+1)
	}
}

// TestPeriodic_MissedRunsAreSkipped: a jump over several instants runs f
// once, and the next run is the first instant not yet due at the Advance
// (here, on the tick, the first after its clock), as time.Ticker drops
// ticks.
func TestPeriodic_MissedRunsAreSkipped(t *testing.T) {
	h, clk := newFake(t)
	start := clk.Now()
	r := &runTimes{now: func() time.Duration { return clk.Now().Sub(start) }}
	tm := h.Every(10*time.Millisecond, r.fn())
	clk.Add(55 * time.Millisecond)
	assert.Equal(t, 1, advanceWithin(t, h, "a jump over five instants"))
	assert.Equal(t, start.Add(60*time.Millisecond), tm.Deadline())
	clk.Add(4 * time.Millisecond) // 59ms
	assert.Equal(t, 0, advanceWithin(t, h, "before the next instant"))
	clk.Add(time.Millisecond) // 60ms
	assert.Equal(t, 1, advanceWithin(t, h, "the next instant"))
	clk.Add(time.Hour + 5*time.Millisecond)
	assert.Equal(t, 1, advanceWithin(t, h, "a jump over an hour of instants"))
	assert.Equal(t, start.Add(time.Hour+70*time.Millisecond), tm.Deadline())
	assert.Equal(t, []time.Duration{55e6, 60e6, time.Hour + 65e6}, r.take())
	mustCheck(t, h)
}

// TestPeriodic_StopInsideItsCallbackWins: the next run is armed before f
// starts, so Stop from f returns true and no later run starts.
func TestPeriodic_StopInsideItsCallbackWins(t *testing.T) {
	h, clk := newFake(t)
	runs := 0
	var stopped bool
	var tm *Timer
	tm = new(Timer).Init(h, func() {
		runs++
		if runs == 3 {
			stopped = tm.Stop()
		}
	})
	tm.ResetEvery(time.Millisecond)
	for range 10 {
		clk.Add(time.Millisecond)
		advanceWithin(t, h, "one period on")
	}
	assert.Equal(t, 3, runs)
	assert.True(t, stopped, "Stop in the callback found the next run armed")
	assert.Equal(t, 0, h.Len())
	assert.False(t, tm.Stop(), "stopped already")
	mustCheck(t, h)
}

// TestPeriodic_StopWhileCallbackRunsWins: Stop from another goroutine
// while f runs returns true, and f never starts again.
func TestPeriodic_StopWhileCallbackRunsWins(t *testing.T) {
	h, clk := newFake(t)
	inF, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	tm := h.Every(time.Millisecond, func() {
		if runs.Add(1) == 1 {
			close(inF)
			<-release
		}
	})
	done := make(chan int, 1)
	clk.Add(time.Millisecond)
	go func() { done <- h.Advance() }()
	recvWithin(t, 5*time.Second, inF, "the first run starting")
	assert.True(t, tm.Stop(), "Stop while f runs stops the next run")
	close(release)
	assert.Equal(t, 1, recvWithin(t, 5*time.Second, done, "the Advance running the first run"))
	clk.Add(time.Second)
	assert.Equal(t, 0, advanceWithin(t, h, "a second later"), "no run after Stop returned true")
	assert.Equal(t, int32(1), runs.Load())
	mustCheck(t, h)
}

// TestPeriodic_ResetMakesItOneShot: Reset and ResetAt turn a periodic
// timer into a one-shot one; ResetEvery makes any timer periodic.
func TestPeriodic_ResetMakesItOneShot(t *testing.T) {
	h, clk := newFake(t)
	start := clk.Now()
	r := &runTimes{now: func() time.Duration { return clk.Now().Sub(start) }}
	tm := h.Every(10*time.Millisecond, r.fn())
	assert.True(t, tm.Reset(25*time.Millisecond), "it was armed")
	clk.Add(time.Second)
	advanceWithin(t, h, "past the one-shot deadline")
	assert.Equal(t, []time.Duration{time.Second}, r.take(), "ran once, after Reset")
	assert.Equal(t, 0, h.Len())

	assert.False(t, tm.ResetEvery(5*time.Millisecond), "it had fired")
	clk.Add(5 * time.Millisecond)
	advanceWithin(t, h, "one period")
	assert.True(t, tm.ResetAt(clk.Now().Add(7*time.Millisecond)))
	clk.Add(time.Second)
	advanceWithin(t, h, "past the one-shot deadline")
	assert.Equal(t, []time.Duration{1005e6, 2005e6}, r.take())
	assert.Equal(t, 0, h.Len())

	one := h.AfterFunc(time.Hour, r.fn())
	assert.True(t, one.ResetEvery(time.Millisecond), "ResetEvery of an armed one-shot timer")
	clk.Add(3 * time.Millisecond)
	advanceWithin(t, h, "three periods")
	assert.Len(t, r.take(), 1, "three instants in one Advance: one run")
	assert.True(t, one.Stop())
	mustCheck(t, h)
}

// TestPeriodic_ResetEveryFromItsCallbackChangesThePeriod: the new grid
// starts at the clock's reading in f.
func TestPeriodic_ResetEveryFromItsCallbackChangesThePeriod(t *testing.T) {
	h, clk := newFake(t)
	start := clk.Now()
	r := &runTimes{now: func() time.Duration { return clk.Now().Sub(start) }}
	var tm *Timer
	f := r.fn()
	tm = new(Timer).Init(h, func() {
		f()
		if tm.Deadline().Sub(start) == 20*time.Millisecond { // the first run
			assert.True(t, tm.ResetEvery(30*time.Millisecond), "armed while f runs")
		}
	})
	tm.ResetEvery(10 * time.Millisecond)
	for range 100 {
		clk.Add(time.Millisecond)
		advanceWithin(t, h, "a tick on")
	}
	assert.Equal(t, []time.Duration{10e6, 40e6, 70e6, 100e6}, r.take())
}

func TestPeriodic_BadInputPanics(t *testing.T) {
	h, _ := newFake(t)
	assert.PanicsWithValue(t, "timingwheel: Every called with period 0s; it must be positive", func() { h.Every(0, func() {}) })
	assert.PanicsWithValue(t, "timingwheel: Every called with period -1ns; it must be positive", func() { h.Every(-1, func() {}) })
	assert.PanicsWithValue(t, "timingwheel: Every called with a nil func", func() { h.Every(time.Second, nil) })
	tm := h.AfterFunc(time.Second, func() {})
	assert.PanicsWithValue(t, "timingwheel: ResetEvery called with period 0s; it must be positive", func() { tm.ResetEvery(0) })
	assert.Equal(t, 1, h.Len(), "a ResetEvery that panicked left the timer as it was")
	var zero Timer
	assert.Panics(t, func() { zero.ResetEvery(time.Second) }, "a Timer not bound to a hierarchy")
	var nilH *Hierarchy
	assert.Panics(t, func() { nilH.Every(time.Second, func() {}) })
}

// TestPeriodic_ResetEveryAllocatesNothing: a held periodic timer, re-armed,
// run and stopped, allocates nothing.
func TestPeriodic_ResetEveryAllocatesNothing(t *testing.T) {
	h, clk := newFake(t)
	var tm Timer
	runs := 0
	tm.Init(h, func() { runs++ })
	allocs := testing.AllocsPerRun(1000, func() {
		tm.ResetEvery(time.Millisecond)
		clk.Add(2 * time.Millisecond)
		h.Advance()
		tm.Stop()
	})
	assert.Zero(t, allocs)
	assert.Equal(t, 1001, runs)
}

// TestPeriodic_StatsCountEachRun: every run is a firing and the next run an
// arming, so started = fired + stopped + armed holds throughout.
func TestPeriodic_StatsCountEachRun(t *testing.T) {
	h, clk := newFake(t)
	tm := h.Every(time.Millisecond, func() {})
	for range 5 {
		clk.Add(time.Millisecond)
		advanceWithin(t, h, "one period")
	}
	st := h.Stats()
	assert.Equal(t, uint64(5), st.Fired)
	assert.Equal(t, st.Started, st.Fired+st.Stopped+uint64(st.Armed))
	tm.Stop()
	st = h.Stats()
	assert.Equal(t, st.Started, st.Fired+st.Stopped+uint64(st.Armed))
	assert.Equal(t, 0, st.Armed)
}

// TestPeriodic_DriverInSynctest: with the real driver in a bubble, runs
// land exactly on the grid rounded up to the tick.
func TestPeriodic_DriverInSynctest(t *testing.T) {
	inBubble(t, "a periodic timer with the driver", func(t *testing.T) {
		h := newStarted(t, WithTick(time.Millisecond))
		defer h.Stop()
		start := time.Now()
		r := &runTimes{now: func() time.Duration { return time.Since(start) }}
		tm := h.Every(10*time.Millisecond, r.fn())
		time.Sleep(35 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, []time.Duration{10e6, 20e6, 30e6}, r.take())
		assert.True(t, tm.Stop())
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Empty(t, r.take(), "no run after Stop")
	})
}

// TestPeriodic_RealDriverNeverEarly runs periodic timers with the real
// clock and driver (under -race in CI), stopped from other goroutines
// while they run: no run is early, and none starts after Stop returned
// true.
func TestPeriodic_RealDriverNeverEarly(t *testing.T) {
	h := newStarted(t)
	defer stopWithin(t, h, "the driver")
	const n, period = 8, 2 * time.Millisecond
	type rec struct {
		mu      sync.Mutex
		armedAt time.Time
		runs    int
		stopped atomic.Bool
		after   atomic.Int32 // runs started after Stop returned true
	}
	recs := make([]*rec, n)
	timers := make([]*Timer, n)
	for i := range recs {
		r := &rec{}
		recs[i] = r
		r.mu.Lock()
		r.armedAt = h.Now()
		timers[i] = h.Every(period, func() {
			if r.stopped.Load() {
				r.after.Add(1)
			}
			now := h.Now()
			r.mu.Lock()
			r.runs++
			if want := r.armedAt.Add(time.Duration(r.runs) * period); now.Before(want) {
				t.Errorf("timer %d run %d at %v, before its instant %v", i, r.runs, now.Sub(r.armedAt), want.Sub(r.armedAt))
			}
			r.mu.Unlock()
			time.Sleep(50 * time.Microsecond)
		})
		r.mu.Unlock()
	}
	time.Sleep(60 * time.Millisecond)
	var wg sync.WaitGroup
	for i, tm := range timers {
		wg.Go(func() {
			if tm.Stop() {
				recs[i].stopped.Store(true)
			}
		})
	}
	waitWithin(t, 5*time.Second, &wg, "the Stops")
	time.Sleep(20 * time.Millisecond)
	for i, r := range recs {
		// A run that had started before Stop may still be counted after it:
		// the flag is set after Stop returns. Runs starting later would
		// keep counting.
		assert.LessOrEqual(t, r.after.Load(), int32(1), "timer %d ran after Stop returned true", i)
		r.mu.Lock()
		assert.Greater(t, r.runs, 0, "timer %d never ran", i)
		r.mu.Unlock()
	}
	assert.Equal(t, 0, h.Len())
}

// TestPeriodic_LateAdvanceWithinTheTickSkipsNoRunNotDue: tick 1ms, Every(1ms) armed at 0.5ms, so the runs are due at ticks
// 2, 3, 4, 5ms (instants 1.5, 2.5, 3.5, 4.5ms). An Advance at 3.6ms (tick
// 3) runs the 2.5ms instant; the 3.5ms instant is not due until tick 4, so
// it is the next run, although it lies before the clock (not the next
// instant after the raw clock, 4.5ms).
func TestPeriodic_LateAdvanceWithinTheTickSkipsNoRunNotDue(t *testing.T) {
	h, clk := newFake(t)
	start := clk.Now()
	at := func(d time.Duration) time.Time { return start.Add(d) }
	clk.Add(500 * time.Microsecond)
	r := &runTimes{now: func() time.Duration { return clk.Now().Sub(start) }}
	tm := h.Every(time.Millisecond, r.fn())
	assert.Equal(t, at(1500*time.Microsecond), tm.Deadline())
	for _, step := range []struct {
		clock time.Duration
		runs  int
		next  time.Duration // Deadline after the Advance
	}{
		{2 * time.Millisecond, 1, 2500 * time.Microsecond},
		{3600 * time.Microsecond, 1, 3500 * time.Microsecond}, // 3.5ms is before the clock, but due at tick 4
		{4 * time.Millisecond, 1, 4500 * time.Microsecond},    // the code before ran nothing here
		{5 * time.Millisecond, 1, 5500 * time.Microsecond},
	} {
		clk.Set(at(step.clock))
		assert.Equal(t, step.runs, advanceWithin(t, h, "to "+step.clock.String()), "runs of the Advance at %v", step.clock)
		assert.Equal(t, at(step.next), tm.Deadline(), "next run after the Advance at %v", step.clock)
	}
	assert.Equal(t, []time.Duration{2e6, 3600e3, 4e6, 5e6}, r.take())
	mustCheck(t, h)
}

// TestPeriodic_EveryTickRunsOncePerTickWhenAdvanceIsLateWithinIt: Every(tick)
// armed off the tick, advanced each tick a little late (later within the
// tick than the instants): one run per tick, none lost. The code before
// ran every other tick.
func TestPeriodic_EveryTickRunsOncePerTickWhenAdvanceIsLateWithinIt(t *testing.T) {
	for _, c := range []struct{ offset, late time.Duration }{
		{200 * time.Microsecond, 500 * time.Microsecond},
		{1, 2},                      // an instant 1ns after the tick, the Advance 2ns after
		{0, 999 * time.Microsecond}, // on the tick, Advance at the end of it
		{999 * time.Microsecond, 999*time.Microsecond + 1},
	} {
		t.Run(fmt.Sprintf("offset=%v,late=%v", c.offset, c.late), func(t *testing.T) {
			h, clk := newFake(t)
			start := clk.Now()
			clk.Add(c.offset)
			runs := 0
			tm := h.Every(time.Millisecond, func() { runs++ })
			const ticks = 100
			for k := 1; k <= ticks; k++ {
				clk.Set(start.Add(time.Duration(k)*time.Millisecond + c.late))
				due := 1
				if k == 1 && c.offset > 0 {
					due = 0 // the first instant, 1ms+offset, is due at tick 2
				}
				require.Equal(t, due, advanceWithin(t, h, "a late Advance"), "runs at tick %d", k)
			}
			wantRuns := ticks
			if c.offset > 0 {
				wantRuns--
			}
			assert.Equal(t, wantRuns, runs)
			next := time.Duration(wantRuns+1)*time.Millisecond + c.offset
			assert.Equal(t, start.Add(next), tm.Deadline(), "the next run is the first instant not yet due")
		})
	}
}

// TestPeriodic_DriverHeldUpWithinTheTickLosesNoRun runs the driver (in a
// synctest bubble) with a slow callback that holds it past a tick
// boundary, so that the driver's next Advance comes a little late within
// its tick, as a real driver's wake-up does. A periodic timer whose
// instants lie in that gap still runs once per tick: the code before ran
// it on about half of them.
func TestPeriodic_DriverHeldUpWithinTheTickLosesNoRun(t *testing.T) {
	inBubble(t, "a periodic timer beside a slow callback", func(t *testing.T) {
		h := newStarted(t, WithTick(time.Millisecond))
		defer h.Stop()
		start := time.Now()
		// Every 2ms, a callback that takes 1.3ms: the Advance after it
		// starts 0.3ms into the next tick.
		slow := h.Every(2*time.Millisecond, func() { time.Sleep(1300 * time.Microsecond) })
		time.Sleep(200 * time.Microsecond)
		var mu sync.Mutex
		var at []time.Duration
		tm := h.Every(time.Millisecond, func() {
			mu.Lock()
			at = append(at, time.Since(start))
			mu.Unlock()
		})
		// At 101.5ms the driver sleeps: the slow callback of tick 100 ended
		// at 101.3ms, and the Advance then ran the instant due at tick 101.
		time.Sleep(101300 * time.Microsecond)
		assert.True(t, tm.Stop())
		assert.True(t, slow.Stop())
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		// The instants are at k ms + 0.2ms, k >= 1, due at tick k+1: those
		// due by 101ms are k = 1..100.
		require.Len(t, at, 100, "one run per tick: %v", at)
		for i, got := range at {
			instant := time.Duration(i+1)*time.Millisecond + 200*time.Microsecond
			assert.GreaterOrEqual(t, got, instant, "run %d early", i+1)
			// Late by at most the rounding up to the tick, the slow callback
			// run before it in the same Advance, and the late start of that
			// Advance.
			assert.LessOrEqual(t, got, instant+800*time.Microsecond+1300*time.Microsecond+300*time.Microsecond, "run %d too late", i+1)
		}
	})
}
