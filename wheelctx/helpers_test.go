package wheelctx

import (
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/internal/fakeclock"
	"github.com/timingwheel/timingwheel/internal/watch"
)

// The helpers of the package's tests: hierarchies on the clocks the root
// package's tests use, and the watchdogs (internal/watch) that name what
// hung.

var waitWithin = watch.WaitWithin

// recvWithin is watch.RecvWithin.
func recvWithin[T any](t testing.TB, d time.Duration, ch <-chan T, what string) T {
	t.Helper()
	return watch.RecvWithin(t, d, ch, what)
}

// mustNew is timingwheel.New(opts...), failing the test on an error.
func mustNew(t testing.TB, opts ...timingwheel.Option) *timingwheel.Hierarchy {
	t.Helper()
	h, err := timingwheel.New(opts...)
	require.NoError(t, err)
	return h
}

// newStarted returns a hierarchy with opts and its driver started; the
// caller stops it.
func newStarted(t testing.TB, opts ...timingwheel.Option) *timingwheel.Hierarchy {
	t.Helper()
	h := mustNew(t, opts...)
	h.Start()
	return h
}

// newFake returns a hierarchy on a fresh manual clock (internal/fakeclock:
// unlike clock.Mock, moving it does not sleep).
func newFake(t testing.TB, opts ...timingwheel.Option) (*timingwheel.Hierarchy, *fakeclock.Clock) {
	t.Helper()
	clk := fakeclock.New()
	h := mustNew(t, append([]timingwheel.Option{timingwheel.WithClock(clk)}, opts...)...)
	return h, clk
}

// newMock returns a hierarchy on a fresh clock.Mock.
func newMock(t testing.TB, opts ...timingwheel.Option) (*timingwheel.Hierarchy, *clock.Mock) {
	t.Helper()
	mock := clock.NewMock()
	h := mustNew(t, append([]timingwheel.Option{timingwheel.WithClock(mock)}, opts...)...)
	return h, mock
}
