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

// The q-quantile's bound is that of the sample of rank ceil(q·n): never
// below the quantile, whatever q (out of [0, 1] too).
func TestStats_LatenessQuantileIsAnUpperBound(t *testing.T) {
	var st Stats
	st.Lateness[0] = 99 // below 1µs
	st.Lateness[10] = 1 // 512µs to 1.024ms
	st.MaxLateness = time.Millisecond
	for _, q := range []float64{0.991, 0.994, 0.999, 1, 1.5} {
		assert.Equal(t, st.MaxLateness, st.LatenessQuantile(q), "q = %v: the 100th of 100 samples is 1ms late", q)
	}
	for _, q := range []float64{-1, 0, 0.5, 0.99} {
		assert.Equal(t, LatenessBound(0), st.LatenessQuantile(q), "q = %v", q)
	}
}

// Bucket i holds lateness at or above LatenessBound(i-1): 0 for bucket 0.
func TestStats_LatenessBoundBelowTheFirstBucketIsZero(t *testing.T) {
	assert.Equal(t, time.Duration(0), LatenessBound(-1))
	assert.Equal(t, time.Microsecond, LatenessBound(0))
	assert.Equal(t, time.Duration(1<<63-1), LatenessBound(LatenessBuckets-1))
}
