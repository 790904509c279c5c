package wheelctx

// Tests of request deadlines (docs/guarantees.md, "Request deadlines"):
// the cases package context
// checks for its own WithDeadline and WithTimeout (context/x_test.go,
// afterfunc_test.go), and what the hierarchy adds (the deadline on its
// clock, the timer gone once cancelled, no goroutine per context).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel"
)

// isDone reports whether ctx's Done channel is closed, without waiting.
func isDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// waitDone waits for ctx to be done, failing the test with what if it is
// not within a few seconds.
func waitDone(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	recvWithin(t, 5*time.Second, ctx.Done(), what+": Done never closed")
}

// assertEnded checks that ctx is done with err and cause.
func assertEnded(t *testing.T, ctx context.Context, err, cause error, what string) {
	t.Helper()
	assert.True(t, isDone(ctx), "%s: Done not closed", what)
	assert.Equal(t, err, ctx.Err(), "%s: Err", what)
	assert.Equal(t, cause, context.Cause(ctx), "%s: Cause", what)
}

// assertLive checks that ctx is not done.
func assertLive(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	assert.NoError(t, ctx.Err(), "%s: Err", what)
	assert.NoError(t, context.Cause(ctx), "%s: Cause", what)
	assert.False(t, isDone(ctx), "%s: Done closed", what)
}

// kids counts the funcs registered with a context of this package.
func kids(ctx context.Context) int {
	c := ctx.(*deadlineCtx)
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k := c.kids; k != nil; k = k.next {
		n++
	}
	return n
}

func TestWithTimeout_DoneOnFirstAdvanceAtDeadline(t *testing.T) {
	h, clk := newFake(t)
	start := clk.Now()
	ctx, cancel := WithTimeout(h, context.Background(), 50*time.Millisecond)
	defer cancel()

	dl, ok := ctx.Deadline()
	assert.True(t, ok)
	assert.True(t, dl.Equal(start.Add(50*time.Millisecond)), "Deadline() = %v, want start+50ms", dl)
	assert.Equal(t, 1, h.Len(), "the deadline's timer")

	clk.Add(49 * time.Millisecond)
	h.Advance()
	assertLive(t, ctx, "1ms before the deadline")
	clk.Add(time.Millisecond)
	assert.Equal(t, 1, h.Advance(), "callbacks of the Advance at the deadline")
	assertEnded(t, ctx, context.DeadlineExceeded, context.DeadlineExceeded, "at the deadline")
	assert.True(t, errors.Is(ctx.Err(), context.DeadlineExceeded))
	assert.Zero(t, h.Len())
}

// TestWithDeadline_NeverEarlyBetweenTicks: a deadline between two ticks is
// due at the later one; an Advance at the deadline itself, but before that
// tick, leaves the context live.
func TestWithDeadline_NeverEarlyBetweenTicks(t *testing.T) {
	h, clk := newFake(t)
	deadline := clk.Now().Add(10*time.Millisecond + 500*time.Microsecond)
	ctx, cancel := WithDeadline(h, context.Background(), deadline)
	defer cancel()
	dl, _ := ctx.Deadline()
	assert.Equal(t, deadline, dl, "Deadline() is the deadline given, as it was given")

	for _, d := range []time.Duration{10 * time.Millisecond, 500 * time.Microsecond, 499 * time.Microsecond} {
		clk.Add(d)
		h.Advance()
		assertLive(t, ctx, fmt.Sprintf("at %v", clk.Now().Sub(deadline)))
	}
	clk.Add(time.Microsecond)
	h.Advance()
	assertEnded(t, ctx, context.DeadlineExceeded, context.DeadlineExceeded, "at the tick after the deadline")
}

// With a Mock, a context ends on the first Advance whose clock has reached
// its deadline rounded up to the tick: not on one whose clock has reached
// the deadline but not its tick.
func TestWithTimeout_MockDoneOnFirstAdvanceAtDeadlineTick(t *testing.T) {
	h, mock := newMock(t)
	ctx, cancel := WithTimeout(h, context.Background(), 20*time.Millisecond)
	defer cancel()
	mock.Add(19 * time.Millisecond)
	h.Advance()
	assertLive(t, ctx, "before the deadline")
	mock.Add(5 * time.Millisecond)
	h.Advance()
	assertEnded(t, ctx, context.DeadlineExceeded, context.DeadlineExceeded, "after the deadline")

	ctx, cancel = WithTimeout(h, context.Background(), 20*time.Millisecond+500*time.Microsecond)
	defer cancel()
	mock.Add(20*time.Millisecond + 700*time.Microsecond)
	h.Advance()
	assertLive(t, ctx, "past the deadline, before its tick")
	mock.Add(300 * time.Microsecond)
	h.Advance()
	assertEnded(t, ctx, context.DeadlineExceeded, context.DeadlineExceeded, "at the deadline's tick")
}

func TestWithTimeout_CancelStopsTimerAtOnce(t *testing.T) {
	h, clk := newFake(t)
	ctx, cancel := WithTimeout(h, context.Background(), time.Second)
	before := h.Stats()
	cancel()
	assertEnded(t, ctx, context.Canceled, context.Canceled, "after cancel")
	assert.Zero(t, h.Len(), "timers armed after cancel")
	assert.Equal(t, before.Stopped+1, h.Stats().Stopped, "Stats.Stopped after cancel")

	clk.Add(2 * time.Second)
	assert.Zero(t, h.Advance(), "callbacks run after the cancelled deadline")
	assert.Equal(t, context.Canceled, ctx.Err(), "Err after the cancelled deadline")
}

func TestWithTimeout_CancelIsIdempotent(t *testing.T) {
	h, clk := newFake(t)
	ctx, cancel := WithTimeout(h, context.Background(), time.Second)
	cancel()
	cancel()
	assertEnded(t, ctx, context.Canceled, context.Canceled, "cancelled twice")

	ctx, cancel = WithTimeout(h, context.Background(), time.Second)
	clk.Add(time.Second)
	h.Advance()
	cancel()
	cancel()
	assertEnded(t, ctx, context.DeadlineExceeded, context.DeadlineExceeded, "cancelled after the deadline fired")
	assert.Zero(t, h.Len())
}

// TestWithTimeout_CancelAfterDeadlineBeforeAdvance: the deadline has passed
// on the clock, but no Advance has fired it yet: cancel wins, as it does
// for context.WithTimeout when cancel runs before its timer.
func TestWithTimeout_CancelAfterDeadlineBeforeAdvance(t *testing.T) {
	h, clk := newFake(t)
	ctx, cancel := WithTimeout(h, context.Background(), time.Second)
	clk.Add(2 * time.Second)
	cancel()
	assertEnded(t, ctx, context.Canceled, context.Canceled, "cancelled before the Advance")
	assert.Zero(t, h.Advance())
}

func TestWithDeadline_PastDeadlineDoneAtOnce(t *testing.T) {
	h, clk := newFake(t)
	clk.Add(time.Hour)
	now := clk.Now()
	for _, tt := range []struct {
		name string
		make func() (context.Context, context.CancelFunc)
	}{
		{"WithDeadline(now)", func() (context.Context, context.CancelFunc) { return WithDeadline(h, context.Background(), now) }},
		{"WithDeadline(now-1ns)", func() (context.Context, context.CancelFunc) {
			return WithDeadline(h, context.Background(), now.Add(-1))
		}},
		{"WithDeadline(zero Time)", func() (context.Context, context.CancelFunc) {
			return WithDeadline(h, context.Background(), time.Time{})
		}},
		{"WithTimeout(0)", func() (context.Context, context.CancelFunc) { return WithTimeout(h, context.Background(), 0) }},
		{"WithTimeout(-1s)", func() (context.Context, context.CancelFunc) {
			return WithTimeout(h, context.Background(), -time.Second)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.make()
			assertEnded(t, ctx, context.DeadlineExceeded, context.DeadlineExceeded, tt.name)
			assert.Zero(t, h.Len(), "timers armed")
			cancel()
			assertEnded(t, ctx, context.DeadlineExceeded, context.DeadlineExceeded, tt.name+" then cancel")
		})
	}
	ctx, cancel := WithDeadline(h, context.Background(), time.Time{})
	defer cancel()
	dl, _ := ctx.Deadline()
	assert.True(t, dl.IsZero(), "Deadline() = %v, want the zero Time given", dl)
}

