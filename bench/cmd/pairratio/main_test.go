package main

import (
	"strings"
	"testing"
)

// Rounds pair each implementation's line with the other's of the same
// case, in either order; other metrics, other impls and stray lines are
// skipped, and a case whose other half never came is left out.
func TestPairPerRound(t *testing.T) {
	in := `goos: linux
BenchmarkW/parent=a/impl=wheel/n=1-2   	 100	 200.0 ns/op	 300.0 cpu-ns/op	 128 B/op
BenchmarkW/parent=a/impl=context/n=1-2 	 100	 600.0 ns/op	 600.0 cpu-ns/op	 272 B/op
BenchmarkW/parent=b/impl=wheel/n=1-2   	 100	 100.0 ns/op	 100.0 cpu-ns/op
BenchmarkW/parent=a/impl=context/n=1-2 	 100	 500.0 ns/op	 500.0 cpu-ns/op
BenchmarkW/parent=a/impl=other/n=1-2   	 100	 1.0 ns/op
BenchmarkW/parent=a/impl=wheel/n=1-2   	 100	 250.0 ns/op	 250.0 cpu-ns/op
PASS
`
	cases, ratios, err := pair(strings.NewReader(in), "wheel", "context", "ns/op")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 1 || cases[0] != "W/parent=a/n=1-2" {
		t.Fatalf("cases %q, want only W/parent=a/n=1-2", cases)
	}
	if got := ratios[cases[0]]; len(got) != 2 || got[0] != 3 || got[1] != 2 {
		t.Fatalf("ratios %v, want [3 2]", got)
	}
	_, ratios, _ = pair(strings.NewReader(in), "wheel", "context", "cpu-ns/op")
	if got := ratios["W/parent=a/n=1-2"]; len(got) != 2 || got[0] != 2 || got[1] != 2 {
		t.Fatalf("cpu ratios %v, want [2 2]", got)
	}
	// -count 2: each implementation's runs in a row.
	runs := `BenchmarkW/impl=wheel-2 	 1	 100.0 ns/op
BenchmarkW/impl=wheel-2 	 1	 200.0 ns/op
BenchmarkW/impl=context-2 	 1	 300.0 ns/op
BenchmarkW/impl=context-2 	 1	 800.0 ns/op
`
	_, ratios, _ = pair(strings.NewReader(runs), "wheel", "context", "ns/op")
	if got := ratios["W-2"]; len(got) != 2 || got[0] != 3 || got[1] != 4 {
		t.Fatalf("ratios of runs %v, want [3 4]", got)
	}
}
