package timingwheel

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestStats_LatenessQuantileZero: the 0-quantile is bounded by the
// bucket of the smallest lateness, not by the first (empty) bucket.
func TestStats_LatenessQuantileZero(t *testing.T) {
	var st Stats
	st.Lateness[3] = 5 // 4µs to 8µs
	st.Lateness[5] = 5
	st.MaxLateness = 30 * time.Microsecond
	assert.Equal(t, LatenessBound(3), st.LatenessQuantile(0))
	assert.Equal(t, LatenessBound(3), st.LatenessQuantile(0.5))
	assert.Equal(t, st.MaxLateness, st.LatenessQuantile(1))
}
