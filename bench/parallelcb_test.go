//go:build parallelcallbacks

package bench

import (
	"github.com/benbjohnson/clock"

	"github.com/timingwheel/timingwheel"
)

// This file adds impl=wheel-parallel to BenchmarkSlowExpiry. It builds only
// with -tags parallelcallbacks; cmd/report adds the tag when the file
// compiles against the library.
//
// TODO: the option's name is a placeholder until the core has it: replace
// WithParallelCallbacks with the real option when it lands.
func init() {
	newParallelWheel = func(c clock.Clock) (*timingwheel.Hierarchy, error) {
		return timingwheel.New(timingwheel.WithClock(c), timingwheel.WithParallelCallbacks(true))
	}
}
