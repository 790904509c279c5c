package timingwheel

import (
	"testing"
	"time"
)

// The helpers of helpers_test.go (and long of long_test.go), exported to
// the black-box tests of package timingwheel_test, so that each helper is
// written once, with one signature, for both packages. Only test builds
// see these names.

var (
	// Watchdogs that name what hung.
	MustReturn    = mustReturn
	StopWithin    = stopWithin
	WaitWithin    = waitWithin
	InBubble      = inBubble
	AdvanceWithin = advanceWithin

	// Clocks and hierarchies.
	NewFakeClock = newFakeClock
	NewMock      = newMock
	NewStarted   = newStarted
	Long         = long

	// Panics.
	MustPanic = mustPanic
	Recovered = recovered
)

// FakeClock is fakeClock, for the black-box tests.
type FakeClock = fakeClock

// RecvWithin is recvWithin (a generic function is exported by a wrapper:
// it has no value until instantiated).
func RecvWithin[T any](t *testing.T, d time.Duration, ch <-chan T, what string) T {
	t.Helper()
	return recvWithin(t, d, ch, what)
}

// home returns the shard t belongs to now, or nil for a zero Timer. It may
// change while t is unarmed; lockShard is the way to hold it.
func (t *Timer) home() *shard {
	if b := t.b.Load(); b != nil {
		return b.s
	}
	return nil
}
