package timingwheel

import (
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestElapsed_IsNowMinusOrigin: Elapsed() is Now().Sub(Origin()) on a
// Mock, to the nanosecond (also before the origin), Origin is the clock
// when New ran, and on the default clock Elapsed is no less than the time
// measured around it.
func TestElapsed_IsNowMinusOrigin(t *testing.T) {
	mock := clock.NewMock()
	mock.Add(time.Hour)
	h, err := New(WithClock(mock))
	require.NoError(t, err)
	assert.True(t, h.Origin().Equal(mock.Now()))
	assert.Zero(t, h.Elapsed())
	mock.Add(5*time.Second + 7)
	assert.Equal(t, 5*time.Second+7, h.Elapsed())
	assert.Equal(t, h.Now().Sub(h.Origin()), h.Elapsed())
	assert.True(t, h.Origin().Add(h.Elapsed()).Equal(h.Now()))
	mock.Set(mock.Now().Add(-time.Hour))
	assert.Equal(t, -time.Hour+5*time.Second+7, h.Elapsed())

	before := time.Now()
	rh, err := New()
	require.NoError(t, err)
	rh.Stop() // nothing armed; no driver
	assert.False(t, rh.Origin().Before(before))
	time.Sleep(time.Millisecond)
	got := rh.Elapsed()
	assert.GreaterOrEqual(t, got, time.Millisecond)
	assert.LessOrEqual(t, got, time.Since(before))
	assert.Panics(t, func() { (&Hierarchy{}).Elapsed() })
	assert.Panics(t, func() { (&Hierarchy{}).Origin() })
}
