package timingwheel

import "os"

// long reports whether TIMINGWHEEL_LONG=1 asks for the long volumes: the
// full seed, round and duration counts of the simulation, model and stress
// tests, which take minutes under the race detector on 2 cores. The
// default run (README's `go test -race ./...`) runs every test, at smaller
// counts; .ci/run adds a second pass with TIMINGWHEEL_LONG=1 that runs the
// tests which call long (or Long, its export to model_blackbox_test.go) at
// the full counts: a new test that calls it must be added to that pass's
// -run list.
func long() bool { return os.Getenv("TIMINGWHEEL_LONG") == "1" }

// volume returns full under TIMINGWHEEL_LONG=1 and def otherwise.
func volume[T any](def, full T) T {
	if long() {
		return full
	}
	return def
}