// TestWithDeadline_OnHierarchyClock: whether a deadline has passed is
// judged on the hierarchy's clock, not on the wall clock.
func TestWithDeadline_OnHierarchyClock(t *testing.T) {
	h, clk := newFake(t) // 2026-01-01, whatever the wall clock says
	ctx, cancel := WithDeadline(h, context.Background(), clk.Now().Add(time.Minute))
	defer cancel()
	assertLive(t, ctx, "a minute ahead of the hierarchy's clock")
	assert.Equal(t, 1, h.Len())
}

func TestWithDeadline_ParentDeadlineEarlier(t *testing.T) {
	h, clk := newFake(t)
	t.Run("parent of package context", func(t *testing.T) {
		soon := time.Now().Add(time.Hour)
		parent, pcancel := context.WithDeadline(context.Background(), soon)
		defer pcancel()
		ctx, cancel := WithDeadline(h, parent, soon.Add(time.Hour))
		defer cancel()
		dl, _ := ctx.Deadline()
		assert.Equal(t, soon, dl, "Deadline() is the parent's")
		assert.Zero(t, h.Len(), "a timer armed for a deadline the parent comes before")
		assert.True(t, strings.HasSuffix(fmt.Sprint(ctx), ".WithCancel"), "String() = %q", ctx)
		pcancel()
		waitDone(t, ctx, "child of a cancelled parent")
		assertEnded(t, ctx, context.Canceled, context.Canceled, "child of a cancelled parent")
	})
	t.Run("parent of this package", func(t *testing.T) {
		parent, pcancel := WithTimeout(h, context.Background(), 10*time.Millisecond)
		defer pcancel()
		ctx, cancel := WithTimeout(h, parent, time.Hour)
		defer cancel()
		pdl, _ := parent.Deadline()
		dl, _ := ctx.Deadline()
		assert.Equal(t, pdl, dl, "Deadline() is the parent's")
		assert.Equal(t, 1, h.Len(), "timers: the parent's only")
		clk.Add(10 * time.Millisecond)
		h.Advance()
		assertEnded(t, ctx, context.DeadlineExceeded, context.DeadlineExceeded, "child at the parent's deadline")
	})
}

// TestWithTimeout_ParentCancelReachesChild: cancelling a parent of package
// context ends the child, which reports it at once (Err looks at the
// parent) and closes Done as soon as the parent's AfterFunc has run.
func TestWithTimeout_ParentCancelReachesChild(t *testing.T) {
	h, _ := newFake(t)
	parentCause := errors.New("parent cause")
	parent, pcancel := context.WithCancelCause(context.Background())
	ctx, cancel := WithTimeout(h, parent, time.Hour)
	defer cancel()
	ctx.Done() // made before the cancel: the channel closes, not replaced
	pcancel(parentCause)
	assert.Equal(t, context.Canceled, ctx.Err(), "Err right after the parent's cancel")
	assert.Equal(t, parentCause, context.Cause(ctx), "Cause right after the parent's cancel")
	waitDone(t, ctx, "child of a cancelled parent")
	assert.Zero(t, h.Len(), "the child's timer after the parent's cancel")

	// Done first, Err later: Done closes by the parent's AfterFunc.
	parent, pcancel2 := context.WithCancel(context.Background())
	ctx, cancel = WithTimeout(h, parent, time.Hour)
	defer cancel()
	pcancel2()
	waitDone(t, ctx, "child of a cancelled parent, Done first")
	assertEnded(t, ctx, context.Canceled, context.Canceled, "child of a cancelled parent, Done first")
	assert.Zero(t, h.Len())
}

func TestWithTimeout_ParentDoneAlready(t *testing.T) {
	h, _ := newFake(t)
	tooSlow := errors.New("too slow")
	cause := errors.New("cause")
	cancelled, pcancel := context.WithCancelCause(context.Background())
	pcancel(cause)
	expired, ecancel := context.WithTimeoutCause(context.Background(), -time.Second, tooSlow)
	defer ecancel()
	own, ocancel := WithTimeout(h, context.Background(), time.Hour)
	ocancel()
	for _, tt := range []struct {
		name       string
		parent     context.Context
		err, cause error
	}{
		{"WithCancelCause cancelled", cancelled, context.Canceled, cause},
		{"WithTimeoutCause expired", expired, context.DeadlineExceeded, tooSlow},
		{"WithTimeout of this package cancelled", own, context.Canceled, context.Canceled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, d := range []time.Duration{time.Hour, 0} {
				ctx, cancel := WithTimeout(h, tt.parent, d)
				assertEnded(t, ctx, tt.err, tt.cause, fmt.Sprintf("WithTimeout(done parent, %v)", d))
				assert.Zero(t, h.Len(), "timers armed")
				cancel()
				assertEnded(t, ctx, tt.err, tt.cause, "then cancelled")
			}
		})
	}
}

// TestCause_OwnEndIgnoresLaterParentCause: once the context has ended by
// its own deadline or cancel, a parent cancelled later with a cause does
// not change its Cause. (context.Cause looks causes up through Value; see
// endedCtx.)
func TestCause_OwnEndIgnoresLaterParentCause(t *testing.T) {
	h, clk := newFake(t)
	late := errors.New("parent cancelled later")

	parent, pcancel := context.WithCancelCause(context.Background())
	expired, cancel := WithTimeout(h, parent, time.Second)
	defer cancel()
	cancelled, cancel2 := WithTimeout(h, parent, time.Hour)
	cancel2()
	clk.Add(time.Second)
	h.Advance()
	pcancel(late)
	assertEnded(t, expired, context.DeadlineExceeded, context.DeadlineExceeded, "expired, then parent cancelled")
	// A plain context that its cancel func ended keeps no cause of its own
	// (it would cost every request two allocations under a parent that can
	// end): the parent's, given after, shows through (WithDeadline's godoc).
	assertEnded(t, cancelled, context.Canceled, late, "cancelled, then parent cancelled")
	cancelledCause, cancel5 := WithTimeoutCause(h, parent, time.Hour, errors.New("unused"))
	cancel5()
	assertEnded(t, cancelledCause, context.Canceled, late, "a Cause variant made under the cancelled parent")

	// And the cause of a child that ended with its parent is the parent's.
	parent, pcancel = context.WithCancelCause(context.Background())
	child, cancel3 := WithTimeout(h, parent, time.Hour)
	defer cancel3()
	grandchild, cancel4 := WithTimeout(h, child, time.Hour)
	defer cancel4()
	pcancel(late)
	assertEnded(t, child, context.Canceled, late, "child of the cancelled parent")
	assertEnded(t, grandchild, context.Canceled, late, "grandchild of the cancelled parent")
}

