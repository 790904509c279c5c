//go:build race

package timingwheel

// raceEnabled reports whether the race detector is on: real-time tests
// scale down under it, as it slows every memory access.
const raceEnabled = true
