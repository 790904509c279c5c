package wheelctx

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/timingwheel/timingwheel"
)

// WithTimeout returns WithDeadline(h, parent, h.Now().Add(d)).
//
// Cancelling the context stops its timer at once, so code should call
// cancel as soon as the work done under the context completes:
//
//	ctx, cancel := wheelctx.WithTimeout(h, r.Context(), 200*time.Millisecond)
//	defer cancel()
func WithTimeout(h *timingwheel.Hierarchy, parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return newCtx("WithTimeout", h, parent, d, time.Time{}, true, nil)
}

// WithTimeoutCause is like [WithTimeout] but also sets the cause of the
// returned context when the timeout expires: after it, Err returns
// [context.DeadlineExceeded] and [context.Cause] returns cause, as with
// [context.WithTimeoutCause]. The returned [context.CancelFunc] does not
// set the cause: after cancel, Cause is [context.Canceled].
func WithTimeoutCause(h *timingwheel.Hierarchy, parent context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	return newCtx("WithTimeoutCause", h, parent, d, time.Time{}, true, cause)
}

// WithDeadline is a drop-in for [context.WithDeadline] whose deadline is
// kept by h instead of by a runtime timer. It returns a context derived
// from parent whose Done channel is closed when deadline passes on h's
// clock, when the returned cancel function is called, or when parent is
// done, whichever happens first. Its Deadline is the earlier of deadline
// and parent's; its Value is parent's.
//
// Once deadline has passed, Err and [context.Cause] return
// [context.DeadlineExceeded]; after cancel, [context.Canceled]; after
// parent is done, parent's Err and Cause. The deadline is enforced by h:
// never before deadline, and within a tick plus the driver's wake-up after
// it (with a [clock.Mock], on the first [timingwheel.Hierarchy.Advance]
// whose clock has reached deadline rounded up to the tick). A deadline
// that h's clock has already reached returns a context that is done at
// once, with no timer armed.
//
// Cancelling, or the parent's end, stops the timer and undoes the
// registration with the parent at once: the hierarchy keeps no reference
// to a context that ended. Calling cancel again does nothing.
//
// No goroutine is started per context under a parent of package context
// or of this package, nor for the contexts package context derives from
// the returned one. The limits are package context's own: it tells a
// context of another package of the end of a parent of its own only
// through [context.AfterFunc], whose func runs in a goroutine of its own,
// and under a parent of no package it knows with no AfterFunc method (a
// [context.WithValue] of one of these contexts) it waits in a goroutine
// per context. In both cases Done closes a moment after the parent's end
// (Err, and Cause, see it at once). And a standard child of the returned
// context prints as "context.stopCtx.WithCancel": package context wraps a
// parent with an AfterFunc method in a type without a String method.
//
// Creating a context under a parent that cannot end ([context.Background],
// a [context.WithValue] of it) costs two allocations (the context, which
// holds its timer, and its cancel func), one more when Done is first
// called. Under a parent that can end it also registers with the parent
// (two allocations: [context.AfterFunc]'s). A context that its deadline
// ends under such a parent, and a Cause variant that ends by its deadline
// or its cancel, makes then a [context.WithCancelCause] context for
// [context.Cause] (two more), so that Cause reports its own end also once
// an ancestor is cancelled later. A plain context that its cancel func
// ends first keeps none: if an ancestor is then cancelled with a cause,
// Cause of the context reports that cause, where package context's would
// report [context.Canceled] (its own Cause documents the same of contexts
// of other packages); Err is Canceled either way. On Go 1.25, Cause of a context
// whose parent of package context has ended, asked before Err, Done or
// the parent's notification, reports the parent's Err instead of its
// cause; from Go 1.26 it reports the cause (golang/go#73258).
//
// WithDeadline panics if h or parent is nil, as [context.WithDeadline]
// does for a nil parent.
func WithDeadline(h *timingwheel.Hierarchy, parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	return newCtx("WithDeadline", h, parent, 0, deadline, false, nil)
}

