package timingwheel

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel/internal/fakeclock"
	"github.com/timingwheel/timingwheel/internal/watch"
)

// The helpers of the tests of both packages, each written once: watchdogs
// that name what hung, clocks, hierarchies and what a test checks on them.
// export_test.go exports them to the black-box tests (package
// timingwheel_test).

// The watchdogs, written once for this package's tests and the others'
// (internal/watch).
var (
	goWatched  = watch.GoWatched
	mustReturn = watch.MustReturn
	waitWithin = watch.WaitWithin
	inBubble   = watch.InBubble
)

// recvWithin is watch.RecvWithin.
func recvWithin[T any](t testing.TB, d time.Duration, ch <-chan T, what string) T {
	t.Helper()
	return watch.RecvWithin(t, d, ch, what)
}

// mustProgress runs f on a goroutine of its own, as mustReturn does, and
// fails the test, naming what hung and where, if progress (read with
// atomic loads; f moves it on as it works) stays put for stall.
func mustProgress(t *testing.T, stall time.Duration, what string, progress *atomic.Int64, f func()) {
	t.Helper()
	done, settle := goWatched(t, f)
	tick := time.NewTicker(stall)
	defer tick.Stop()
	last := progress.Load()
	for {
		select {
		case <-done:
			settle()
			return
		case <-tick.C:
			now := progress.Load()
			if now == last {
				t.Fatalf("hung: %s made no progress for %v, at step %d", what, stall, now)
			}
			last = now
		}
	}
}

// stopWithin is h.Stop under mustReturn: Stop waits for the driver.
func stopWithin(t *testing.T, h *Hierarchy, what string) {
	t.Helper()
	mustReturn(t, 10*time.Second, "Stop of the driver ("+what+")", h.Stop)
}

// advanceWithin is h.Advance under mustReturn.
func advanceWithin(t *testing.T, h *Hierarchy, what string) int {
	t.Helper()
	var n int
	mustReturn(t, 5*time.Second, "Advance ("+what+")", func() { n = h.Advance() })
	return n
}

// advanceTo sets clk to at and advances h, under mustReturn.
func advanceTo(t *testing.T, h *Hierarchy, clk interface{ Set(time.Time) }, at time.Time, what string) int {
	t.Helper()
	clk.Set(at)
	return advanceWithin(t, h, what)
}

// nextReaches walks h by Next, as an Advance loop of the caller's own does,
// towards want, the tick of the earliest deadline armed: each answer is no
// later than want; the clock goes to an answer before want (never back)
// and an Advance there fires nothing; and Next reaches want in at most
// levels+1 answers (a cascade per level above 0, a late list's bound,
// want), plus moved, the timers moved later in place, whose old slot is an
// event too; the levels are those the wheels have at each answer. It
// leaves the clock before want or at the last answer.
func nextReaches(t *testing.T, h *Hierarchy, clk interface {
	Now() time.Time
	Set(time.Time)
}, want time.Time, moved int, what string) {
	t.Helper()
	levels := 0
	for answers := 1; ; answers++ {
		for _, s := range h.shards {
			s.lock()
			levels = max(levels, len(s.levels))
			s.mu.Unlock()
		}
		next, ok := h.Next()
		require.True(t, ok, "%s: Next has nothing", what)
		require.False(t, next.After(want), "%s: Next = %v, after the earliest deadline's tick %v", what, next, want)
		if next.Equal(want) {
			return
		}
		require.Less(t, answers, levels+1+moved, "%s: Next = %v after %d answers, not yet %v", what, next, answers, want)
		if next.After(clk.Now()) {
			clk.Set(next)
		}
		require.Zero(t, advanceWithin(t, h, what), "%s: an Advance at an early Next (%v) fired", what, next)
	}
}

// fakeClock is a manual clock safe for concurrent use (internal/fakeclock,
// shared with netidle's tests and the demos'): unlike clock.Mock, moving it
// does not sleep, so tests can take millions of steps.
type fakeClock = fakeclock.Clock

// newFakeClock returns a fakeClock reading 2026-01-01 00:00 UTC.
var newFakeClock = fakeclock.New

// newMock returns a hierarchy on a fresh clock.Mock.
func newMock(t testing.TB, opts ...Option) (*Hierarchy, *clock.Mock) {
	t.Helper()
	mock := clock.NewMock()
	h := mustNew(t, append([]Option{WithClock(mock)}, opts...)...)
	return h, mock
}

// goRandom starts n goroutines on wg; the g-th runs body with a
// rand.Rand of its own, seeded with g and stream.
func goRandom(wg *sync.WaitGroup, n int, stream uint64, body func(g int, r *rand.Rand)) {
	for g := range n {
		wg.Go(func() { body(g, rand.New(rand.NewPCG(uint64(g), stream))) })
	}
}