// TestCause_TableOfPackageContext is TestCause of package context
// (context/x_test.go) for the cases that involve WithTimeout and
// WithTimeoutCause, with this package's.
func TestCause_TableOfPackageContext(t *testing.T) {
	h, _ := newFake(t)
	parentCause := errors.New("parentCause")
	finishedEarly := errors.New("finishedEarly")
	tooSlow := errors.New("tooSlow")
	for _, tt := range []struct {
		name       string
		ctx        func() context.Context
		err, cause error
	}{
		{"WithTimeout", func() context.Context {
			ctx, cancel := WithTimeout(h, context.Background(), 0)
			cancel()
			return ctx
		}, context.DeadlineExceeded, context.DeadlineExceeded},
		{"WithTimeout canceled", func() context.Context {
			ctx, cancel := WithTimeout(h, context.Background(), time.Hour)
			cancel()
			return ctx
		}, context.Canceled, context.Canceled},
		{"WithTimeout stacked", func() context.Context {
			ctx, cancel := context.WithCancelCause(context.Background())
			ctx, _ = WithTimeout(h, ctx, 0)
			cancel(finishedEarly)
			return ctx
		}, context.DeadlineExceeded, context.DeadlineExceeded},
		{"WithTimeout stacked canceled", func() context.Context {
			ctx, cancel := context.WithCancelCause(context.Background())
			ctx, _ = WithTimeout(h, ctx, time.Hour)
			cancel(finishedEarly)
			return ctx
		}, context.Canceled, finishedEarly},
		{"WithCancelCause under WithTimeout, parent cause before child", func() context.Context {
			ctx, cancelParent := WithTimeout(h, context.Background(), time.Hour)
			ctx, cancelChild := context.WithCancelCause(ctx)
			cancelParent()
			cancelChild(parentCause)
			return ctx
		}, context.Canceled, context.Canceled},
		{"WithCancelCause under WithTimeout, child cause first", func() context.Context {
			ctx, cancelParent := WithTimeout(h, context.Background(), time.Hour)
			ctx, cancelChild := context.WithCancelCause(ctx)
			cancelChild(parentCause)
			cancelParent()
			return ctx
		}, context.Canceled, parentCause},
		{"WithoutCancel of WithTimeout", func() context.Context {
			ctx, cancel := WithTimeout(h, context.Background(), 0)
			defer cancel()
			return context.WithoutCancel(ctx)
		}, nil, nil},
		{"WithTimeoutCause", func() context.Context {
			ctx, cancel := WithTimeoutCause(h, context.Background(), 0, tooSlow)
			cancel()
			return ctx
		}, context.DeadlineExceeded, tooSlow},
		{"WithTimeoutCause canceled", func() context.Context {
			ctx, cancel := WithTimeoutCause(h, context.Background(), time.Hour, tooSlow)
			cancel()
			return ctx
		}, context.Canceled, context.Canceled},
		{"WithTimeoutCause stacked", func() context.Context {
			ctx, cancel := context.WithCancelCause(context.Background())
			ctx, _ = WithTimeoutCause(h, ctx, 0, tooSlow)
			cancel(finishedEarly)
			return ctx
		}, context.DeadlineExceeded, tooSlow},
		{"WithTimeoutCause stacked canceled", func() context.Context {
			ctx, cancel := context.WithCancelCause(context.Background())
			ctx, _ = WithTimeoutCause(h, ctx, time.Hour, tooSlow)
			cancel(finishedEarly)
			return ctx
		}, context.Canceled, finishedEarly},
		{"WithoutCancel timeout", func() context.Context {
			ctx, cancel := WithTimeoutCause(h, context.Background(), 0, tooSlow)
			ctx = context.WithoutCancel(ctx)
			cancel()
			return ctx
		}, nil, nil},
		// The same with WithDeadlineCause, which the table of package
		// context reaches only through WithTimeoutCause.
		{"WithDeadlineCause", func() context.Context {
			ctx, cancel := WithDeadlineCause(h, context.Background(), h.Now(), tooSlow)
			cancel()
			return ctx
		}, context.DeadlineExceeded, tooSlow},
		{"WithDeadlineCause canceled", func() context.Context {
			ctx, cancel := WithDeadlineCause(h, context.Background(), h.Now().Add(time.Hour), tooSlow)
			cancel()
			return ctx
		}, context.Canceled, context.Canceled},
		{"WithDeadlineCause stacked canceled", func() context.Context {
			ctx, cancel := context.WithCancelCause(context.Background())
			ctx, _ = WithDeadlineCause(h, ctx, h.Now().Add(time.Hour), tooSlow)
			cancel(finishedEarly)
			return ctx
		}, context.Canceled, finishedEarly},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx()
			assert.Equal(t, tt.err, ctx.Err(), "Err")
			assert.Equal(t, tt.cause, context.Cause(ctx), "Cause")
		})
	}
}

func TestWithTimeout_ValueIsParents(t *testing.T) {
	h, _ := newFake(t)
	type key string
	parent := context.WithValue(context.Background(), key("k1"), "v1")
	ctx, cancel := WithTimeout(h, parent, time.Hour)
	defer cancel()
	ctx = context.WithValue(ctx, key("k2"), "v2")
	ctx, cancel2 := WithTimeout(h, ctx, time.Hour)
	defer cancel2()
	assert.Equal(t, "v1", ctx.Value(key("k1")))
	assert.Equal(t, "v2", ctx.Value(key("k2")))
	assert.Nil(t, ctx.Value(key("k3")))
	assert.Nil(t, ctx.Value(nil))
}

// TestWithTimeout_StandardChildrenGetDeadlineExceeded: contexts derived by
// package context end with this one, with its error and cause, before the
// Advance that fired the deadline returns.
func TestWithTimeout_StandardChildrenGetDeadlineExceeded(t *testing.T) {
	h, clk := newFake(t)
	ctx, cancel := WithTimeout(h, context.Background(), 100*time.Millisecond)
	defer cancel()
	type key struct{}
	cancelChild, c1 := context.WithCancel(ctx)
	defer c1()
	causeChild, c2 := context.WithCancelCause(ctx)
	defer c2(nil)
	timerChild, c3 := context.WithTimeout(ctx, time.Hour)
	defer c3()
	valueChild := context.WithValue(ctx, key{}, 1)
	grandchild, c4 := context.WithCancel(context.WithValue(cancelChild, key{}, 2))
	defer c4()
	ownChild, c5 := WithTimeout(h, valueChild, time.Hour)
	defer c5()
	called := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { close(called) })
	defer stop()
	// The child of this package under the WithValue wrapper waits through
	// context.AfterFunc, in a goroutine (package context's limit).
	assert.Equal(t, 4, kids(ctx), "registrations with the context: 3 children and AfterFunc")

	for _, c := range []context.Context{cancelChild, causeChild, timerChild, valueChild, grandchild, ownChild} {
		assertLive(t, c, fmt.Sprint(c))
	}
	clk.Add(100 * time.Millisecond)
	h.Advance()
	waitDone(t, ownChild, "the child under the WithValue wrapper") // told by context.AfterFunc's goroutine
	for _, c := range []context.Context{ctx, cancelChild, causeChild, timerChild, valueChild, grandchild, ownChild} {
		assertEnded(t, c, context.DeadlineExceeded, context.DeadlineExceeded, fmt.Sprint(c))
	}
	recvWithin(t, 5*time.Second, called, "context.AfterFunc's func after the deadline")
	assert.False(t, stop(), "stop after the func was called")
	assert.Zero(t, h.Len(), "timers armed")
}

func TestWithTimeout_StandardChildCancelUnregisters(t *testing.T) {
	h, _ := newFake(t)
	ctx, cancel := WithTimeout(h, context.Background(), time.Hour)
	defer cancel()
	_, c1 := context.WithCancel(ctx)
	_, c2 := context.WithTimeout(ctx, time.Minute)
	stop := context.AfterFunc(ctx, func() { t.Error("AfterFunc's func called after stop") })
	own, c3 := WithTimeout(h, ctx, time.Minute)
	assert.Equal(t, 4, kids(ctx), "registrations: 2 standard children, AfterFunc and a child of this package")
	c1()
	c2()
	assert.True(t, stop(), "stop of a pending AfterFunc")
	assert.False(t, stop(), "second stop")
	c3()
	assert.Zero(t, kids(ctx), "registrations after the children were cancelled")
	assert.Zero(t, kids(own))
	assert.Equal(t, 1, h.Len(), "timers: the parent's only")
	cancel()
	assert.Zero(t, h.Len())
}

// TestWithTimeout_ChildOfThisPackage: a context of this package under
// another registers with it as it is made, ends with it, either way round,
// and its own cancel unlinks it.
func TestWithTimeout_ChildOfThisPackage(t *testing.T) {
	h, clk := newFake(t)
	parent, pcancel := WithTimeout(h, context.Background(), time.Hour)
	child, cancel := WithTimeout(h, parent, time.Minute)
	assert.Equal(t, 1, kids(parent), "kids once the child is made")
	assert.Equal(t, 2, h.Len())
	cancel()
	assertEnded(t, child, context.Canceled, context.Canceled, "child cancelled")
	assertLive(t, parent, "parent of a cancelled child")
	assert.Zero(t, kids(parent), "the parent's kids after the child's cancel")
	assert.Equal(t, 1, h.Len())

	child, cancel = WithTimeout(h, parent, time.Minute)
	defer cancel()
	pcancel()
	assertEnded(t, child, context.Canceled, context.Canceled, "child of a cancelled parent")
	assert.Zero(t, h.Len())

	parent, pcancel = WithTimeout(h, context.Background(), time.Minute)
	defer pcancel()
	child, cancel = WithTimeout(h, parent, time.Hour)
	defer cancel()
	clk.Add(time.Minute)
	h.Advance()
	assertEnded(t, child, context.DeadlineExceeded, context.DeadlineExceeded, "child of an expired parent")
}