// WithDeadlineCause is like [WithDeadline] but also sets the cause of the
// returned context when the deadline is exceeded: after it, Err returns
// [context.DeadlineExceeded] and [context.Cause] returns cause, as with
// [context.WithDeadlineCause]. The returned [context.CancelFunc] does not
// set the cause: after cancel, Cause is [context.Canceled].
func WithDeadlineCause(h *timingwheel.Hierarchy, parent context.Context, deadline time.Time, cause error) (context.Context, context.CancelFunc) {
	return newCtx("WithDeadlineCause", h, parent, 0, deadline, false, cause)
}

// The state of a deadlineCtx: its phase, which leaves live once, and
// flags set when it is made (and doneMade, by the first Done).
const (
	live     = iota
	canceled // its cancel func was called
	expired  // its own deadline passed
	byParent // its parent ended first
	phase    = 3

	doneMade = 4  // done holds the Done channel: read it without mu
	armed    = 8  // the timer was armed with the context's own deadline
	own      = 16 // the deadline is the context's own, not the parent's earlier one
	canEnd   = 32 // the parent can end, and was asked to tell the context
)

// A deadlineCtx is the context of all four functions: one allocation
// holding its timer. Its method value stop is the timer's callback, the
// CancelFunc, and what the parent calls at its end. The state is set
// with mu held (or before the context is shared) and read without it.
type deadlineCtx struct {
	parent   context.Context
	h        *timingwheel.Hierarchy
	deadline time.Time // if own
	t        timingwheel.Timer
	state    atomic.Uint32
	mu       sync.Mutex
	done     chan struct{} // made by the first Done
	kids     *afterNode    // funcs to call at the end: AfterFunc's
	unwatch  func() bool   // undoes the registration with the parent
	cause    error         // the Cause after the deadline, if not nil
	// inner, if not nil, is what Value asks once the context has ended: a
	// context.WithCancelCause context over parentValues{c}, made and
	// cancelled with the context's cause when it ends by its deadline (see
	// keepCause), so that context.Cause finds that cause. Written before
	// the end is stored in state, and read only after state shows it.
	inner context.Context
}

// parentValues is what a deadlineCtx's inner context is made over: the
// parent's values, and no end, as [context.WithoutCancel] of the parent
// (whose Cause is nil: no cause of an ancestor shows through it), so that
// [context.WithCancelCause] registers nothing with it. One pointer wide, it
// is not allocated as an interface: WithoutCancel's would be (16 bytes).
type parentValues struct{ c *deadlineCtx }

func (parentValues) Deadline() (time.Time, bool) { return time.Time{}, false }
func (parentValues) Done() <-chan struct{}       { return nil }
func (parentValues) Err() error                  { return nil }
func (v parentValues) Value(key any) any         { return v.c.parent.Value(key) }

// An afterNode is one func registered with AfterFunc, in a list.
type afterNode struct {
	f          func()
	next, prev *afterNode
}

// closedchan is the Done channel of a context done before Done was called.
var closedchan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// afterFuncer is a context with the AfterFunc method that
// [context.AfterFunc] uses in place of its own registration.
type afterFuncer interface {
	AfterFunc(func()) func() bool
}

// newCtx makes the context of method: its deadline is deadline, or, if
// rel, h's clock reading plus d.
func newCtx(method string, h *timingwheel.Hierarchy, parent context.Context, d time.Duration, deadline time.Time, rel bool, cause error) (context.Context, context.CancelFunc) {
	if h == nil {
		panic("wheelctx: " + method + " called with a nil Hierarchy")
	}
	if parent == nil {
		panic("wheelctx: " + method + " called with a nil parent context")
	}
	now := h.Now()
	if rel {
		deadline = now.Add(d)
	}
	c := &deadlineCtx{parent: parent, h: h, cause: cause}
	st := uint32(own)
	if cur, ok := parent.Deadline(); ok && cur.Before(deadline) {
		st = 0 // the parent's deadline comes first: the parent enforces it
	} else {
		c.deadline = deadline
	}
	if _, ours := parent.(*deadlineCtx); ours || parent.Done() != nil {
		st |= canEnd // (one of ours can end: its Done is not made for asking)
	}
	stop := c.stop // the context's one func value
	switch {
	case st&canEnd != 0 && parent.Err() != nil:
		c.endAtOnce(st|byParent, context.Cause(parent))
	case st&own != 0 && !deadline.After(now):
		c.endAtOnce(st|expired, c.expiredCause())
	default:
		if st&own != 0 {
			st |= armed
			c.t.Init(h, stop)
		}
		c.state.Store(st)
		if st&armed != 0 {
			c.t.ResetAt(deadline)
		}
		if st&canEnd != 0 {
			c.watch(stop)
		}
	}
	return c, stop
}

