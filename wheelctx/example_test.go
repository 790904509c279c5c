package wheelctx_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/wheelctx"
)

// A request's deadline on the wheel: done at 200ms on the hierarchy's
// clock, not before, with context.DeadlineExceeded, and so is every
// context the standard library derives from it.
func ExampleWithTimeout() {
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))

	ctx, cancel := wheelctx.WithTimeout(h, context.Background(), 200*time.Millisecond)
	defer cancel()
	child, cancelChild := context.WithCancel(ctx)
	defer cancelChild()

	mock.Add(199 * time.Millisecond)
	h.Advance()
	fmt.Println("at 199ms:", ctx.Err())

	mock.Add(time.Millisecond)
	h.Advance()
	fmt.Println("at 200ms:", ctx.Err())
	fmt.Println("child:", child.Err(), errors.Is(context.Cause(child), context.DeadlineExceeded))
	// Output:
	// at 199ms: <nil>
	// at 200ms: context deadline exceeded
	// child: context deadline exceeded true
}

// Work that finishes in time cancels its context: the timer is gone from
// the hierarchy at once, and Err says Canceled.
func ExampleWithDeadline() {
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))

	ctx, cancel := wheelctx.WithDeadline(h, context.Background(), h.Now().Add(time.Second))
	fmt.Println("armed:", h.Len())
	cancel()
	fmt.Println("armed after cancel:", h.Len(), ctx.Err())

	past, cancel := wheelctx.WithDeadline(h, context.Background(), h.Now().Add(-time.Second))
	defer cancel()
	fmt.Println("past deadline:", past.Err(), h.Len())
	// Output:
	// armed: 1
	// armed after cancel: 0 context canceled
	// past deadline: context deadline exceeded 0
}

// An HTTP handler whose requests get their deadline from the wheel: the
// context ends at the deadline, when the client goes away (r.Context() is
// cancelled), or when the handler returns, whichever comes first.
func ExampleWithTimeout_handler() {
	h, _ := timingwheel.New()
	h.Start() // the hierarchy must be driven for deadlines to pass
	defer h.Stop()

	http.HandleFunc("/search", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := wheelctx.WithTimeout(h, r.Context(), 200*time.Millisecond)
		defer cancel()
		select {
		case <-time.After(50 * time.Millisecond): // stands for work that respects ctx
			fmt.Fprintln(w, "results")
		case <-ctx.Done():
			http.Error(w, context.Cause(ctx).Error(), http.StatusGatewayTimeout)
		}
	})
}

// A deadline with a cause of its own: after it, Err is DeadlineExceeded
// and context.Cause the cause, in the context and in those derived from
// it; a cancel before it reports Canceled.
func ExampleWithTimeoutCause() {
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))
	errSlowBackend := errors.New("backend too slow")

	ctx, cancel := wheelctx.WithTimeoutCause(h, context.Background(), time.Second, errSlowBackend)
	defer cancel()
	child, cancelChild := context.WithCancel(ctx)
	defer cancelChild()

	mock.Add(time.Second)
	h.Advance()
	fmt.Println(ctx.Err(), "/", context.Cause(ctx))
	fmt.Println(child.Err(), "/", context.Cause(child))
	// Output:
	// context deadline exceeded / backend too slow
	// context deadline exceeded / backend too slow
}
