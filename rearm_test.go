package timingwheel

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Concurrent re-arms of one timer take effect one after another, each at an
// instant during its call, with d measured from the clock read at that
// instant.

// holdFirstReset makes the first re-arm that starts block before it takes
// its shard's lock, until release is called; reached is closed once it
// blocks.
func holdFirstReset(t *testing.T) (reached <-chan struct{}, release func()) {
	r, rel := make(chan struct{}), make(chan struct{})
	var once sync.Once
	testHookReset = func(*Timer) {
		testHookReset = nil
		close(r)
		<-rel
	}
	t.Cleanup(func() { once.Do(func() { close(rel) }); testHookReset = nil })
	return r, func() { once.Do(func() { close(rel) }) }
}

// TestReArm_LaterReArmMeasuresFromALaterReading: Reset A starts at 10ms
// and is held before it takes effect; Reset B, at 60ms, takes effect
// first. A then takes effect after B, so it must measure from a reading no
// earlier than B's: the deadline is 160ms or later, never A-at-10ms's
// 110ms.
func TestReArm_LaterReArmMeasuresFromALaterReading(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	start := clk.Now()
	fired := 0
	tm := h.AfterFunc(time.Hour, func() { fired++ })
	clk.Add(10 * time.Millisecond)
	reached, release := holdFirstReset(t)
	aDone := make(chan bool, 1)
	go func() { aDone <- tm.Reset(100 * time.Millisecond) }()
	recvWithin(t, 5*time.Second, reached, "Reset A reaching its hook")
	clk.Set(start.Add(60 * time.Millisecond))
	assert.True(t, tm.Reset(100*time.Millisecond), "B")
	require.Equal(t, start.Add(160*time.Millisecond), tm.Deadline())
	release()
	assert.True(t, recvWithin(t, 5*time.Second, aDone, "Reset A, released"))
	assert.False(t, tm.Deadline().Before(start.Add(160*time.Millisecond)),
		"the re-arm that took effect last measured from a reading before the one before it: deadline %v", tm.Deadline().Sub(start))
	clk.Set(start.Add(159 * time.Millisecond))
	advanceWithin(t, h, "before B's deadline")
	assert.Zero(t, fired, "fired before the deadline of the last re-arm")
	mustCheck(t, h)
}

// TestReArm_TimeoutsAddLatestActivityWins: the same for Timeouts.Add, whose
// re-arms all mean "active now": Add A starts at 10ms and is held before it
// takes the key's lock; Add B, at 60ms, takes effect first. A, taking
// effect last, must not set an earlier deadline than B's.
func TestReArm_TimeoutsAddLatestActivityWins(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	start := clk.Now()
	var expired []int
	s := NewTimeouts(h, func(k int) { expired = append(expired, k) })
	s.Add(1, time.Hour)
	clk.Add(10 * time.Millisecond)
	reached, rel := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(rel) }) }
	testHookAdd = func() {
		testHookAdd = nil
		close(reached)
		<-rel
	}
	t.Cleanup(func() { release(); testHookAdd = nil })
	aDone := make(chan struct{})
	go func() { s.Add(1, 100*time.Millisecond); close(aDone) }()
	recvWithin(t, 5*time.Second, reached, "Add A reaching its hook")
	clk.Set(start.Add(60 * time.Millisecond))
	s.Add(1, 100*time.Millisecond) // B
	release()
	recvWithin(t, 5*time.Second, aDone, "Add A, released")
	d, ok := s.Deadline(1)
	require.True(t, ok)
	assert.False(t, d.Before(start.Add(160*time.Millisecond)), "the Add that took effect last measured from an earlier reading: deadline %v", d.Sub(start))
	clk.Set(start.Add(159 * time.Millisecond))
	advanceWithin(t, h, "before B's deadline")
	assert.Empty(t, expired, "expired before the deadline of the last Add")
}

// TestReArm_DeadlineIsTheLastReArmThatTookEffect (item 7): a re-arm's
// deadline is published only once it takes effect, and each re-arm writes
// it once. Writer W sets unique odd deadlines, each later than the last
// (the path that once took no lock), while timers are stopped and
// cascaded beside it; observer O sets unique even ones and reads Deadline.
// Once O has seen one of W's deadlines and then one of its own, that W
// deadline must never be seen again: W wrote it once.
func TestReArm_DeadlineIsTheLastReArmThatTookEffect(t *testing.T) {
	h, clk := newFake(t, WithShards(1), WithLevels(10, 10, 10))
	start := clk.Now()
	tm := h.AfterFunc(time.Hour, func() {})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // W
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tm.ResetAt(start.Add(time.Duration(2*(int64(time.Second)+i*1000) + 1)))
		}
	})
	wg.Go(func() { // cascades, firings and Stops beside them
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%5 == 0 {
				tm.Stop()
			}
			clk.Add(time.Duration(i%3) * time.Millisecond)
			h.Advance()
		}
	})
	var seenW, gone = int64(-1), map[int64]bool{}
	for i := int64(0); i < 20000; i++ {
		tm.ResetAt(start.Add(time.Duration(2 * (int64(time.Second) + i*1000))))
		for range 2 {
			v := int64(tm.Deadline().Sub(start))
			switch {
			case v%2 != 0:
				if gone[v] {
					t.Fatalf("Deadline came back to W's %v after O's own later re-arm was seen", time.Duration(v))
				}
				seenW = v
			case seenW >= 0:
				gone[seenW] = true
				seenW = -1
			}
		}
	}
	close(stop)
	waitWithin(t, 10*time.Second, &wg, "the re-arming goroutines")
	mustCheck(t, h)
}