// TestWithTimeout_ParentToldWhenMade: a context asks its parent to tell
// it of its end as it is made, whatever waits for it, so that the
// parent's end stops its timer at once; Err and Cause see the parent's
// end at once.
func TestWithTimeout_ParentToldWhenMade(t *testing.T) {
	h, _ := newFake(t)
	cause := errors.New("parent's cause")
	for _, tt := range []struct {
		name   string
		parent func() (context.Context, func())
	}{
		{"parent of package context", func() (context.Context, func()) {
			p, cancel := context.WithCancelCause(context.Background())
			return p, func() { cancel(cause) }
		}},
		{"parent of this package", func() (context.Context, func()) {
			p, cancel := context.WithCancelCause(context.Background())
			own, ocancel := WithTimeout(h, p, time.Hour)
			t.Cleanup(ocancel)
			return own, func() { cancel(cause) }
		}},
		{"custom parent with AfterFunc", func() (context.Context, func()) {
			p := &customCtx{done: make(chan struct{})}
			return p, func() { p.cancel(context.Canceled) }
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parent, cancelParent := tt.parent()
			ctx, cancel := WithTimeout(h, parent, time.Hour)
			defer cancel()
			if p, ok := parent.(*deadlineCtx); ok {
				assert.Equal(t, 1, kids(p), "kids of the parent once the context is made")
			}
			if p, ok := parent.(*customCtx); ok {
				assert.Equal(t, 1, p.registered(), "funcs registered with a parent with an AfterFunc method")
			}
			cancelParent()
			wantCause := cause
			if _, ok := parent.(*customCtx); ok {
				wantCause = context.Canceled
			}
			assert.Equal(t, context.Canceled, ctx.Err(), "Err after the parent's end")
			assert.Equal(t, wantCause, context.Cause(ctx), "Cause after the parent's end")
			assert.True(t, isDone(ctx), "Done after the parent's end")
			cancel()
			assert.Equal(t, context.Canceled, ctx.Err(), "Err after cancel too")
		})
	}
	assert.Zero(t, h.Len(), "timers armed")
}

// A standard parent's end reaches a context that nothing waits on (no
// Done, no Err): its timer is stopped by the parent's notification.
func TestWithTimeout_ParentEndStopsTimerOfAContextNothingWaitsOn(t *testing.T) {
	h, _ := newFake(t)
	parent, pcancel := context.WithCancel(context.Background())
	_, cancel := WithTimeout(h, parent, time.Hour)
	defer cancel()
	assert.Equal(t, 1, h.Len())
	pcancel()
	deadline := time.Now().Add(5 * time.Second)
	for h.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("hung: the context's timer still armed 5s after its parent's cancel")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWithTimeout_CancelWhileParentLearnsOfItsEnd is the regression test
// for a cancel that asked its parent, of this package, whether it was done
// while holding the child's lock: the parent, learning there that its own
// parent had ended, ended too and called the child, which waited for its
// own lock. The grandparent here never tells its AfterFuncs, so only the
// asking ends the parent.
func TestWithTimeout_CancelWhileParentLearnsOfItsEnd(t *testing.T) {
	h, _ := newFake(t)
	grandparent := &customCtx{done: make(chan struct{}), silent: true}
	parent, pcancel := WithTimeout(h, grandparent, time.Hour)
	defer pcancel()
	child, cancel := WithTimeout(h, parent, time.Hour)
	grandparent.cancel(context.Canceled)
	cancelled := make(chan struct{})
	go func() { cancel(); close(cancelled) }()
	recvWithin(t, 5*time.Second, cancelled, "cancel of a child whose parent learns in it that its parent ended")
	assertEnded(t, child, context.Canceled, context.Canceled, "child")
	assertEnded(t, parent, context.Canceled, context.Canceled, "parent")
	assert.Zero(t, h.Len())
}

// TestWithTimeout_ManyUnderOneParent: many contexts, of both packages,
// under one parent of each package; cancelling the parent ends them all.
func TestWithTimeout_ManyUnderOneParent(t *testing.T) {
	const n = 1000
	h, _ := newFake(t)
	std, scancel := context.WithCancel(context.Background())
	own, ocancel := WithTimeout(h, context.Background(), time.Hour)
	var ctxs []context.Context
	for i := range n {
		for _, p := range []context.Context{std, own} {
			c, cancel := WithTimeout(h, p, time.Duration(i+1)*time.Millisecond)
			defer cancel()
			if i%2 == 0 {
				c.Done() // half of them wait, and so are registered
			}
			ctxs = append(ctxs, c)
		}
		c, cancel := context.WithCancel(own)
		defer cancel()
		ctxs = append(ctxs, c)
	}
	assert.Equal(t, 2*n+1, h.Len())
	assert.Equal(t, 2*n, kids(own), "kids: the standard children, and this package's")
	scancel()
	ocancel()
	for i, c := range ctxs {
		waitDone(t, c, fmt.Sprintf("context %d under a cancelled parent", i))
		assert.Equal(t, context.Canceled, c.Err(), "context %d", i)
	}
	assert.Zero(t, h.Len(), "timers after the parents were cancelled")
}

// TestWithTimeout_ErrImpliesDone: once Err returns an error, Done is
// closed, also while another goroutine is ending the context (context's
// TestContextErrDoneRace).
func TestWithTimeout_ErrImpliesDone(t *testing.T) {
	h, _ := newFake(t)
	for range 20 {
		parent, pcancel := context.WithCancel(context.Background())
		ctx, cancel := WithTimeout(h, parent, time.Hour)
		done := ctx.Done()
		assert.NoError(t, ctx.Err(), "Err before anything ended it")
		go pcancel()
		deadline := time.Now().Add(5 * time.Second)
		for ctx.Err() == nil {
			if time.Now().After(deadline) {
				t.Fatal("hung: Err stayed nil for 5s after the parent's cancel")
			}
			runtime.Gosched()
		}
		select {
		case <-done:
		default:
			t.Fatal("Err is non-nil, but Done is not closed")
		}
		cancel()
	}
}

// TestWithTimeout_DoneImpliesErr: once Done is closed, Err and Cause
// report the end, also for a context the driver ends while its Done is
// being waited for. (The example server once saw Done closed and Cause
// nil: the end was recorded after the close.)
func TestWithTimeout_DoneImpliesErr(t *testing.T) {
	h := newStarted(t)
	defer h.Stop()
	var wg sync.WaitGroup
	var bad atomic.Int32
	for i := range 100 {
		wg.Go(func() {
			ctx, cancel := WithTimeout(h, context.Background(), time.Duration(i%3)*time.Millisecond)
			defer cancel()
			<-ctx.Done()
			if ctx.Err() == nil || context.Cause(ctx) == nil {
				bad.Add(1)
			}
		})
	}
	waitWithin(t, 10*time.Second, &wg, "contexts of 0-2ms on the driver")
	assert.Zero(t, bad.Load(), "contexts whose Done was closed while Err or Cause was nil")
}

func TestWithTimeout_String(t *testing.T) {
	h, _ := newFake(t)
	ctx, cancel := WithTimeout(h, context.Background(), 50*time.Millisecond)
	defer cancel()
	dl, _ := ctx.Deadline()
	want := "context.Background.WithDeadline(" + dl.String() + " [50ms])"
	assert.Equal(t, want, fmt.Sprint(ctx))
	under, cancel2 := WithTimeout(h, ctx, time.Hour)
	defer cancel2()
	assert.Equal(t, want+".WithCancel", fmt.Sprint(under), "a later deadline under an earlier one")

	// Package context names the parent of a child it registered through
	// the parent's AfterFunc method by its wrapper, whatever the parent:
	// as for any context with that method.
	child, cancel3 := context.WithCancel(ctx)
	defer cancel3()
	assert.Equal(t, "context.stopCtx.WithCancel", fmt.Sprint(child))
}

func TestDeadlineCtx_AfterFunc(t *testing.T) {
	h, clk := newFake(t)
	t.Run("called after cancel", func(t *testing.T) {
		ctx, cancel := WithTimeout(h, context.Background(), time.Hour)
		called := make(chan struct{})
		context.AfterFunc(ctx, func() { close(called) })
		cancel()
		recvWithin(t, 5*time.Second, called, "AfterFunc's func after cancel")
	})
	t.Run("called after timeout", func(t *testing.T) {
		ctx, cancel := WithTimeout(h, context.Background(), time.Millisecond)
		defer cancel()
		called := make(chan struct{})
		context.AfterFunc(ctx, func() { close(called) })
		clk.Add(time.Millisecond)
		h.Advance()
		recvWithin(t, 5*time.Second, called, "AfterFunc's func after the deadline")
	})
	t.Run("called at once when done", func(t *testing.T) {
		ctx, cancel := WithTimeout(h, context.Background(), 0)
		defer cancel()
		called := make(chan struct{})
		stop := ctx.(interface{ AfterFunc(func()) func() bool }).AfterFunc(func() { close(called) })
		recvWithin(t, 5*time.Second, called, "AfterFunc method's func on a done context")
		assert.False(t, stop())
	})
	t.Run("not called after stop", func(t *testing.T) {
		ctx, cancel := WithTimeout(h, context.Background(), time.Hour)
		stop := context.AfterFunc(ctx, func() { t.Error("func called after stop") })
		assert.True(t, stop())
		assert.False(t, stop())
		cancel()
	})
	t.Run("method calls f on the cancelling goroutine", func(t *testing.T) {
		ctx, cancel := WithTimeout(h, context.Background(), time.Hour)
		var called bool
		ctx.(interface{ AfterFunc(func()) func() bool }).AfterFunc(func() { called = true })
		cancel()
		assert.True(t, called, "f had not run when cancel returned")
	})
}

// goroutinesSettle returns runtime.NumGoroutine once it has stopped
// falling (goroutines of earlier tests may still be exiting).
func goroutinesSettle() int {
	n := runtime.NumGoroutine()
	for range 50 {
		time.Sleep(time.Millisecond)
		m := runtime.NumGoroutine()
		if m >= n {
			return m
		}
		n = m
	}
	return n
}

// TestWithTimeout_NoGoroutinePerContext: under a parent of package
// context, of this package, or a WithValue of one of package context's,
// and for standard children of these contexts, no goroutine is started.
func TestWithTimeout_NoGoroutinePerContext(t *testing.T) {
	const n = 200
	h, _ := newFake(t)
	std := t.Context()
	own, ocancel := WithTimeout(h, context.Background(), time.Hour)
	defer ocancel()
	type key struct{}
	wrapped := context.WithValue(std, key{}, 1)

	before := goroutinesSettle()
	var cancels []context.CancelFunc
	for range n {
		for _, p := range []context.Context{context.Background(), std, own, wrapped} {
			c, cancel := WithTimeout(h, p, time.Hour)
			cancels = append(cancels, cancel)
			_, cancel = context.WithCancel(c)
			cancels = append(cancels, cancel)
			_, cancel = context.WithTimeout(c, time.Hour)
			cancels = append(cancels, cancel)
		}
	}
	assert.LessOrEqual(t, runtime.NumGoroutine()-before, 2, "goroutines started for %d contexts", 12*n)
	for _, cancel := range cancels {
		cancel()
	}
	assert.Equal(t, 1, h.Len(), "timers after cancel: own's only")
	assert.Zero(t, kids(own), "registrations with own after cancel")
}

// Under a context.WithValue of a context of this package, package context
// sees a parent of another package with no AfterFunc method: a context
// made there waits for it in a goroutine of context.AfterFunc's (the limit
// WithDeadline's godoc names), and still ends with it.
func TestWithTimeout_UnderWithValueOfOwnWaitsInAGoroutine(t *testing.T) {
	h, _ := newFake(t)
	own, ocancel := WithTimeout(h, context.Background(), time.Hour)
	type key struct{}
	ctx, cancel := WithTimeout(h, context.WithValue(own, key{}, 1), time.Hour)
	defer cancel()
	ocancel()
	waitDone(t, ctx, "context under a WithValue of a cancelled context")
	assertEnded(t, ctx, context.Canceled, context.Canceled, "context under a WithValue of a cancelled context")
	assert.Zero(t, h.Len())
}

// TestWithTimeout_ParentNotOfPackageContext: a parent with an AfterFunc
// method is used as package context uses it; one without reaches the
// child through a goroutine (context.AfterFunc's), as for
// context.WithTimeout; either way the child ends with it.
func TestWithTimeout_ParentNotOfPackageContext(t *testing.T) {
	h, _ := newFake(t)
	for _, withAfterFunc := range []bool{true, false} {
		t.Run(fmt.Sprintf("AfterFunc=%v", withAfterFunc), func(t *testing.T) {
			p := &customCtx{done: make(chan struct{})}
			var parent context.Context = p
			if !withAfterFunc {
				parent = noAfterFunc{p}
			}
			ctx, cancel := WithTimeout(h, parent, time.Hour)
			defer cancel()
			if withAfterFunc {
				assert.Equal(t, 1, p.registered(), "funcs registered with the parent once the context is made")
			}
			p.cancel(context.Canceled)
			waitDone(t, ctx, "child of a cancelled custom parent")
			assert.Equal(t, context.Canceled, ctx.Err())
			assert.Zero(t, h.Len())

			ctx, cancel = WithTimeout(h, &customCtx{done: make(chan struct{})}, time.Hour)
			ctx.Done()
			cancel()
			if withAfterFunc {
				assert.Zero(t, ctx.(*deadlineCtx).parent.(*customCtx).registered(), "funcs registered after the child's cancel")
			}
		})
	}
}

// customCtx is a context of no package, with an AfterFunc method. A
// silent one never calls the funcs registered with it; a quiet one leaves
// its Done channel open when it ends, and tells of its end only to the
// funcs registered before (as package context's own afterfunc_test.go's
// afterFuncCtx).
type customCtx struct {
	mu     sync.Mutex
	done   chan struct{}
	err    error
	funcs  map[*int]func()
	silent bool
	quiet  bool
}

func (c *customCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *customCtx) Done() <-chan struct{}       { return c.done }
func (c *customCtx) Value(any) any               { return nil }

func (c *customCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *customCtx) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := new(int)
	if c.funcs == nil {
		c.funcs = map[*int]func(){}
	}
	c.funcs[k] = f
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.funcs[k]
		delete(c.funcs, k)
		return ok
	}
}

