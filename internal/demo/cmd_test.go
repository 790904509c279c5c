package demo

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel/internal/demotest"
)

func TestParseFlagsRejectsAnArgumentAfterTheFlags(t *testing.T) {
	demotest.CheckFlags(t, func(args []string) error {
		fs := flag.NewFlagSet("demo", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Int("n", 1, "")
		return ParseFlags(fs, args)
	}, demotest.FlagCases{
		{nil, ""},
		{[]string{"-n", "3"}, ""},
		{[]string{"-n", "3", "extra"}, `unexpected argument "extra" (all settings are flags; see -help)`},
		{[]string{"-n", "x"}, "invalid value"},
	})
}

func TestQuantileIndexesTheSortedCopy(t *testing.T) {
	ds := []time.Duration{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	for _, tt := range []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.5, 6}, {0.99, 10}, {1, 10}} {
		if got := Quantile(ds, tt.q); got != tt.want {
			t.Errorf("Quantile(10..1, %v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if ds[0] != 10 {
		t.Errorf("Quantile sorted its argument: %v", ds)
	}
	if got := Quantile(nil, 0.5); got != 0 {
		t.Errorf("Quantile(nil, 0.5) = %v, want 0", got)
	}
}
