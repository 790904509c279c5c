package timingwheel

import (
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSince_IsNowMinusT: Since(t) is Now().Sub(t) on a Mock, to the
// nanosecond, and on the default clock no less than the time measured
// around it.
func TestSince_IsNowMinusT(t *testing.T) {
	mock := clock.NewMock()
	h, err := New(WithClock(mock))
	require.NoError(t, err)
	start := h.Now()
	mock.Add(5*time.Second + 7)
	assert.Equal(t, 5*time.Second+7, h.Since(start))
	assert.Equal(t, h.Now().Sub(start), h.Since(start))
	assert.Equal(t, -time.Hour+5*time.Second+7, h.Since(start.Add(time.Hour)))

	rh, err := New()
	require.NoError(t, err)
	rh.Stop() // nothing armed; no driver
	before := time.Now()
	from := rh.Now()
	time.Sleep(time.Millisecond)
	got := rh.Since(from)
	assert.GreaterOrEqual(t, got, time.Millisecond)
	assert.LessOrEqual(t, got, time.Since(before))
	assert.Panics(t, func() { (&Hierarchy{}).Since(from) })
}