func (c *customCtx) registered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.funcs)
}

func (c *customCtx) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
	if !c.quiet {
		close(c.done)
	}
	for _, f := range c.funcs {
		if !c.silent {
			go f()
		}
	}
	c.funcs = nil
}

// noAfterFunc hides customCtx's AfterFunc method.
type noAfterFunc struct{ c *customCtx }

func (n noAfterFunc) Deadline() (time.Time, bool) { return n.c.Deadline() }
func (n noAfterFunc) Done() <-chan struct{}       { return n.c.Done() }
func (n noAfterFunc) Err() error                  { return n.c.Err() }
func (n noAfterFunc) Value(k any) any             { return n.c.Value(k) }

func TestWithDeadline_BadInput(t *testing.T) {
	h, _ := newFake(t)
	var nilCtx context.Context // the nil is the point
	assert.PanicsWithValue(t, "wheelctx: WithTimeout called with a nil parent context", func() {
		WithTimeout(h, nilCtx, time.Second)
	})
	assert.PanicsWithValue(t, "wheelctx: WithDeadline called with a nil parent context", func() {
		WithDeadline(h, nilCtx, time.Now())
	})
	assert.PanicsWithValue(t, "wheelctx: WithTimeoutCause called with a nil parent context", func() {
		WithTimeoutCause(h, nilCtx, time.Second, errors.New("cause"))
	})
	assert.PanicsWithValue(t, "wheelctx: WithDeadlineCause called with a nil parent context", func() {
		WithDeadlineCause(h, nilCtx, time.Now(), errors.New("cause"))
	})
	assert.PanicsWithValue(t, "wheelctx: WithTimeout called with a nil Hierarchy", func() {
		WithTimeout(nil, context.Background(), time.Second)
	})
	var zero timingwheel.Hierarchy
	assert.Panics(t, func() { WithTimeout(&zero, context.Background(), time.Second) })
}

// TestWithTimeout_ConcurrentCancelAndExpiry: contexts cancelled while the
// driver fires their deadlines each end once, with Canceled or
// DeadlineExceeded, and never before the deadline.
func TestWithTimeout_ConcurrentCancelAndExpiry(t *testing.T) {
	h := newStarted(t)
	defer h.Stop()
	const n = 200
	var early atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			d := time.Duration(i%5) * time.Millisecond
			start := time.Now()
			ctx, cancel := WithTimeout(h, context.Background(), d)
			stop := context.AfterFunc(ctx, func() {})
			defer stop()
			if i%2 == 0 {
				time.Sleep(d)
			}
			cancel()
			switch ctx.Err() {
			case context.DeadlineExceeded:
				if time.Since(start) < d {
					early.Add(1)
				}
			case context.Canceled:
			default:
				t.Errorf("Err() = %v after cancel", ctx.Err())
			}
		})
	}
	waitWithin(t, 10*time.Second, &wg, "goroutines cancelling contexts")
	assert.Zero(t, early.Load(), "contexts done before their deadline")
	assert.Zero(t, h.Len())
}

