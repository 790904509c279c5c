package timingwheel

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTicks_DeadlineBeforeRepresentableRange: a deadline further back
// than the largest Duration before the origin (the zero Time) is held at
// that limit, clear of the markers: the timer is armed (Stop says so,
// Deadline reports the limit, not "never armed") and fires on the next
// Advance, on every tick size.
func TestTicks_DeadlineBeforeRepresentableRange(t *testing.T) {
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

// TestTicks_LastTickOfRevolution: a deadline on the last tick of a
// level's current revolution belongs to that level, not the one above
// (whose current slot it would be in, behind now); each fires on its tick.
func TestTicks_LastTickOfRevolution(t *testing.T) {
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
		advanceTo(t, h, clk, next, "walking the level boundaries by Next")
		require.NoError(t, h.check())
	}
	assert.Equal(t, map[int64]int64{9: 9, 99: 99, 999: 999, 9999: 9999}, firedAt, "each timer fired on its tick")
}
