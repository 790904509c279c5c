package netidle

import (
	"math"
	"testing"
	"time"
	"unsafe"
)

// TestDrawLifetime_Edges pins MaxLifetimeJitter's arithmetic at the edges
// of the draw: a draw of 0 gives d−s, one just below 1 at most d+s, where
// s is f·d rounded down; no jitter, or f = 0, gives d; the largest d
// saturates instead of wrapping.
func TestDrawLifetime_Edges(t *testing.T) {
	defer func(old func() float64) { jitterDraw = old }(jitterDraw)
	below1 := math.Nextafter(1, 0)
	for _, tc := range []struct {
		name     string
		d        time.Duration
		f, draw  float64
		min, max time.Duration // the lifetime drawn lies in [min, max]
	}{
		{"no jitter", time.Hour, 0, 0.3, time.Hour, time.Hour},
		{"draw 0", time.Hour, 0.1, 0, 54 * time.Minute, 54 * time.Minute},
		{"draw 1/2", time.Hour, 0.1, 0.5, time.Hour, time.Hour},
		{"draw below 1", time.Hour, 0.1, below1, 66*time.Minute - 2*time.Nanosecond, 66 * time.Minute},
		{"1ns, f=0.5: s rounds to 0", time.Nanosecond, 0.5, below1, time.Nanosecond, time.Nanosecond},
		{"3ns, f=0.9, draw 0", 3, 0.9, 0, 1, 1},
		{"largest d, draw 0", math.MaxInt64, below1, 0, 1, 1024},
		{"largest d, draw below 1", math.MaxInt64, 0.5, below1, math.MaxInt64, math.MaxInt64},
	} {
		jitterDraw = func() float64 { return tc.draw }
		o := options{lifetime: int64(tc.d), jitter: tc.f}
		if got := time.Duration(o.drawLifetime()); got < tc.min || got > tc.max {
			t.Errorf("%s: MaxLifetime(%v), MaxLifetimeJitter(%v), draw %v: lifetime %v, want within [%v, %v]",
				tc.name, tc.d, tc.f, tc.draw, got, tc.min, tc.max)
		}
	}
	if got := (&options{}).drawLifetime(); got != 0 {
		t.Errorf("no MaxLifetime: drawLifetime() = %v, want 0", got)
	}
}

// TestOptions_Size: the jitter's field fits the options' size class, the
// 48 bytes policy.go's comment states.
func TestOptions_Size(t *testing.T) {
	if got := unsafe.Sizeof(options{}); got != 48 {
		t.Errorf("options is %d bytes, want 48", got)
	}
}
