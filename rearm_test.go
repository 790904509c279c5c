package timingwheel

import (
	"fmt"
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

// gatedClock is a fakeClock whose next reading, once gate is called,
// waits until the returned release is called: before it reads the time
// (gate), or after (gateAfterRead, which returns the time read before the
// wait). A re-arm reads the clock once, between loading the deadline it
// replaces and swapping its own in, so the gate holds a re-arm there.
type gatedClock struct {
	*fakeClock
	mu        sync.Mutex
	held      chan struct{} // closed when a reading is held
	release   chan struct{}
	afterRead bool
	skip      int // readings to let pass before the one held
}

func newGated(t *testing.T, opts ...Option) (*Hierarchy, *gatedClock) {
	clk := &gatedClock{fakeClock: newFakeClock()}
	h := mustNew(t, append([]Option{WithClock(clk)}, opts...)...)
	return h, clk
}

func (c *gatedClock) Since(t time.Time) time.Duration {
	c.mu.Lock()
	held, release, after := c.held, c.release, c.afterRead
	if c.skip > 0 {
		c.skip--
		held = nil
	} else {
		c.held, c.release = nil, nil
	}
	c.mu.Unlock()
	if held == nil {
		return c.fakeClock.Since(t)
	}
	var d time.Duration
	if after {
		d = c.fakeClock.Since(t)
	}
	close(held)
	<-release
	if !after {
		d = c.fakeClock.Since(t)
	}
	return d
}

func (c *gatedClock) gate() (held <-chan struct{}, release func()) { return c.arm(false) }

func (c *gatedClock) gateAfterRead() (held <-chan struct{}, release func()) { return c.arm(true) }

// gateNthAfterRead is gateAfterRead for the reading after the next n.
func (c *gatedClock) gateNthAfterRead(n int) (held <-chan struct{}, release func()) {
	held, release = c.arm(true)
	c.mu.Lock()
	c.skip = n
	c.mu.Unlock()
	return held, release
}

func (c *gatedClock) arm(after bool) (held <-chan struct{}, release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, r := make(chan struct{}), make(chan struct{})
	c.held, c.release, c.afterRead, c.skip = h, r, after, 0
	var once sync.Once
	return h, func() { once.Do(func() { close(r) }) }
}

// TestReArm_LaterReArmMeasuresFromALaterReading: Reset A reads the clock at
// 10ms and is held before it takes effect; Reset B, at 60ms, takes effect
// first. A then takes effect after B, so it must measure from a reading no
// earlier than B's: the deadline is 160ms or later, never A-at-10ms's
// 110ms. A moves the timer later (the path without the shard's lock, whose
// swap then fails and takes the lock) or earlier (the path with it).
func TestReArm_LaterReArmMeasuresFromALaterReading(t *testing.T) {
	for _, first := range []time.Duration{50 * time.Millisecond, time.Hour} {
		t.Run(fmt.Sprintf("armed for %v", first), func(t *testing.T) {
			h, clk := newGated(t, WithShards(1))
			start := clk.Now()
			fired := 0
			tm := h.AfterFunc(first, func() { fired++ })
			clk.Add(10 * time.Millisecond)
			held, release := clk.gateAfterRead()
			t.Cleanup(release)
			aDone := make(chan bool, 1)
			go func() { aDone <- tm.Reset(100 * time.Millisecond) }()
			recvWithin(t, 5*time.Second, held, "Reset A's clock reading")
			clk.Set(start.Add(60 * time.Millisecond))
			assert.True(t, tm.Reset(100*time.Millisecond), "B")
			require.Equal(t, start.Add(160*time.Millisecond), tm.Deadline())
			release()
			assert.True(t, recvWithin(t, 5*time.Second, aDone, "Reset A, released"))
			assert.False(t, tm.Deadline().Before(start.Add(160*time.Millisecond)),
				"the re-arm that took effect last measured from a reading before the one before it: deadline %v", tm.Deadline().Sub(start))
			advanceTo(t, h, clk, start.Add(159*time.Millisecond), "before B's deadline")
			assert.Zero(t, fired, "fired before the deadline of the last re-arm")
			mustCheck(t, h)
		})
	}
}

// TestReArm_TimeoutsAddLatestActivityWins: the same for Timeouts.Add, whose
// re-arms all mean "active now": Add A reads the clock at 10ms, under its
// key's lock, and is held there; Add B, at 60ms, waits for that lock, so
// it takes effect after A and measures from a later reading: the key's
// deadline is B's, 160ms.
func TestReArm_TimeoutsAddLatestActivityWins(t *testing.T) {
	h, clk := newGated(t, WithShards(1))
	start := clk.Now()
	var expired []int
	s := NewTimeouts(h, func(k int) { expired = append(expired, k) })
	s.Add(1, 50*time.Millisecond)
	clk.Add(10 * time.Millisecond)
	held, release := clk.gateAfterRead()
	t.Cleanup(release)
	aDone, bDone := make(chan struct{}), make(chan struct{})
	go func() { s.Add(1, 100*time.Millisecond); close(aDone) }()
	recvWithin(t, 5*time.Second, held, "Add A's clock reading")
	clk.Set(start.Add(60 * time.Millisecond))
	go func() { s.Add(1, 100*time.Millisecond); close(bDone) }() // B
	select {
	case <-bDone:
		t.Fatal("Add B took effect while Add A of the same key, having read the clock, had not")
	case <-time.After(50 * time.Millisecond):
	}
	release()
	recvWithin(t, 5*time.Second, aDone, "Add A, released")
	recvWithin(t, 5*time.Second, bDone, "Add B, after A")
	d, ok := s.Deadline(1)
	require.True(t, ok)
	assert.Equal(t, start.Add(160*time.Millisecond), d, "the Add that took effect last measured from an earlier reading")
	advanceTo(t, h, clk, start.Add(159*time.Millisecond), "before B's deadline")
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
	goUntilClosed(&wg, stop, func(i int) { // W
		tm.ResetAt(start.Add(time.Duration(2*(int64(time.Second)+int64(i)*1000) + 1)))
	})
	goUntilClosed(&wg, stop, func(i int) { // cascades, firings and Stops beside them
		if i%5 == 0 {
			tm.Stop()
		}
		clk.Add(time.Duration(i%3) * time.Millisecond)
		h.Advance()
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

// TestReArm_DeadlineIsTheOldOneUntilTheReArmTakesEffect: a re-arm takes
// effect when it swaps its deadline in, not when it reads the clock.
// While a Reset moving a timer later is held between the two, Deadline
// returns the old deadline, at once (it takes no lock: neither does the
// Reset); once the Reset returns, the new one.
func TestReArm_DeadlineIsTheOldOneUntilTheReArmTakesEffect(t *testing.T) {
	h, clk := newGated(t, WithShards(1))
	start := clk.Now()
	tm := h.AfterFunc(time.Minute, func() {})
	held, release := clk.gateAfterRead()
	t.Cleanup(release)
	resetDone := make(chan bool, 1)
	go func() { resetDone <- tm.Reset(time.Hour) }()
	recvWithin(t, 5*time.Second, held, "the Reset's clock reading")
	got := make(chan time.Time, 1)
	go func() { got <- tm.Deadline() }()
	assert.Equal(t, start.Add(time.Minute), recvWithin(t, 5*time.Second, got, "Deadline, while the Reset is held"))
	release()
	assert.True(t, recvWithin(t, 5*time.Second, resetDone, "the Reset"))
	assert.Equal(t, start.Add(time.Hour), tm.Deadline(), "Deadline, after the Reset")
	mustCheck(t, h)
}

// TestReset_LaterDeadlineStraddlingCascadeIntoLevel0: a Reset that begins
// before a cascade takes its timer down to level 0 (filed by its old
// deadline), and swaps its deadline in after, leaves the timer filed
// there; Next must still report the new deadline, and the timer fire by
// it. Here the Reset is held at its clock reading for the whole cascade;
// in TestLazyReset_CascadeBeforeStore, between two of its batches.
func TestReset_LaterDeadlineStraddlingCascadeIntoLevel0(t *testing.T) {
	h, clk := newGated(t, WithShards(1))
	origin := h.origin
	fired := 0
	tm := h.AfterFunc(2*time.Minute+500*time.Millisecond, func() { fired++ })
	require.True(t, tm.home().inWheel(tm.filed))
	require.Greater(t, tm.filed-tm.home().now.Load(), level0Span(h), "the timer is beyond level 0")
	held, release := clk.gate()
	t.Cleanup(release)
	resetDone := make(chan bool, 1)
	go func() { resetDone <- tm.Reset(time.Minute) }() // read at 2m: due at 3m
	recvWithin(t, 5*time.Second, held, "the Reset's clock reading")
	clk.Set(origin.Add(2 * time.Minute))
	assert.Zero(t, advanceWithin(t, h, "the cascade")) // the timer lands at level 0, filed by its old deadline
	assert.Less(t, tm.filed-tm.home().now.Load(), level0Span(h), "the Advance cascaded the timer to level 0")
	release()
	assert.True(t, recvWithin(t, 5*time.Second, resetDone, "the Reset"), "the Reset found the timer armed")
	nextReaches(t, h, clk, origin.Add(3*time.Minute), 1, "Next: the new deadline, after at most an answer at the old one the cascade filed the timer by")
	mustCheck(t, h)
	advanceTo(t, h, clk, origin.Add(2*time.Minute+59*time.Second), "past the old deadline")
	assert.Zero(t, fired, "fired by the old deadline")
	advanceTo(t, h, clk, origin.Add(3*time.Minute), "the new deadline")
	assert.Equal(t, 1, fired, "fires at the new deadline")
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
		_, toLast := armInFirstShard(h)
		armed := make(chan *Timer, 1)
		var yFired atomic.Int32
		h.AfterFunc(2*time.Second, func() {
			toLast()
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
		advanceTo(t, h, clk, origin.Add(3*time.Second), "the next Advance")
		if n := yFired.Load(); n != 1 {
			t.Fatalf("iteration %d: a timer moved, as its Advance ended, to a tick before that Advance's had fired %d times after the next Advance, want once", iter, n)
		}
		mustCheck(t, h)
	}
}

// TestReset_LaterDeadlineReadsFrontierBeforeNow: a later-move that takes
// no lock tells a timer in a wheel slot from one on the late list by the
// running Advance's frontier and its shard's now (see shard.inWheel):
// endAdvance moves every shard's now, each under its lock, then clears the
// frontier, so a re-arm that finds the frontier cleared finds its shard's
// now moved. Here the Reset reads the clock while the Advance runs and is
// held there until the Advance has ended. The timer was armed by a
// callback, into a shard whose now lagged (it had no work), for a tick
// already fired: it waits on the late list, filed beyond that shard's now
// but not beyond the frontier. The Reset moves it later, still before the
// Advance's tick: it must take the lock and file it by its new deadline,
// so that Next reports that deadline and the next Advance fires it. A
// Reset that saw the old now and the cleared frontier would only swap its
// deadline in, keeping the old filing on the late list: Next would be
// early and the timer would miss the next Advance.
func TestReset_LaterDeadlineReadsFrontierBeforeNow(t *testing.T) {
	h, clk := newGated(t, WithShards(2))
	origin := h.origin
	last, toLast := armInFirstShard(h)

	// The callback waits for the Reset at most 2s, then carries on and
	// leaves a flag for the test to report.
	armed := make(chan *Timer, 1)
	var yFired atomic.Int32
	var noRead atomic.Bool
	var release func()
	h.AfterFunc(2*time.Second, func() {
		toLast()
		y := h.AtFunc(origin.Add(2*time.Second), func() { yFired.Add(1) })
		var held <-chan struct{}
		held, release = clk.gate() // the Reset's reading: held until the Advance has ended
		armed <- y
		select { // the Reset has begun while this Advance runs
		case <-held:
		case <-time.After(2 * time.Second):
			noRead.Store(true)
		}
	})
	defer func() {
		if release != nil {
			release() // should the test fail first, the Reset goes on
		}
	}()
	resetDone := make(chan bool, 1)
	var y *Timer
	go func() {
		y = <-armed
		resetDone <- y.Reset(-400 * time.Millisecond) // read at 2.9s: due at 2.5s
	}()

	clk.Set(origin.Add(2900 * time.Millisecond))
	n := advanceWithin(t, h, "the Advance whose callback arms the timer")
	require.False(t, noRead.Load(), "hung: the Reset never read the clock while the Advance ran")
	require.Equal(t, 1, n, "the Advance ran the callback that arms the timer, and only that")
	release()
	reset := recvWithin(t, 5*time.Second, resetDone, "the Reset's return after the Advance ended")
	assert.True(t, reset, "the Reset found the timer armed")
	assert.Same(t, last, y.home(), "the timer is in the shard that had no work")
	assert.Equal(t, 1, h.Len())
	next, ok := h.Next()
	require.True(t, ok)
	assert.Equal(t, origin.Add(2500*time.Millisecond), next, "Next is the timer's new (past) deadline, not the tick it was filed at before the Reset")
	mustCheck(t, h)
	advanceTo(t, h, clk, origin.Add(3*time.Second), "the next Advance")
	assert.Equal(t, int32(1), yFired.Load(), "a timer moved to a past deadline fires once, on the next Advance")
	assert.Equal(t, 0, h.Len())
	mustCheck(t, h)
}

// TestReArm_LaterMoveRacingResetEveryOfTheSameDeadline: a later-move loads
// the timer's deadline word and binding, reads the clock and is held
// there; meanwhile ResetEvery(p), under the lock, makes the timer periodic
// with the very deadline it had (armed with AfterFunc(p) at the same
// instant). The deadline is the same, but the word's generation is not:
// the later-move's compare-and-swap fails, and it re-arms under the lock,
// making the timer one-shot again, as a Reset that takes effect after a
// ResetEvery does.
func TestReArm_LaterMoveRacingResetEveryOfTheSameDeadline(t *testing.T) {
	h, clk := newGated(t, WithShards(1))
	start := clk.Now()
	fired := 0
	tm := h.AfterFunc(time.Second, func() { fired++ })
	held, release := clk.gateAfterRead()
	t.Cleanup(release)
	resetDone := make(chan bool, 1)
	go func() { resetDone <- tm.Reset(2 * time.Second) }()
	recvWithin(t, 5*time.Second, held, "the Reset's clock reading")
	assert.True(t, tm.ResetEvery(time.Second), "ResetEvery found the timer armed")
	require.Equal(t, start.Add(time.Second), tm.Deadline(), "ResetEvery stored the deadline the timer had")
	release()
	assert.True(t, recvWithin(t, 5*time.Second, resetDone, "the Reset"), "the Reset found the timer armed")
	require.Equal(t, start.Add(2*time.Second), tm.Deadline())
	advanceTo(t, h, clk, start.Add(time.Second), "ResetEvery's first instant")
	assert.Zero(t, fired, "the timer ran at ResetEvery's instant: the Reset that took effect after it did not make it one-shot")
	advanceTo(t, h, clk, start.Add(2*time.Second), "the Reset's deadline")
	assert.Equal(t, 1, fired, "fires at the Reset's deadline")
	advanceTo(t, h, clk, start.Add(5*time.Second), "later")
	assert.Equal(t, 1, fired, "a one-shot timer fires once")
	assert.Zero(t, h.Len())
	mustCheck(t, h)
}

// TestReArm_LockedReArmAfterALaterMoveMeasuresFromALaterReading: a re-arm
// under the lock (here an earlier deadline) reads the clock at 10ms, under
// the lock, and is held there; a later-move, at 60ms, takes no lock and
// takes effect first. The locked re-arm then takes effect after it, so it
// must measure from a reading no earlier than the later-move's: it finds
// the deadline changed since it read the clock, and reads it again.
func TestReArm_LockedReArmAfterALaterMoveMeasuresFromALaterReading(t *testing.T) {
	h, clk := newGated(t, WithShards(1))
	start := clk.Now()
	tm := h.AfterFunc(time.Hour, func() {})
	clk.Add(10 * time.Millisecond)
	held, release := clk.gateNthAfterRead(1) // the first reading tries the later-move; the second is under the lock
	t.Cleanup(release)
	aDone := make(chan bool, 1)
	go func() { aDone <- tm.Reset(100 * time.Millisecond) }()
	recvWithin(t, 5*time.Second, held, "Reset A's reading under the lock")
	clk.Set(start.Add(60 * time.Millisecond))
	bDone := make(chan bool, 1)
	go func() { bDone <- tm.Reset(time.Hour + time.Minute) }() // a later-move (within its range, see when.go): no lock
	assert.True(t, recvWithin(t, 5*time.Second, bDone, "Reset B, a later-move while A holds the lock"))
	release()
	assert.True(t, recvWithin(t, 5*time.Second, aDone, "Reset A, released"))
	assert.Equal(t, start.Add(160*time.Millisecond), tm.Deadline(),
		"the re-arm that took effect last measured from a reading before the one before it")
	mustCheck(t, h)
}

// TestReset_LaterDeadlineFromACallbackOfALateTimer: a callback arms a timer,
// in a shard whose now lags (it had no work), for a tick this Advance
// already fired: it waits on the late list, filed after that shard's now
// but not after the Advance's frontier. The callback then moves it later,
// still before this Advance's tick. That must take the lock and file it
// by its new deadline, so that it fires in this Advance or the next, once;
// a later-move that judged the timer by its shard's now alone would leave
// it on the late list by its old tick, and the next Advance would find it
// due after its filing, too late to fire it.
func TestReset_LaterDeadlineFromACallbackOfALateTimer(t *testing.T) {
	h, clk := newFake(t, WithShards(2))
	origin := h.origin
	_, toLast := armInFirstShard(h)
	var yFired int
	var reset bool
	h.AfterFunc(2*time.Second, func() {
		toLast()
		y := h.AtFunc(origin.Add(2*time.Second), func() { yFired++ })
		reset = y.ResetAt(origin.Add(2500 * time.Millisecond))
	})
	advanceTo(t, h, clk, origin.Add(2900*time.Millisecond), "the Advance whose callback arms and moves the timer")
	assert.True(t, reset, "the move found the timer armed")
	advanceTo(t, h, clk, origin.Add(3*time.Second), "the next Advance")
	assert.Equal(t, 1, yFired, "a timer moved by a callback to a tick this Advance reaches fires in it or the next, once")
	mustCheck(t, h)
}

// TestLaterMove_RacingTheFiringIsExactlyOnce: timers due now are moved
// later without the lock by one goroutine while another fires them. A
// move that returned true cancelled the firing of that arming: the
// callback must not run; one that returned false came after the firing:
// the callback ran, once. Both are decided by the compare-and-swap of the
// timer's deadline against the firing's own (claimLocked).
func TestLaterMove_RacingTheFiringIsExactlyOnce(t *testing.T) {
	const n = 4096
	stopAt := time.Now().Add(volume(500*time.Millisecond, 10*time.Second))
	for round := 0; time.Now().Before(stopAt); round++ {
		h, clk := newFake(t, WithShards(2))
		timers := make([]Timer, n)
		fired := make([]int, n)
		for i := range timers {
			timers[i].Init(h, func() { fired[i]++ })
			timers[i].Reset(time.Millisecond)
		}
		clk.Add(time.Millisecond)
		moved := make([]bool, n)
		start := make(chan struct{})
		done, settle := goWatched(t, func() {
			<-start
			for i := range timers {
				moved[i] = timers[i].Reset(time.Hour)
			}
		})
		close(start)
		advanceWithin(t, h, "the firing racing the later-moves")
		recvWithin(t, 10*time.Second, done, "the later-moves")
		settle()
		for i := range timers {
			if want := map[bool]int{true: 0, false: 1}[moved[i]]; fired[i] != want {
				t.Fatalf("round %d, timer %d: Reset returned %v and the callback ran %d times, want %d", round, i, moved[i], fired[i], want)
			}
		}
		mustCheck(t, h)
	}
}

// armInFirstShard makes h arm its next new timer in its first shard, and
// toLast the one after it in its last shard: a callback that calls it arms
// a timer in a shard whose now lags behind (it had no work).
func armInFirstShard(h *Hierarchy) (last *shard, toLast func()) {
	dealNext(h, 0)
	last = h.shards[len(h.shards)-1]
	return last, func() { dealNext(h, len(h.shards)-1) }
}

// TestReArm_LaterMoveInsideResetEverysWindowLeavesItOneShot: a later-move
// (ResetAt to +5s) races ResetEvery(2s) on an armed one-shot timer, from two
// goroutines released together, many times. Whichever takes effect last
// decides: periodic from ResetEvery's reading, or one-shot at +5s. A
// later-move that finds ResetEvery's deadline but not yet its binding must
// not leave the timer periodic at +5s, a state no order of the two gives.
func TestReArm_LaterMoveInsideResetEverysWindowLeavesItOneShot(t *testing.T) {
	h, _ := newMock(t, WithShards(1))
	origin := h.Origin()
	var tm Timer
	tm.Init(h, func() {})
	rounds := 20_000
	if raceEnabled {
		rounds = 5_000
	}
	for i := range rounds {
		tm.ResetAt(origin.Add(time.Second)) // armed one-shot, in a slot
		var ready atomic.Int32
		var wg sync.WaitGroup
		start := func() {
			ready.Add(1)
			for ready.Load() < 2 {
			}
		}
		wg.Go(func() {
			start()
			tm.ResetEvery(2 * time.Second)
		})
		wg.Go(func() {
			start()
			for range 3 {
				tm.ResetAt(origin.Add(5 * time.Second))
			}
		})
		waitWithin(t, 10*time.Second, &wg, "the racing ResetEvery and ResetAt")
		if tm.Deadline().Equal(origin.Add(5*time.Second)) && tm.b.Load().period != 0 {
			t.Fatalf("round %d: the ResetAt(+5s) took effect last, yet the timer runs every %v", i, time.Duration(tm.b.Load().period))
		}
		tm.Stop()
	}
	mustCheck(t, h)
}
