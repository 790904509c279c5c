package demo

import (
	"slices"
	"time"
)

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of ds: the element at index
// q·len(ds) of ds sorted, the largest for q = 1; 0 if ds is empty. ds is
// not changed.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
