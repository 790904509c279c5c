package timingwheel_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/timingwheel/timingwheel"
)

// A request's deadline on the wheel: done at 200ms on the hierarchy's
// clock, not before, with context.DeadlineExceeded, and so is every
// context the standard library derives from it.
func ExampleHierarchy_WithTimeout() {
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))

	ctx, cancel := h.WithTimeout(context.Background(), 200*time.Millisecond)
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
func ExampleHierarchy_WithDeadline() {
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))

	ctx, cancel := h.WithDeadline(context.Background(), h.Now().Add(time.Second))
	fmt.Println("armed:", h.Len())
	cancel()
	fmt.Println("armed after cancel:", h.Len(), ctx.Err())

	past, cancel := h.WithDeadline(context.Background(), h.Now().Add(-time.Second))
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
func ExampleHierarchy_WithTimeout_handler() {
	h, _ := timingwheel.New()
	h.Start() // the hierarchy must be driven for deadlines to pass
	defer h.Stop()

	http.HandleFunc("/search", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := h.WithTimeout(r.Context(), 200*time.Millisecond)
		defer cancel()
		select {
		case <-time.After(50 * time.Millisecond): // stands for work that respects ctx
			fmt.Fprintln(w, "results")
		case <-ctx.Done():
			http.Error(w, context.Cause(ctx).Error(), http.StatusGatewayTimeout)
		}
	})
}