// endAtOnce ends c, not yet shared, as it is made.
func (c *deadlineCtx) endAtOnce(st uint32, cause error) {
	c.keepCause(st, st&phase)
	c.state.Store(st)
}

// keepCause makes the context that context.Cause finds on c's Value path
// once c ends (end; st is c's state before), cancelled with c's cause, where
// Cause needs it: after c's deadline, under a parent that can end (whose
// cancellation with a cause after the deadline would otherwise show
// through: package context's Cause reports the nearest cancelled cause) and
// for a Cause variant; after a cancel, for a Cause variant only. So a plain
// context that its cancel func ends first, the usual end of a request's,
// pays nothing for it (see WithDeadline for what that leaves). c.mu must be
// held, or c not yet shared; the caller stores the end in state after it.
func (c *deadlineCtx) keepCause(st, end uint32) {
	cause := context.Canceled
	switch {
	case end == expired && (c.cause != nil || st&canEnd != 0):
		cause = c.expiredCause()
	case end == canceled && c.cause != nil:
	default:
		return // Cause is Err, or the parent's cause, which shows through
	}
	var cancel context.CancelCauseFunc
	c.inner, cancel = context.WithCancelCause(parentValues{c})
	cancel(cause)
}

// expiredCause returns the cause of c's end by its deadline.
func (c *deadlineCtx) expiredCause() error {
	if c.cause != nil {
		return c.cause
	}
	return context.DeadlineExceeded
}

// watch asks c's parent, which can end, to call stop at its end.
func (c *deadlineCtx) watch(stop func()) {
	var unwatch func() bool
	if p, ok := c.parent.(afterFuncer); ok {
		unwatch = p.AfterFunc(stop) // ours among them: no goroutine
	} else {
		unwatch = context.AfterFunc(c.parent, stop)
	}
	c.mu.Lock()
	if c.state.Load()&phase == live {
		c.unwatch = unwatch
		unwatch = nil
	}
	c.mu.Unlock()
	if unwatch != nil {
		unwatch() // c ended meanwhile
	}
}

// stop is the timer's callback, the CancelFunc, and what the parent calls
// at its end. A parent that ended comes first (package context ends a
// child with its parent before the child's own cancel); otherwise, if the
// armed timer cannot be stopped, its callback has started: the deadline
// passed (every end stops the timer with mu held); otherwise the call is
// cancel's.
func (c *deadlineCtx) stop() {
	st := c.state.Load()
	if st&phase != live {
		return
	}
	// Ask the parent before taking mu: a parent of this package that
	// learns here that its own parent ended calls its kids, c among them.
	end := uint32(canceled)
	if st&canEnd != 0 && c.parent.Err() != nil {
		end = byParent
	}
	c.mu.Lock()
	if st = c.state.Load(); st&phase != live { // (doneMade may have changed)
		c.mu.Unlock()
		return
	}
	if st&armed != 0 && !c.t.Stop() && end == canceled {
		end = expired
	}
	c.keepCause(st, end) // before the state: once Err reports the end, Cause does too
	c.state.Store(st | end)
	if st&doneMade != 0 {
		close(c.done) // after the state: once Done is closed, Err reports the end
	}
	kids, unwatch := c.kids, c.unwatch
	c.kids, c.unwatch = nil, nil
	c.mu.Unlock()
	if unwatch != nil {
		unwatch()
	}
	// The list is c's alone now: unlink sees c ended and leaves it.
	for n := kids; n != nil; {
		next := n.next
		n.next, n.prev = nil, nil
		n.f()
		n = next
	}
}