// TestWithTimeout_DriverInSynctestBubble: with the real clock in a
// testing/synctest bubble and the driver running, the context is done at
// its deadline, not before, with the standard children it has.
func TestWithTimeout_DriverInSynctestBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newStarted(t)
		defer h.Stop()
		start := time.Now()
		req, reqCancel := context.WithCancel(context.Background())
		defer reqCancel()
		ctx, cancel := WithTimeout(h, req, 200*time.Millisecond)
		defer cancel()
		child, cancel2 := context.WithCancel(ctx)
		defer cancel2()
		var doneAt time.Duration
		go func() {
			<-child.Done()
			doneAt = time.Since(start)
		}()
		time.Sleep(199 * time.Millisecond)
		synctest.Wait()
		assertLive(t, ctx, "1ms before the deadline")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		assertEnded(t, ctx, context.DeadlineExceeded, context.DeadlineExceeded, "at the deadline")
		assertEnded(t, child, context.DeadlineExceeded, context.DeadlineExceeded, "child at the deadline")
		assert.Equal(t, 200*time.Millisecond, doneAt, "when the child's Done closed")

		// A request cancelled before the deadline takes its context along.
		req2, reqCancel2 := context.WithCancel(context.Background())
		ctx2, cancel3 := WithTimeout(h, req2, time.Second)
		defer cancel3()
		time.Sleep(10 * time.Millisecond)
		reqCancel2()
		synctest.Wait()
		assertEnded(t, ctx2, context.Canceled, context.Canceled, "context of a cancelled request")
		assert.Zero(t, h.Len())
	})
}

// TestWithTimeout_NoLeakAfterCancel: cancelled contexts are not kept by
// the hierarchy nor by their parent: the garbage collector frees them.
func TestWithTimeout_NoLeakAfterCancel(t *testing.T) {
	h, _ := newFake(t)
	parent := t.Context()
	var freed atomic.Int32
	const n = 100
	for range n {
		ctx, cancel := WithTimeout(h, parent, time.Hour)
		runtime.AddCleanup(ctx.(*deadlineCtx), func(*atomic.Int32) { freed.Add(1) }, &freed)
		cancel()
	}
	deadline := time.Now().Add(5 * time.Second)
	for freed.Load() < n && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	assert.EqualValues(t, n, freed.Load(), "cancelled contexts freed")
}

// The allocation counts that WithDeadline's godoc states, and the size
// class of the context: with 10^5 contexts pending, bytes allocated set
// much of a request deadline's cost (docs/benchmarks.md).
func TestWithTimeout_AllocationsAsDocumented(t *testing.T) {
	h, _ := newFake(t)
	assert.LessOrEqual(t, unsafe.Sizeof(deadlineCtx{}), uintptr(176), "deadlineCtx outgrew the 176-byte size class")
	bg := context.Background()
	parent, cancelParent := WithTimeout(h, bg, time.Hour)
	defer cancelParent()
	timeout := func(p context.Context) (context.Context, context.CancelFunc) { return WithTimeout(h, p, time.Minute) }
	deadline := func(p context.Context) (context.Context, context.CancelFunc) {
		return WithDeadline(h, p, time.Now().Add(time.Minute))
	}
	withCause := func(p context.Context) (context.Context, context.CancelFunc) {
		return WithTimeoutCause(h, p, time.Minute, context.DeadlineExceeded)
	}
	std, cancelStd := context.WithCancel(bg)
	defer cancelStd()
	for _, tt := range []struct {
		name   string
		with   func(context.Context) (context.Context, context.CancelFunc)
		parent context.Context
		done   bool
		want   float64
	}{
		// The context and its func (the method value that is its cancel
		// func and its timer's callback), then the Done channel.
		{"background", timeout, bg, false, 2},
		{"background, Done", timeout, bg, true, 3},
		{"WithDeadline, background", deadline, bg, false, 2},
		{"WithDeadline, background, Done", deadline, bg, true, 3},
		// Under a parent that can end: the registration (an entry among
		// the kids of a parent of this package, context.AfterFunc's
		// context under package context's: each with its stop func). The
		// context kept for Cause is made only when the deadline ends it.
		{"under a context of this package", timeout, parent, false, 4},
		{"under a context of this package, Done", timeout, parent, true, 5},
		{"under a context of package context", timeout, std, false, 4},
		{"under a context of package context, Done", timeout, std, true, 5},
		// A Cause variant keeps the context for Cause (WithCancelCause's
		// context and func) at its end under any parent, its cancel's too.
		{"WithTimeoutCause, background", withCause, bg, false, 4},
	} {
		allocs := testing.AllocsPerRun(1000, func() {
			ctx, cancel := tt.with(tt.parent)
			if tt.done {
				ctx.Done()
			}
			cancel()
		})
		assert.Equal(t, tt.want, allocs, "%s: allocations per context and cancel", tt.name)
	}
	assert.Zero(t, kids(parent), "kids left registered with the parent")
}

// WithTimeout's Deadline is the clock's reading plus d, as time.Time.Add
// has it, for every d: also where the reading plus d overflows int64.
func TestWithTimeout_DeadlineIsReadingPlusD(t *testing.T) {
	h, clk := newFake(t)
	clk.Add(1234567891 * time.Nanosecond)
	now := clk.Now()
	for _, d := range []time.Duration{0, 1, -1, 999_999_999, -999_999_999, 50 * time.Millisecond, -time.Hour,
		math.MaxInt64, math.MaxInt64 - 1234567890, math.MinInt64, math.MinInt64 + 1} {
		ctx, cancel := WithTimeout(h, context.Background(), d)
		dl, ok := ctx.Deadline()
		assert.True(t, ok)
		assert.Equal(t, now.Add(d), dl, "Deadline() for d = %d", d)
		assert.Equal(t, d <= 0, isDone(ctx), "done at once for d = %d", d)
		cancel()
	}
}

// Deadline does not change when the context ends, however it ends and
// wherever its deadline is kept: in its timer (WithTimeout, or WithDeadline
// with a deadline on h's own clock) or beside it.
func TestWithTimeout_DeadlineSameAfterEnd(t *testing.T) {
	for _, kind := range []string{"WithTimeout", "WithDeadline on h's clock", "WithDeadline elsewhere"} {
		for _, end := range []string{"cancel", "expiry"} {
			h, clk := newFake(t)
			want := clk.Now().Add(time.Second)
			var ctx context.Context
			var cancel context.CancelFunc
			switch kind {
			case "WithTimeout":
				ctx, cancel = WithTimeout(h, context.Background(), time.Second)
			case "WithDeadline on h's clock":
				ctx, cancel = WithDeadline(h, context.Background(), want)
			default:
				want = want.In(time.FixedZone("elsewhere", 3600)) // the same instant, not as h.origin.Add makes it
				ctx, cancel = WithDeadline(h, context.Background(), want)
			}
			what := kind + ", " + end
			dl, ok := ctx.Deadline()
			assert.True(t, ok)
			assert.Equal(t, want, dl, "%s: Deadline()", what)
			if end == "cancel" {
				cancel()
			} else {
				clk.Add(want.Sub(clk.Now()))
				h.Advance()
				require.True(t, isDone(ctx), "%s: done after its deadline", what)
			}
			dl, _ = ctx.Deadline()
			assert.Equal(t, want, dl, "%s: Deadline() after the end", what)
			assert.Contains(t, fmt.Sprint(ctx), want.String(), "%s: String()", what)
			cancel()
		}
	}
}

// raceRounds runs round n times, each time with its goroutines released
// together, under a watchdog that names what hung.
func raceRounds(t *testing.T, n int, what string, round func(i int, start <-chan struct{}, wg *sync.WaitGroup)) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			start := make(chan struct{})
			var wg sync.WaitGroup
			round(i, start, &wg)
			close(start)
			wg.Wait()
		}
	}()
	recvWithin(t, 30*time.Second, done, what)
}

// TestWithTimeout_ConcurrentCancelsReportCanceled: cancels racing each
// other (and Err) end a context whose deadline is far off with Canceled:
// the one whose Stop finds the timer stopped by the other does not take
// that for the deadline having passed. Both with Done called and not, so
// both ways of ending (with and without the context's lock) race.
func TestWithTimeout_ConcurrentCancelsReportCanceled(t *testing.T) {
	h := mustNew(t)
	parent, cancelParent := context.WithCancel(context.Background())
	defer cancelParent()
	var wrong atomic.Int32
	raceRounds(t, 3000, "racing cancels", func(i int, start <-chan struct{}, wg *sync.WaitGroup) {
		p := context.Background()
		if i%3 == 1 {
			p = parent
		}
		ctx, cancel := WithTimeout(h, p, time.Hour)
		if i%2 == 1 {
			ctx.Done()
		}
		for range 3 {
			wg.Go(func() {
				<-start
				cancel()
				if ctx.Err() != context.Canceled {
					wrong.Add(1)
				}
			})
		}
	})
	assert.Zero(t, wrong.Load(), "racing cancels reported an error other than Canceled")
	assert.Zero(t, h.Len(), "timers left armed")
}

