package timingwheel

import (
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A later-move (Reset or ResetAt of an armed one-shot timer to a later
// deadline, without the lock) loads the timer's deadline word, reads the
// clock and swaps its deadline in. It takes effect only on the arming it
// loaded: a Stop or any re-arm between its load and its swap makes the
// swap fail, even when the timer ends up armed again for the very deadline
// and binding it loaded (issue 47). Each test below holds a Reset's
// later-move just after its clock reading, at 0, re-arms the timer from
// the test goroutine at 50ms for the deadline it had, and releases the
// Reset: it returns true (armed), and since it takes effect after the
// re-arm, it measures its 200ms from a reading no earlier than 50ms.

// heldLaterMove starts tm.Reset(200ms) on a goroutine, holds it just after
// its clock reading (at the clock's time now), runs between, and then
// releases it; it returns what the Reset returned.
func heldLaterMove(t *testing.T, clk *gatedClock, tm *Timer, between func()) bool {
	t.Helper()
	held, release := clk.gateAfterRead()
	t.Cleanup(release)
	done := make(chan bool, 1)
	go func() { done <- tm.Reset(200 * time.Millisecond) }()
	recvWithin(t, 5*time.Second, held, "the later-move's clock reading")
	between()
	release()
	return recvWithin(t, 5*time.Second, done, "the later-move, released")
}

// assertTookEffectLast checks that tm's deadline is that of a Reset(200ms)
// that read the clock at or after 50ms (the re-arm before it), that tm
// does not fire at the re-arm's deadline of 100ms, and fires once after.
func assertTookEffectLast(t *testing.T, h *Hierarchy, clk *gatedClock, tm *Timer, fired *int) {
	t.Helper()
	origin := h.origin
	assert.False(t, tm.Deadline().Before(origin.Add(250*time.Millisecond)),
		"the later-move landed on the arming made after its reading: deadline %v, want 250ms or later", tm.Deadline().Sub(origin))
	advanceTo(t, h, clk, origin.Add(249*time.Millisecond), "before the later-move's deadline")
	assert.Zero(t, *fired, "fired before the deadline of the re-arm that took effect last")
	advanceTo(t, h, clk, tm.Deadline(), "the later-move's deadline")
	assert.Equal(t, 1, *fired, "fires once, at the deadline of the re-arm that took effect last")
	mustCheck(t, h)
}

// TestLaterMove_FailsAfterStopAndResetForTheSameDeadline: armed for 100ms;
// at 50ms Stop returns true and Reset(50ms) returns false, armed again for
// 100ms. The held Reset(200ms), read at 0, must not land on that arming:
// no order of the three leaves 200ms.
func TestLaterMove_FailsAfterStopAndResetForTheSameDeadline(t *testing.T) {
	h, clk := newGated(t, WithShards(1))
	origin := h.origin
	fired := 0
	tm := h.AfterFunc(100*time.Millisecond, func() { fired++ })
	armed := heldLaterMove(t, clk, tm, func() {
		clk.Set(origin.Add(50 * time.Millisecond))
		require.True(t, tm.Stop(), "Stop of the armed timer")
		require.False(t, tm.Reset(50*time.Millisecond), "Reset of the stopped timer")
		require.Equal(t, origin.Add(100*time.Millisecond), tm.Deadline(), "armed again for the deadline it had")
	})
	assert.True(t, armed, "the later-move found the timer armed")
	assertTookEffectLast(t, h, clk, tm, &fired)
}

// TestLaterMove_FailsAfterResetEveryAndResetAtOfTheSameDeadline: at 50ms
// ResetEvery makes the timer periodic, and ResetAt(100ms) one-shot again
// for the deadline it had: the deadline and the binding are both the ones
// the held later-move loaded.
func TestLaterMove_FailsAfterResetEveryAndResetAtOfTheSameDeadline(t *testing.T) {
	h, clk := newGated(t, WithShards(1))
	origin := h.origin
	fired := 0
	tm := h.AfterFunc(100*time.Millisecond, func() { fired++ })
	armed := heldLaterMove(t, clk, tm, func() {
		clk.Set(origin.Add(50 * time.Millisecond))
		require.True(t, tm.ResetEvery(time.Second), "ResetEvery of the armed timer")
		require.True(t, tm.ResetAt(origin.Add(100*time.Millisecond)), "ResetAt of the periodic timer")
		require.Equal(t, origin.Add(100*time.Millisecond), tm.Deadline(), "one-shot again, for the deadline it had")
	})
	assert.True(t, armed, "the later-move found the timer armed")
	assertTookEffectLast(t, h, clk, tm, &fired)
}

// TestLaterMove_FailsAfterStopAndResetAtOfOneSharedReading: the batch
// pattern ResetAt's godoc gives, a timer held by value re-armed from one
// shared reading: at 50ms Stop, then ResetAt of the same reading's
// deadline.
func TestLaterMove_FailsAfterStopAndResetAtOfOneSharedReading(t *testing.T) {
	h, clk := newGated(t, WithShards(1))
	fired := 0
	var tm Timer
	tm.Init(h, func() { fired++ })
	now := h.Now() // read once for a batch of re-arms
	require.False(t, tm.ResetAt(now.Add(100*time.Millisecond)))
	armed := heldLaterMove(t, clk, &tm, func() {
		clk.Set(now.Add(50 * time.Millisecond))
		require.True(t, tm.Stop(), "Stop of the armed timer")
		require.False(t, tm.ResetAt(now.Add(100*time.Millisecond)), "ResetAt of the stopped timer, from the shared reading")
	})
	assert.True(t, armed, "the later-move found the timer armed")
	assertTookEffectLast(t, h, clk, &tm, &fired)
}

// TestLaterMove_FailsAfterAnEarlierAndALaterReArm: no Stop, and the
// binding never changes: at 50ms a ResetAt moves the deadline earlier (under
// the lock) and another moves it back to 100ms (a later-move). The held
// later-move loaded 100ms too; it must not land after both.
func TestLaterMove_FailsAfterAnEarlierAndALaterReArm(t *testing.T) {
	h, clk := newGated(t, WithShards(1))
	origin := h.origin
	fired := 0
	tm := h.AfterFunc(100*time.Millisecond, func() { fired++ })
	armed := heldLaterMove(t, clk, tm, func() {
		clk.Set(origin.Add(50 * time.Millisecond))
		require.True(t, tm.ResetAt(origin.Add(70*time.Millisecond)), "ResetAt to an earlier deadline")
		require.True(t, tm.ResetAt(origin.Add(100*time.Millisecond)), "ResetAt back to the deadline it had")
	})
	assert.True(t, armed, "the later-move found the timer armed")
	assertTookEffectLast(t, h, clk, tm, &fired)
}

// TestLaterMove_FailsAfterALaterMoveToTheSameDeadline: a re-arm that
// leaves the deadline as it was is a re-arm all the same: at 50ms
// ResetAt(100ms) of the timer armed for 100ms (a later-move by nothing)
// takes effect between the held later-move's load and its swap.
func TestLaterMove_FailsAfterALaterMoveToTheSameDeadline(t *testing.T) {
	h, clk := newGated(t, WithShards(1))
	origin := h.origin
	fired := 0
	tm := h.AfterFunc(100*time.Millisecond, func() { fired++ })
	armed := heldLaterMove(t, clk, tm, func() {
		clk.Set(origin.Add(50 * time.Millisecond))
		require.True(t, tm.ResetAt(origin.Add(100*time.Millisecond)), "ResetAt to the deadline it has")
	})
	assert.True(t, armed, "the later-move found the timer armed")
	assertTookEffectLast(t, h, clk, tm, &fired)
}

// TestLaterMove_BeyondItsRangeTakesTheLockOnce: a later-move swaps only an
// offset from the tick the timer is filed under (see when.go); one that
// moves the deadline further than the offset holds takes the shard's lock,
// which files the timer under its new tick, and the moves after it take no
// lock again.
func TestLaterMove_BeyondItsRangeTakesTheLockOnce(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	origin := h.origin
	fired := 0
	tm := h.AfterFunc(time.Minute, func() { fired++ })
	s := tm.home()
	far := time.Minute + time.Duration(h.offMask) + time.Second // past the offset's range
	s.lock()
	done := make(chan bool, 1)
	go func() { done <- tm.Reset(far) }()
	for deadline := time.Now().Add(10 * time.Second); s.waiting.Load() == 0; runtime.Gosched() {
		if time.Now().After(deadline) {
			s.mu.Unlock()
			t.Fatal("hung: the move beyond the offset's range did not come to wait for the shard's lock within 10s")
		}
	}
	s.mu.Unlock()
	assert.True(t, recvWithin(t, 5*time.Second, done, "the move beyond the range, once the lock is free"), "found the timer armed")
	require.Equal(t, origin.Add(far), tm.Deadline())
	assert.Equal(t, h.dueTick(int64(far)), tm.filed, "filed again under the new deadline's tick")
	s.lock()
	go func() { done <- tm.Reset(far + time.Minute) }()
	armed := recvWithin(t, 5*time.Second, done, "the next later-move, with the shard's lock held")
	s.mu.Unlock()
	assert.True(t, armed, "the next later-move found the timer armed")
	assert.Equal(t, origin.Add(far+time.Minute), tm.Deadline())
	due := h.Due(tm.Deadline())
	advanceTo(t, h, clk, due.Add(-time.Millisecond), "before the deadline's tick")
	assert.Zero(t, fired)
	advanceTo(t, h, clk, due, "the deadline's tick")
	assert.Equal(t, 1, fired)
	mustCheck(t, h)
}

// TestLaterMove_FarUnderTheLockFilesAgain: a re-arm under the lock (here
// Reset of a periodic timer, which makes it one-shot) to a later deadline
// beyond the offset's range cannot stay where the timer is filed: it files
// it under its new tick, and the deadline is exact.
func TestLaterMove_FarUnderTheLockFilesAgain(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	origin := h.origin
	fired := 0
	tm := h.Every(time.Minute, func() { fired++ })
	far := 24*time.Hour + 123*time.Nanosecond
	require.True(t, tm.Reset(far))
	require.Equal(t, origin.Add(far), tm.Deadline())
	assert.Equal(t, h.dueTick(int64(far)), tm.filed, "filed under the new deadline's tick")
	mustCheck(t, h)
	due := h.Due(tm.Deadline())
	advanceTo(t, h, clk, due.Add(-time.Millisecond), "before the deadline's tick")
	assert.Zero(t, fired, "fired before its deadline (or at the periodic instants it no longer has)")
	advanceTo(t, h, clk, due, "the deadline's tick")
	assert.Equal(t, 1, fired)
}

// TestLaterMove_WordLayout: the generation wraps within its bits, never
// into the unfiled and frozen bits; with the default tick the offset holds
// 2^38 ns, and a tick too long to leave 24 bits of generation makes every
// re-arm take the lock, which still re-arms exactly.
func TestLaterMove_WordLayout(t *testing.T) {
	h, _ := newFake(t)
	assert.Equal(t, int64(1)<<38-1, h.offMask)
	assert.True(t, h.laterFree)
	top := int64(frozenBit-1) &^ h.offMask // the last generation
	p := top | 12345
	assert.Equal(t, int64(0), h.nextGen(p), "the generation after the last is the first")
	assert.True(t, movable(h.nextGen(p)|p&h.offMask))
	assert.True(t, unfiled(h.nextGen(p)|unfiledBit))
	assert.False(t, movable(h.nextGen(p)|frozenBit))
	assert.False(t, unfiled(h.nextGen(p)|frozenBit))

	hl, clk := newFake(t, WithTick(time.Hour), WithShards(1))
	assert.False(t, hl.laterFree, "a 1h tick leaves fewer than 24 bits of generation")
	origin := hl.origin
	fired := 0
	tm := hl.AfterFunc(time.Hour, func() { fired++ })
	require.True(t, tm.Reset(3*time.Hour+time.Nanosecond))
	assert.Equal(t, origin.Add(3*time.Hour+time.Nanosecond), tm.Deadline())
	advanceTo(t, hl, clk, origin.Add(3*time.Hour), "before the deadline's tick")
	assert.Zero(t, fired)
	advanceTo(t, hl, clk, origin.Add(4*time.Hour), "the deadline's tick")
	assert.Equal(t, 1, fired)
	mustCheck(t, hl)
}

// TestLaterMove_PastTheLastTickLeavesTheWheels: a timer moved later, past
// the last tick the clock can reach, takes the lock and leaves the wheels
// for the list of timers that never fire, instead of staying in its slot
// as a later-move within the wheels does: Next then reports nothing to do
// (found by FuzzSimulation: Next said true with no timer able to fire).
func TestLaterMove_PastTheLastTickLeavesTheWheels(t *testing.T) {
	h, _ := newFake(t)
	nearEnd := h.origin.Add(time.Duration((h.lastTick - 1) * h.tick))
	tm := h.AtFunc(nearEnd, func() { t.Error("a timer past the last tick fired") })
	next, ok := h.Next()
	require.True(t, ok, "a timer due at the tick before the last")
	require.False(t, next.After(nearEnd))

	assert.True(t, tm.ResetAt(h.origin.Add(math.MaxInt64)), "moved later, past the last tick")
	_, ok = h.Next()
	assert.False(t, ok, "Next with the only timer past the last tick")
	assert.Equal(t, 1, h.Len(), "still armed")
	mustCheck(t, h)
	assert.True(t, tm.Stop())
}
