//go:build parallelcallbacks

package bench

import (
	"github.com/benbjohnson/clock"

	"github.com/timingwheel/timingwheel"
)

// This file adds impl=wheel-parallel to BenchmarkSlowExpiry: callbacks of
// each shard on a goroutine of their own (WithParallelCallbacks). It builds
// only with -tags parallelcallbacks, as older versions of the library lack
// the option; cmd/report adds the tag when the file compiles.
func init() {
	newParallelWheel = func(c clock.Clock) (*timingwheel.Hierarchy, error) {
		return timingwheel.New(timingwheel.WithClock(c), timingwheel.WithParallelCallbacks())
	}
}