// TestWithTimeout_DoneRacingCancelIsClosed: a Done channel made while
// another goroutine cancels is closed once both are through, and nothing
// stays registered with the parent: with no parent to register with, a
// standard one, one of this package, and a custom one with AfterFunc.
func TestWithTimeout_DoneRacingCancelIsClosed(t *testing.T) {
	h := mustNew(t)
	std, cancelStd := context.WithCancel(context.Background())
	defer cancelStd()
	ours, cancelOurs := WithTimeout(h, context.Background(), time.Hour)
	defer cancelOurs()
	custom := &customCtx{done: make(chan struct{})}
	parents := []context.Context{context.Background(), std, ours, custom}
	var ctxs []context.Context
	var chans []<-chan struct{}
	var mu sync.Mutex
	raceRounds(t, 4000, "Done racing cancel", func(i int, start <-chan struct{}, wg *sync.WaitGroup) {
		ctx, cancel := WithTimeout(h, parents[i%len(parents)], time.Hour)
		wg.Go(func() {
			<-start
			d := ctx.Done()
			mu.Lock()
			ctxs, chans = append(ctxs, ctx), append(chans, d)
			mu.Unlock()
		})
		wg.Go(func() {
			<-start
			cancel()
		})
	})
	for i, d := range chans {
		select {
		case <-d:
		default:
			t.Fatalf("context %d (parent %T): Done not closed after cancel returned", i, parents[i%len(parents)])
		}
		require.Equal(t, context.Canceled, ctxs[i].Err())
	}
	assert.Zero(t, kids(ours), "contexts left among the kids of a parent of this package")
	assert.Zero(t, custom.registered(), "contexts left registered with a custom parent")
	assert.Equal(t, 1, h.Len(), "timers left armed besides the parent of this package's")
}

// TestWithTimeout_AfterFuncRacingCancelRunsOnce: a func registered while
// another goroutine cancels runs exactly once, and its stop reports
// whether it prevented that.
func TestWithTimeout_AfterFuncRacingCancelRunsOnce(t *testing.T) {
	h := mustNew(t)
	const n = 3000
	var runs [n]atomic.Int32
	var stopped [n]bool
	raceRounds(t, n, "AfterFunc racing cancel", func(i int, start <-chan struct{}, wg *sync.WaitGroup) {
		ctx, cancel := WithTimeout(h, context.Background(), time.Hour)
		wg.Go(func() {
			<-start
			stop := ctx.(*deadlineCtx).AfterFunc(func() { runs[i].Add(1) })
			if i%2 == 0 {
				stopped[i] = stop()
			}
		})
		wg.Go(func() {
			<-start
			cancel()
		})
	})
	deadline := time.Now().Add(5 * time.Second)
	for i := range n {
		want := int32(1)
		if stopped[i] {
			want = 0
		}
		for runs[i].Load() != want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // a func of a context done already runs in a goroutine
		}
		require.Equal(t, want, runs[i].Load(), "func %d: runs (its stop reported %v)", i, stopped[i])
	}
}

// TestWithTimeout_FiringRacingCancelAndParent: the deadline firing on
// another goroutine's Advance, a cancel and the parent's end race; the
// context ends once, with the error of one of them, never
// DeadlineExceeded before the Advance that reaches the deadline starts,
// and always DeadlineExceeded when that Advance ended before the others
// began (both goroutines that end the context: one that began earlier may
// have ended it before the deadline fired).
func TestWithTimeout_FiringRacingCancelAndParent(t *testing.T) {
	mock := clock.NewMock()
	h := mustNew(t, timingwheel.WithClock(mock), timingwheel.WithTick(time.Millisecond))
	var wrong atomic.Int32
	var mu sync.Mutex
	var errs []string
	note := func(format string, args ...any) {
		wrong.Add(1)
		mu.Lock()
		if len(errs) < 5 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
		mu.Unlock()
	}
	raceRounds(t, 3000, "deadline, cancel and parent end racing", func(i int, start <-chan struct{}, wg *sync.WaitGroup) {
		parent, cancelParent := context.WithCancelCause(context.Background())
		ctx, cancel := WithTimeout(h, parent, time.Millisecond)
		if i%2 == 1 {
			ctx.Done()
		}
		// In one round of four, the Advance ends before the others start.
		var advanced atomic.Bool
		advance := func() {
			mock.Add(time.Millisecond)
			h.Advance()
			advanced.Store(true)
		}
		if i%4 == 3 {
			advance()
		} else {
			wg.Go(func() {
				<-start
				advance()
			})
		}
		cause := errors.New("parent ended")
		dl, _ := ctx.Deadline()
		// The other goroutine that ends the context records whether it
		// began after the Advance ended (late) or before (early); the one
		// below, if it finds that goroutine not begun, marks it late: it
		// will begin after the Advance, which has ended.
		const (
			notBegun = iota
			late
			early
		)
		var other atomic.Int32
		wg.Go(func() {
			<-start
			before := advanced.Load()
			if i%3 == 0 {
				cancelParent(cause)
			} else {
				cancel()
			}
			err := ctx.Err()
			first := before && (other.CompareAndSwap(notBegun, late) || other.Load() == late)
			switch {
			case err == nil:
				note("round %d: Err nil after the end", i)
			case first && err != context.DeadlineExceeded:
				note("round %d: Err %v, though the deadline fired first", i, err)
			}
		})
		wg.Go(func() {
			<-start
			<-ctx.Done()
			if ctx.Err() == context.DeadlineExceeded && mock.Now().Before(dl) {
				note("round %d: DeadlineExceeded before the deadline", i)
			}
		})
		wg.Go(func() {
			<-start
			began := int32(early)
			if advanced.Load() {
				began = late
			}
			other.CompareAndSwap(notBegun, began)
			cancelParent(cause)
			cancel()
		})
	})
	assert.Zero(t, wrong.Load(), "%v", errs)
	assert.Zero(t, h.Len(), "timers left armed")
}

// TestWithTimeout_CancelRacingParentEndLeavesNoTimer: a cancel that races
// the end of a standard parent (delivered by package context's goroutine)
// returns with the context's timer stopped, whichever end wins: cancel
// stops the timer at once even when it finds the context ended by the
// parent's goroutine, mid-way. With Done called and not.
func TestWithTimeout_CancelRacingParentEndLeavesNoTimer(t *testing.T) {
	h := mustNew(t, timingwheel.WithShards(1))
	var armed, wrong atomic.Int32
	raceRounds(t, 3000, "a cancel racing its parent's end", func(i int, start <-chan struct{}, wg *sync.WaitGroup) {
		parent, pcancel := context.WithCancel(context.Background())
		ctx, cancel := WithTimeout(h, parent, time.Hour)
		if i%2 == 1 {
			ctx.Done()
		}
		wg.Go(func() {
			<-start
			pcancel()
		})
		wg.Go(func() {
			<-start
			runtime.Gosched()
			cancel()
			if h.Len() != 0 {
				armed.Add(1)
			}
			if err := ctx.Err(); err != context.Canceled {
				wrong.Add(1)
			}
		})
	})
	assert.Zero(t, armed.Load(), "rounds whose cancel returned with the context's timer armed")
	assert.Zero(t, wrong.Load(), "rounds that ended with an Err other than Canceled")
}

// A deadline with a cause, passed on an Advance: Err is DeadlineExceeded
// and Cause the cause, for the context and for the contexts package
// context derives from it, made before or after the end; a parent's
// earlier deadline is the parent's, with its own cause, as for
// context.WithDeadlineCause.
func TestWithTimeoutCause_CauseAfterDeadline(t *testing.T) {
	h, clk := newFake(t)
	tooSlow := errors.New("tooSlow")
	for _, kind := range []string{"WithTimeoutCause", "WithDeadlineCause"} {
		var ctx context.Context
		var cancel context.CancelFunc
		if kind == "WithTimeoutCause" {
			ctx, cancel = WithTimeoutCause(h, context.Background(), time.Second, tooSlow)
		} else {
			ctx, cancel = WithDeadlineCause(h, context.Background(), h.Now().Add(time.Second), tooSlow)
		}
		before, cancelBefore := context.WithCancel(ctx)
		var afterFuncCause error
		stopped := make(chan struct{})
		context.AfterFunc(ctx, func() { afterFuncCause = context.Cause(ctx); close(stopped) })
		assertLive(t, ctx, kind+" before its deadline")
		clk.Add(time.Second)
		h.Advance()
		assertEnded(t, ctx, context.DeadlineExceeded, tooSlow, kind)
		assertEnded(t, before, context.DeadlineExceeded, tooSlow, kind+": context derived before the end")
		after, cancelAfter := context.WithCancel(ctx)
		assertEnded(t, after, context.DeadlineExceeded, tooSlow, kind+": context derived after the end")
		recvWithin(t, 5*time.Second, stopped, kind+": AfterFunc's func")
		assert.Equal(t, tooSlow, afterFuncCause, "%s: Cause in AfterFunc's func", kind)
		cancel()
		cancelBefore()
		cancelAfter()
		assertEnded(t, ctx, context.DeadlineExceeded, tooSlow, kind+", then cancelled")
	}

	parentsCause := errors.New("parent's")
	parent, pcancel := WithDeadlineCause(h, context.Background(), h.Now().Add(time.Hour), parentsCause)
	defer pcancel()
	ctx, cancel := WithTimeoutCause(h, parent, 2*time.Hour, tooSlow)
	defer cancel()
	dl, _ := parent.Deadline()
	got, _ := ctx.Deadline()
	assert.Equal(t, dl, got, "the parent's earlier deadline")
	assert.Contains(t, fmt.Sprint(ctx), ".WithCancel", "String of a context whose deadline is its parent's")
	assert.Equal(t, 1, h.Len(), "timers: the parent's alone")
	ctx.Done()
	clk.Add(time.Hour)
	h.Advance()
	assertEnded(t, parent, context.DeadlineExceeded, parentsCause, "the parent at its deadline")
	assertEnded(t, ctx, context.DeadlineExceeded, parentsCause, "the child at its parent's deadline")
}

