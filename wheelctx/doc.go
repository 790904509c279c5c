// Package wheelctx makes request deadlines whose deadline a
// [timingwheel.Hierarchy] enforces: drop-ins for [context.WithTimeout],
// [context.WithDeadline] and their Cause twins, where a deadline costs a
// wheel timer held inside the context instead of a runtime timer.
//
//	ctx, cancel := wheelctx.WithTimeout(h, r.Context(), 200*time.Millisecond)
//	defer cancel()
//
// A context behaves as package context's does: Deadline is the earlier of
// the one given and the parent's; Done closes and Err reports
// [context.DeadlineExceeded] once the deadline passes on h's clock (never
// before it, within a tick plus the driver's wake-up after it), Canceled
// after cancel, the parent's Err after the parent's end; Value is the
// parent's; [context.Cause] is what package context's would report.
// Contexts derived from one by package context's functions end with it,
// with its Err and Cause.
//
// It is built on the hierarchy's exported API and on what package context
// documents, nothing else:
//
//   - the deadline is a [timingwheel.Timer] held by value in the context,
//     armed once with [timingwheel.Timer.ResetAt]; every end stops it, so
//     the hierarchy keeps no reference to a context that ended;
//   - a parent that can end (its Done is not nil) is told of the context
//     when it is made: through its own AfterFunc method if it has one
//     (these contexts have one), else through [context.AfterFunc], which
//     starts no goroutine for a parent of package context;
//   - the context's AfterFunc method is what package context uses to tell
//     its own children of the context's end, with no goroutine;
//   - [context.Cause] follows a context's Value to the nearest context made
//     by [context.WithCancelCause]: a context that needs a cause of its own
//     when it ends (by its deadline under a parent that can end; a Cause
//     variant's end) makes one then, over its parent's values, cancelled
//     with its cause; its Value is then that context's.
//
// The hierarchy must be driven ([timingwheel.Hierarchy.Start], or the
// caller's own Advance loop); one on the default clock drives itself.
package wheelctx