// TestReArm_FiredTimerKeepsNoReference (item 4): once a timer has fired
// and been stopped, nothing the hierarchy holds refers to what its
// callback refers to.
func TestReArm_FiredTimerKeepsNoReference(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	type state struct{ buf [1 << 10]byte }
	w := func() weak.Pointer[state] {
		st := &state{}
		tm := h.AfterFunc(time.Millisecond, func() { st.buf[0]++ })
		clk.Add(time.Millisecond)
		require.Equal(t, 1, advanceWithin(t, h, "the deadline"))
		tm.Stop()
		return weak.Make(st)
	}()
	runtime.GC()
	runtime.GC()
	assert.Nil(t, w.Value(), "the hierarchy still refers to a fired timer's callback state")
	runtime.KeepAlive(h)
}

// gatedClock is a fakeClock whose next reading, once gate is called, waits
// until the returned release is called.
type gatedClock struct {
	*fakeClock
	mu      sync.Mutex
	held    chan struct{} // closed when a reading is held
	release chan struct{}
}

func (c *gatedClock) Since(t time.Time) time.Duration {
	c.mu.Lock()
	held, release := c.held, c.release
	c.held, c.release = nil, nil
	c.mu.Unlock()
	if held != nil {
		close(held)
		<-release
	}
	return c.fakeClock.Since(t)
}

func (c *gatedClock) gate() (held <-chan struct{}, release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, r := make(chan struct{}), make(chan struct{})
	c.held, c.release = h, r
	var once sync.Once
	return h, func() { once.Do(func() { close(r) }) }
}

// TestReArm_DeadlineWaitsForAReArmInProgress: a Reset reads the clock and
// stores its deadline under the shard's lock, and Deadline reads under it
// too, so no Deadline returns the old deadline once the Reset has read the
// clock (its reading lies before the Deadline call: a history with the
// Reset first would show the old value after it).
func TestReArm_DeadlineWaitsForAReArmInProgress(t *testing.T) {
	clk := &gatedClock{fakeClock: newFakeClock()}
	h, err := New(WithClock(clk), WithShards(1))
	require.NoError(t, err)
	start := clk.Now()
	tm := h.AfterFunc(time.Hour, func() {})
	held, release := clk.gate()
	t.Cleanup(release)
	resetDone := make(chan bool, 1)
	go func() { resetDone <- tm.Reset(time.Minute) }()
	recvWithin(t, 5*time.Second, held, "the Reset's clock reading")
	got := make(chan time.Time, 1)
	go func() { got <- tm.Deadline() }()
	select {
	case d := <-got:
		t.Fatalf("Deadline returned %v while a Reset that had read the clock was in progress", d.Sub(start))
	case <-time.After(100 * time.Millisecond):
	}
	release()
	assert.True(t, recvWithin(t, 5*time.Second, resetDone, "the Reset"))
	assert.Equal(t, start.Add(time.Minute), recvWithin(t, 5*time.Second, got, "Deadline, after the Reset"))
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

// TestReset_LaterDeadlineStraddlingCascadeIntoLevel0: a Reset that begins
// before a cascade takes its timer down to level 0 (filed by its old
// deadline), and takes its shard's lock after, must file the timer again
// by its new deadline, or Next reports the old deadline. Here the Reset
// takes the lock after the whole cascade; in
// TestLazyReset_CascadeBeforeStore, between two of its batches.
func TestReset_LaterDeadlineStraddlingCascadeIntoLevel0(t *testing.T) {
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

// TestReset_LaterDeadlineAsAdvanceEnds races a Reset with the end of an
// Advance. A callback arms, in the last shard (whose now lags far
// behind: it had no work), a timer for a tick already fired: it waits on
// the late list, filed beyond that shard's now but not beyond the Advance's
// frontier. Another goroutine moves it later (still before the Advance's
// tick) as soon as it sees the frontier cleared: by then the shard's now
// must have caught up, so the Reset files the timer by its new deadline;
// the next Advance fires it. A frontier cleared before the shards' now
// moved would let the Reset only store the later deadline, keeping the old
// filing, and the timer would miss the next Advance.
func TestReset_LaterDeadlineAsAdvanceEnds(t *testing.T) {
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

// TestReset_LaterDeadlineReadsFrontierBeforeNow: a Reset, under its shard's
// lock, reads its shard's now and the running Advance's frontier;
// endAdvance moves every shard's now, each under its lock, then clears the
// frontier. So a Reset that finds the frontier cleared finds its shard's
// now moved. Here the Advance ends while the Reset has begun and not yet
// taken the lock (testHookReset). The timer was
// armed by a callback, into a shard whose now lagged (it had no work), for
// a tick already fired: it waits on the late list, filed beyond that
// shard's now but not beyond the frontier. The Reset moves it later, still
// before the Advance's tick: it must take the lock and file it by its new
// deadline, so that Next reports that deadline and the next Advance fires
// it. A Reset that saw the old now and the cleared frontier would keep the
// old filing: Next would be early and the timer would miss the next
// Advance.
func TestReset_LaterDeadlineReadsFrontierBeforeNow(t *testing.T) {
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