// mustNew is New(opts...), failing the test on an error.
func mustNew(t testing.TB, opts ...Option) *Hierarchy {
	t.Helper()
	h, err := New(opts...)
	require.NoError(t, err)
	return h
}

// newStarted returns a hierarchy with opts and its driver started; the
// caller stops it.
func newStarted(t testing.TB, opts ...Option) *Hierarchy {
	t.Helper()
	h := mustNew(t, opts...)
	h.Start()
	return h
}

// newFake returns a hierarchy on a fresh fakeClock.
func newFake(t testing.TB, opts ...Option) (*Hierarchy, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	h := mustNew(t, append([]Option{WithClock(clk)}, opts...)...)
	return h, clk
}

// goUntilClosed calls f(0), f(1), ... on a goroutine of wg until stop is
// closed (looked at before each call).
func goUntilClosed(wg *sync.WaitGroup, stop <-chan struct{}, f func(i int)) {
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			f(i)
		}
	})
}

// advanceContinuously moves clk by a millisecond and advances h, over and
// over on its own goroutine, until the returned function is called; that
// function returns once the goroutine has stopped, or fails the test if it
// does not within 10s (an Advance hung).
func advanceContinuously(t *testing.T, h *Hierarchy, clk *fakeClock) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	goUntilClosed(&wg, done, func(int) {
		clk.Add(time.Millisecond)
		h.Advance()
	})
	return func() {
		t.Helper()
		close(done)
		waitWithin(t, 10*time.Second, &wg, "the goroutine advancing continuously (its Advance)")
	}
}

// recorder collects the names of fired timers in order.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) fn(name string) func() {
	return func() {
		r.mu.Lock()
		r.got = append(r.got, name)
		r.mu.Unlock()
	}
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

// countedTimer is a timer whose armings, and the ends of them, a test
// counts while goroutines stop and re-arm it against an Advance: every
// arming ends exactly once, by firing (the callback adds to fired) or by a
// Stop or Reset that returned true (cancels). newCountedTimer counts the
// first arming; the test arms t.
type countedTimer struct {
	t       *Timer
	fired   atomic.Int32
	armings atomic.Int32
	cancels atomic.Int32
}

func newCountedTimer() *countedTimer {
	c := &countedTimer{}
	c.armings.Store(1)
	return c
}

// stopOrRearm stops c's timer or, as often (rnd decides, before rearm
// runs), re-arms it with rearm, a Reset or ResetAt of the timer it is
// given; it counts the arming that ends, if one does, and the new one.
func (c *countedTimer) stopOrRearm(rnd *rand.Rand, rearm func(tm *Timer) bool) {
	if rnd.IntN(2) == 0 {
		if c.t.Stop() {
			c.cancels.Add(1)
		}
		return
	}
	if rearm(c.t) {
		c.cancels.Add(1)
	}
	c.armings.Add(1)
}

// assertEachArmingEnded checks, once every timer of cs has fired or been
// stopped, that each arming of each ended exactly once: armings - cancels
// = fired.
func assertEachArmingEnded(t *testing.T, cs []*countedTimer) {
	t.Helper()
	for i, c := range cs {
		assert.Equal(t, c.armings.Load()-c.cancels.Load(), c.fired.Load(), "timer %d: armings - cancels = fired", i)
	}
}

// mustCheck fails the test unless h's invariants hold (see check), or if
// the check, which takes every shard's lock, does not return within 10s.
func mustCheck(t testing.TB, h *Hierarchy) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- h.check() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("hung: the invariant check did not return within 10s (a shard's lock left held?)")
	}
}

// waitFreed runs the collector until p's target is freed or 2s pass.
func waitFreed[T any](p weak.Pointer[T]) bool {
	deadline := time.Now().Add(2 * time.Second)
	for p.Value() != nil && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	return p.Value() == nil
}

// Helpers of panics.

// mustPanic calls f and fails unless it panics with a message that starts
// with "timingwheel:" and contains want.
func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Errorf("no panic, want one about %q", want)
			return
		}
		msg := fmt.Sprint(r)
		if !strings.HasPrefix(msg, "timingwheel:") || !strings.Contains(msg, want) {
			t.Errorf("panic %q, want a message prefixed %q about %q", msg, "timingwheel:", want)
		}
	}()
	f()
}

// recovered calls f and returns what it panicked with, or nil.
func recovered(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// level0Span returns the number of ticks level 0 spans: a timer filed at
// least that far beyond its shard's now is in a coarser level.
func level0Span(h *Hierarchy) int64 { return h.shards[0].levels[0].span }