// Deadline returns the time the context is done by: the earlier of the
// deadline it was made with and its parent's. ok is always true.
func (c *deadlineCtx) Deadline() (deadline time.Time, ok bool) {
	if c.state.Load()&own == 0 {
		return c.parent.Deadline()
	}
	return c.deadline, true
}

// Done returns a channel that is closed when the context is done, made by
// the first call, which also looks whether the parent ended (as Err does).
func (c *deadlineCtx) Done() <-chan struct{} {
	st := c.state.Load()
	if st&doneMade != 0 {
		return c.done
	}
	if st&(phase|canEnd) == canEnd && c.parent.Err() != nil {
		c.stop()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.state.Load(); st&doneMade == 0 {
		if st&phase == live {
			c.done = make(chan struct{})
		} else {
			c.done = closedchan
		}
		c.state.Or(doneMade)
	}
	return c.done
}

// Err returns nil while the context is live; then
// [context.DeadlineExceeded] if its deadline passed, [context.Canceled] if
// it was cancelled, or its parent's Err if the parent ended first (seen at
// once, before the parent's notification arrives). Once Err returns an
// error, Done is closed.
func (c *deadlineCtx) Err() error {
	st := c.state.Load()
	if st&phase == live {
		if st&canEnd == 0 || c.parent.Err() == nil {
			return nil
		}
		c.stop()
		st = c.state.Load()
	}
	if st&doneMade != 0 {
		<-c.done // closed by now, or in a moment: see stop
	}
	switch st & phase {
	case canceled:
		return context.Canceled
	case expired:
		return context.DeadlineExceeded
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	return context.Canceled // a broken parent that ended with no Err
}

// Value returns the parent's value for key (asked through the context
// kept for Cause, if there is one: see [WithDeadline]).
func (c *deadlineCtx) Value(key any) any {
	if st := c.state.Load(); (st&phase == expired || st&phase == canceled) && c.inner != nil {
		return c.inner.Value(key)
	}
	return c.parent.Value(key)
}

// AfterFunc arranges for f to be called once the context is done; stop
// reports whether it prevented that. [context.AfterFunc] and the contexts
// package context derives from this one use it, and so need no goroutine.
// Prefer context.AfterFunc: called directly, this method calls f on the
// goroutine that ends the context (cancel's caller, or the one advancing
// the hierarchy), so f must be quick and must not block. If the context
// is done already, f is called at once in a goroutine of its own.
func (c *deadlineCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.state.Load()&phase != live {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	n := &afterNode{f: f, next: c.kids}
	if c.kids != nil {
		c.kids.prev = n
	}
	c.kids = n
	c.mu.Unlock()
	return func() bool { return c.unlink(n) }
}

// unlink removes n from c's kids and reports whether it was there; false
// means c ended (n's func has run or is about to) or n was removed.
func (c *deadlineCtx) unlink(n *afterNode) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Load()&phase != live {
		return false
	}
	switch {
	case n.prev != nil:
		n.prev.next = n.next
	case c.kids == n:
		c.kids = n.next
	default:
		return false // removed already
	}
	if n.next != nil {
		n.next.prev = n.prev
	}
	n.next, n.prev = nil, nil
	return true
}

// String describes the context for debugging, as package context's do:
// "<parent>.WithDeadline(<deadline> [<left>])", or "<parent>.WithCancel"
// when the parent's deadline is the earlier one.
func (c *deadlineCtx) String() string {
	var name string
	if s, ok := c.parent.(fmt.Stringer); ok {
		name = s.String()
	} else {
		name = fmt.Sprintf("%T", c.parent)
	}
	if c.state.Load()&own == 0 {
		return name + ".WithCancel"
	}
	return name + ".WithDeadline(" + c.deadline.String() + " [" + c.deadline.Sub(c.h.Now()).String() + "])"
}