// The context that is its own cancel func: cancel funcs kept only as func
// values (the context itself unreachable otherwise) survive collections and
// stack copies, and still cancel their context.
func TestWithTimeout_SelfCancelFuncSurvivesGCAndStackGrowth(t *testing.T) {
	h, _ := newFake(t, timingwheel.WithShards(2))
	parent, pcancel := context.WithCancel(context.Background())
	defer pcancel()
	var cancels []context.CancelFunc
	var dones []<-chan struct{}
	for i := range 2000 {
		c, cancel := WithTimeout(h, parent, time.Hour)
		if i%2 == 0 {
			dones = append(dones, c.Done())
		} else {
			dones = append(dones, nil)
		}
		cancels = append(cancels, cancel)
	}
	runtime.GC()
	var grow func(n int, f context.CancelFunc)
	grow = func(n int, f context.CancelFunc) {
		var pad [256]byte
		_ = pad
		if n > 0 {
			grow(n-1, f)
			return
		}
		runtime.GC()
		f()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, f := range cancels {
			grow(i%64, f)
			if i%100 == 0 {
				runtime.GC()
			}
		}
	}()
	recvWithin(t, 2*time.Minute, done, "2000 cancels, each after a collection at the bottom of a grown stack")
	for i, d := range dones {
		if d != nil && !func() bool {
			select {
			case <-d:
				return true
			default:
				return false
			}
		}() {
			t.Fatalf("context %d not done after its cancel", i)
		}
	}
	assert.Zero(t, h.Len(), "timers left")
}

// TestValue_ContextValueAfterOwnEnd: a context that ended by its own
// cancel or deadline answers Value as its parent does, also for a value
// that is itself a context (which it looks up again through a context of
// package context ended with its Err, for Cause's sake).
func TestValue_ContextValueAfterOwnEnd(t *testing.T) {
	h, clk := newFake(t)
	type key struct{}
	stored := context.WithValue(context.Background(), key{}, "stored")
	parent, pcancel := context.WithCancelCause(context.WithValue(context.Background(), key{}, stored))
	defer pcancel(nil)
	cancelled, cancel := WithTimeout(h, parent, time.Hour)
	cancel()
	expired, cancel2 := WithTimeoutCause(h, parent, time.Second, errors.New("too slow"))
	defer cancel2()
	clk.Add(time.Second)
	h.Advance()
	for _, c := range []context.Context{cancelled, expired} {
		assert.Same(t, stored, c.Value(key{}), "a value that is a context, after the end")
		assert.Equal(t, "stored", c.Value(key{}).(context.Context).Value(key{}))
	}
	assert.Equal(t, context.Canceled, context.Cause(cancelled))
	assert.EqualError(t, context.Cause(expired), "too slow")
}

// A context under a parent that tells of its end only through its
// AfterFunc method, to what registered before it ended (package context's
// TestCustomContextAfterFuncTimeout), is done once the parent is, though
// it registers only at its first wait, after the parent ended.
func TestWithTimeout_DoneUnderAParentThatEndedBeforeTheFirstWait(t *testing.T) {
	h, _ := newFake(t)
	for _, kind := range []string{"WithTimeout", "WithDeadlineCause"} {
		parent := &customCtx{done: make(chan struct{}), quiet: true}
		var ctx context.Context
		var cancel context.CancelFunc
		if kind == "WithTimeout" {
			ctx, cancel = WithTimeout(h, parent, time.Hour)
		} else {
			ctx, cancel = WithDeadlineCause(h, parent, h.Now().Add(time.Hour), errors.New("late"))
		}
		parent.cancel(context.Canceled)
		recvWithin(t, 10*time.Second, ctx.Done(), kind+"'s Done after the parent ended")
		assert.ErrorIs(t, ctx.Err(), context.Canceled, kind)
		assert.ErrorIs(t, context.Cause(ctx), context.Canceled, kind)
		cancel()
		assert.Zero(t, h.Len(), "%s: timers armed after the cancel", kind)
	}
}

// Right after New (the clock's reading 0), a timeout so negative that the
// deadline in ns is clamped still has Deadline() = the reading plus d.
func TestWithTimeout_DeadlineIsReadingPlusDAtTheClampedEdge(t *testing.T) {
	h, clk := newFake(t)
	for _, d := range []time.Duration{math.MinInt64, math.MinInt64 + 1, math.MinInt64 + 2} {
		ctx, cancel := WithTimeout(h, context.Background(), d)
		dl, _ := ctx.Deadline()
		assert.Equal(t, clk.Now().Add(d), dl, "Deadline() for d = %d", d)
		assert.True(t, isDone(ctx), "done at once for d = %d", d)
		cancel()
	}
}

// A parent of another package with an AfterFunc method is told of a
// context when it is made, and its registration undone by the context's
// cancel, as package context does (its afterfunc_test.go's
// TestCustomContextAfterFuncUnregisterTimeout); its end then stops the
// context's timer.
func TestWithTimeout_AfterFuncParentToldAtOnceAndUntoldByCancel(t *testing.T) {
	h, _ := newFake(t)
	parent := &customCtx{done: make(chan struct{})}
	_, cancel := WithTimeout(h, parent, time.Hour)
	assert.Equal(t, 1, parent.registered(), "funcs registered with the parent once the context is made")
	cancel()
	assert.Zero(t, parent.registered(), "funcs registered with the parent after the context's cancel")

	ctx, cancel := WithTimeout(h, parent, time.Hour)
	defer cancel()
	parent.cancel(context.Canceled)
	recvWithin(t, 10*time.Second, ctx.Done(), "Done after the parent's end")
	assert.Zero(t, h.Len(), "timers armed after the parent's end, nothing having waited on the context")
}

// TestWithTimeout_ConcurrentUnderEndingParents: goroutines make contexts
// under parents of package context that other goroutines cancel
// meanwhile, and cancel a third of them: each ends once, with Canceled, a
// context under an ended parent is done, and no timer is left.
func TestWithTimeout_ConcurrentUnderEndingParents(t *testing.T) {
	h, _ := newFake(t, timingwheel.WithShards(2))
	for round := range 20 {
		var parents []context.Context
		var pcancels []context.CancelFunc
		for range 3 {
			p, c := context.WithCancel(context.Background())
			parents, pcancels = append(parents, p), append(pcancels, c)
		}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 200 {
					p := parents[(g+i)%len(parents)]
					c, cancel := WithTimeout(h, p, time.Hour)
					done := c.Done()
					if i%3 == 0 {
						cancel()
						<-done
						if err := c.Err(); err != context.Canceled {
							t.Errorf("round %d: cancelled context: Err %v", round, err)
						}
						continue
					}
					defer cancel()
					if p.Err() != nil {
						select {
						case <-done:
						case <-time.After(5 * time.Second):
							t.Errorf("round %d: context under an ended parent not done", round)
						}
					}
				}
			})
		}
		go func() {
			for _, c := range pcancels {
				runtime.Gosched()
				c()
			}
		}()
		waitWithin(t, 30*time.Second, &wg, "goroutines making contexts under ending parents")
		for _, c := range pcancels {
			c()
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.Len() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // the last parents' ends arrive through goroutines
	}
	assert.Zero(t, h.Len(), "timers left")
}
