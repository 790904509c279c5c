package demo

import "testing"

func TestConnsThatFit(t *testing.T) {
	for _, tt := range []struct {
		limit uint64
		want  int
	}{
		{0, 0},
		{FDReserve, 0},
		{FDReserve + 1, 0},
		{FDReserve + 2, 1},
		{20_000, (20_000 - FDReserve) / 2},
		{FDsNeeded(10_000), 10_000},
		{1 << 62, 1 << 30},
	} {
		if got := ConnsThatFit(tt.limit); got != tt.want {
			t.Errorf("ConnsThatFit(%d) = %d, want %d", tt.limit, got, tt.want)
		}
	}
}
