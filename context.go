package timingwheel

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
)

// WithTimeout returns WithDeadline(parent, h.Now().Add(d)).
//
// Cancelling the context releases its timer at once, so code should call
// cancel as soon as the work done under the context completes:
//
//	ctx, cancel := h.WithTimeout(r.Context(), 200*time.Millisecond)
//	defer cancel()
func (h *Hierarchy) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return h.withTimeout("WithTimeout", parent, d, nil)
}

// WithTimeoutCause is like [Hierarchy.WithTimeout] but also sets the cause
// of the returned context when the timeout expires: after it, Err returns
// [context.DeadlineExceeded] and [context.Cause] returns cause, as with
// [context.WithTimeoutCause]. The returned [context.CancelFunc] does not
// set the cause: after cancel, Cause is [context.Canceled].
func (h *Hierarchy) WithTimeoutCause(parent context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	return h.withTimeout("WithTimeoutCause", parent, d, cause)
}

func (h *Hierarchy) withTimeout(method string, parent context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	h.mustBeMade(method)
	e := h.elapsed()
	w := e + int64(d)
	if (w > e) != (d > 0) || clampDeadline(w) != w {
		// e+d overflows, or is clamped: the deadline is the reading plus
		// d, as time.Time.Add has it, and w saturates.
		return h.withDeadline(method, parent, h.origin.Add(time.Duration(e)).Add(d), false, clampDeadline(satAdd(e, int64(d))), e, cause)
	}
	// The deadline is h.origin.Add(w): the same Time as the reading plus d
	// when e+d does not overflow, made only if needed.
	return h.withDeadline(method, parent, time.Time{}, true, clampDeadline(w), e, cause)
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
// it (with a [clock.Mock], on the first [Hierarchy.Advance] whose clock has
// reached deadline rounded up to the tick). So h must be driven, by
// [Hierarchy.Start] or the caller's own Advance loop (on the default clock,
// the first timer armed starts the driver unless the caller drives; see
// [New]). A deadline that h's
// clock has already reached returns a context that is done at once, with
// no timer armed. Contexts derived from the returned one by the functions
// of package context report DeadlineExceeded too when its deadline passes.
//
// Creating a context costs two allocations (the context, which holds its
// timer, and its cancel func), one more when Done is first called. The
// context asks its parent to tell it of its end only once something waits
// for it (Done, an AfterFunc, a derived context); until then Err asks the
// parent, so a context that is only checked with Err costs its parent
// nothing. The exception is a parent of another package with an AfterFunc
// method of its own, which package context tells of a context as it is
// made, and so is this one (one more allocation than [context.AfterFunc]'s
// under it). Registering costs one allocation under a context of these
// methods, and one more than [context.AfterFunc]'s under other parents,
// except that the
// contexts under one parent of package context that wait share one
// registration per shard of h, made by the second of them: a request whose
// calls each get a deadline under the request's context pays package
// context's registration once, not per call. A shared registration that no
// context used between two garbage collections is undone, so a parent
// dropped without being cancelled is kept two collections at most.
//
// When parent is [context.Background], [context.TODO], a context of
// package context or one of these methods, no goroutine is started per
// context.
//
// Cancelling stops the timer and unregisters the context from its parent
// at once: the hierarchy keeps no reference to a cancelled context.
// Calling cancel again does nothing.
//
// Two things differ from package context's own contexts, both of package
// context's making. A context it derives from the returned one (a
// context.WithCancel of it) learns of its end through its AfterFunc
// method: its Err and Done are set a moment after the end, not at once as
// the returned context's own are. And its String does not name the
// returned one: package context wraps a parent of another package in a
// type of its own without a String method, so fmt prints
// "context.stopCtx.WithCancel" where package context's chain would read
// "context.Background.WithDeadline(...).WithCancel".
//
// WithDeadline panics if parent is nil, as [context.WithDeadline] does.
func (h *Hierarchy) WithDeadline(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	return h.withDeadlineAt("WithDeadline", parent, deadline, nil)
}

// WithDeadlineCause is like [Hierarchy.WithDeadline] but also sets the
// cause of the returned context when the deadline is exceeded: after it,
// Err returns [context.DeadlineExceeded] and [context.Cause] returns
// cause, as with [context.WithDeadlineCause]. The returned
// [context.CancelFunc] does not set the cause: after cancel, Cause is
// [context.Canceled].
func (h *Hierarchy) WithDeadlineCause(parent context.Context, deadline time.Time, cause error) (context.Context, context.CancelFunc) {
	return h.withDeadlineAt("WithDeadlineCause", parent, deadline, cause)
}

func (h *Hierarchy) withDeadlineAt(method string, parent context.Context, deadline time.Time, cause error) (context.Context, context.CancelFunc) {
	h.mustBeMade(method)
	w := h.offset(deadline)
	return h.withDeadline(method, parent, deadline, deadline == h.origin.Add(time.Duration(w)), w, h.elapsed(), cause)
}

// The state word of a deadlineCtx: its phase, which leaves ctxLive once,
// and flags.
const (
	ctxLive     = iota
	ctxCanceled // its cancel func was called
	ctxExpired  // its own deadline passed
	ctxParent   // its parent was done first
	ctxPhase    = 3

	ctxDone    = 4  // the done field holds the Done channel: read it without mu
	ctxArmed   = 8  // the timer was armed with the deadline (set when made, as are the next two)
	ctxWatched = 16 // the parent can be done (see watchLocked)
	ctxOwn     = 32 // the deadline is the context's own, not the parent's earlier one
	ctxShared  = 64 // registered in its shard's watch of the parent (watchSharedLocked)
)

// A deadlineCtx is the context of WithDeadline and WithTimeout: one
// allocation holding its timer, plus fn, the method value c.stop, which is
// the timer's callback, the CancelFunc, and what the parent calls when it
// is done. Err and Cause follow from the state and the parent. The state,
// done and links change with mu held; the state is read without it.
//
// It is 96 bytes, a size class of its own: what only some contexts need
// (kids, a registration of their own) lives in links, made when first
// needed, and a registration in a shared watch is a flag (ctxShared), as
// the watch is found again by the parent's Done channel. Measured at 112
// bytes, every context costs about 10% more CPU (allocation and garbage
// collection) with 10^6 runtime timers live.
type deadlineCtx struct {
	t      Timer // armed with the deadline, if it is the context's own
	parent context.Context
	mu     sync.Mutex
	state  uint32        // set by the composite literal, then through sync/atomic's functions
	widx   uint32        // c's index in its parentWatch's kids, guarded by the watch's shard's lock
	done   chan struct{} // made by the first Done
	links  *ctxLinks     // made by the first kid or registration of c's own
}

// ctxLinks holds what a deadlineCtx c needs once it has kids or registers
// with its parent on its own (watchLocked), unless it joined a shared
// watch: one allocation for both.
type ctxLinks struct {
	kids *afterNode // funcs to call when done: kids of this type, and AfterFunc's
	// up is c's entry among the kids of p, when its parent is (or wraps)
	// the deadlineCtx p.
	up afterNode
	p  *deadlineCtx
	// stop is context.AfterFunc's, for c.fn() under any other parent.
	stop func() bool
}

// A deadlineCtxAt keeps its deadline beside its timer: WithDeadline's, the
// parent's earlier one, or one that was not armed (done at once). A plain
// deadlineCtx (WithTimeout's) reads it from the timer.
type deadlineCtxAt struct {
	deadlineCtx
	deadline time.Time
}

// A deadlineCtxCause is the context of WithTimeoutCause and
// WithDeadlineCause.
type deadlineCtxCause struct {
	deadlineCtxAt
	cause error
	// ended is endedCtx's context for c once the deadline passed, made by
	// the first look-up that needs it (see Value). Guarded by mu.
	ended context.Context
}

// An afterNode is one func to call when a deadlineCtx is done, in a list
// of them. A node is linked when it is the head of its list or has a prev.
type afterNode struct {
	next, prev *afterNode
	f          func()
}

// closedchan is the Done channel of a context done before Done was called.
var closedchan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// deadlineCtxKey is the key under which a deadlineCtx returns itself from
// Value, so that one under a wrapper (context.WithValue) is found too.
type deadlineCtxKey struct{}

// withDeadline makes the context: its deadline is w in ns since the
// origin, and at as a Time, which, if exact, is h.origin.Add(w), made only
// if needed. e is the clock's reading; cause, if not nil, the Cause once
// the deadline passes.
func (h *Hierarchy) withDeadline(method string, parent context.Context, at time.Time, exact bool, w, e int64, cause error) (context.Context, context.CancelFunc) {
	if parent == nil {
		panic("timingwheel: " + method + " called with a nil parent context")
	}
	own := true
	if cur, ok := parent.Deadline(); ok {
		if exact {
			at = h.origin.Add(time.Duration(w))
		}
		if cur.Before(at) {
			// The parent's deadline comes first: the parent enforces it,
			// and this context needs no timer (context.WithDeadline
			// returns a WithCancel context then).
			at, own, exact = cur, false, false
		}
	}
	st, watched := uint32(ctxLive), false
	if own && w <= e {
		// Done at once: nothing to arm, nor to register with the parent.
		// A parent that is done already wins, as with context.WithDeadline.
		st = ctxExpired
		if parent.Err() != nil {
			st = ctxParent
		}
	} else if watched = canEnd(parent); watched && parent.Err() != nil {
		st = ctxParent
	}
	if own {
		st |= ctxOwn
		if st&ctxPhase == ctxLive {
			st |= ctxArmed
		}
	}
	if watched {
		st |= ctxWatched
	}
	var c *deadlineCtx
	var ctx context.Context
	if exact && st&ctxArmed != 0 && cause == nil {
		c = &deadlineCtx{parent: parent, state: st} // its deadline is its timer's
		ctx = c
	} else {
		if exact {
			at = h.origin.Add(time.Duration(w))
		}
		if cause == nil {
			x := &deadlineCtxAt{deadlineCtx{parent: parent, state: st}, at}
			c, ctx = &x.deadlineCtx, x
		} else {
			x := &deadlineCtxCause{deadlineCtxAt: deadlineCtxAt{deadlineCtx{parent: parent, state: st}, at}, cause: cause}
			c, ctx = &x.deadlineCtx, x
		}
	}
	stop := c.stop // the context's one func value: its timer keeps it (see fn)
	if st&ctxArmed != 0 {
		h.armNew(&c.t, stop, w) // one hold of a shard's lock
	} else {
		c.t.Init(h, stop) // String reads h from it, also when unarmed
	}
	if st&ctxWatched != 0 && st&ctxPhase == ctxLive {
		if _, ok := parent.(afterFuncer); ok && ownCtx(parent) == nil {
			// A parent of another package with an AfterFunc method is
			// told of c at once, as package context tells it of its
			// children: it may tell of its end only to what registered
			// before it ended, and a parent's end then stops c's timer.
			c.mu.Lock()
			if c.registerLocked() {
				c.mu.Unlock()
			}
		}
	}
	return ctx, stop
}

// canEnd reports whether parent can be done (one of ours: without making
// its Done channel).
func canEnd(parent context.Context) bool {
	return ownCtx(parent) != nil || parent.Done() != nil
}

// fn returns c.stop as the func value made once by withDeadline: the
// callback of c's timer, which keeps it, so that the context does not
// keep it a second time.
func (c *deadlineCtx) fn() func() { return c.t.callback() }

// load returns c's state.
func (c *deadlineCtx) load() uint32 { return atomic.LoadUint32(&c.state) }

// phase returns c's state without its flags.
func (c *deadlineCtx) phase() uint32 { return c.load() & ctxPhase }

// linksLocked returns c's links, making them if needed. c.mu is held.
func (c *deadlineCtx) linksLocked() *ctxLinks {
	if c.links == nil {
		c.links = &ctxLinks{}
	}
	return c.links
}

// registeredLocked reports whether c registered with its parent. c.mu is
// held.
func (c *deadlineCtx) registeredLocked() bool {
	return c.load()&ctxShared != 0 || c.links != nil && (c.links.p != nil || c.links.stop != nil)
}

// watchLocked asks c's parent, if it can be done, to tell c when it is,
// unless it was asked already; until then c asks the parent itself (Err,
// stop). It reports false if the parent is done already. c.mu is held and
// c is live.
func (c *deadlineCtx) watchLocked() bool {
	if c.load()&ctxWatched == 0 || c.registeredLocked() {
		return true
	}
	parent := c.parent
	if p := ownCtx(parent); p != nil {
		return c.linkUpLocked(p)
	}
	done := parent.Done()
	select {
	case <-done:
		return false
	default:
	}
	if p, ok := parent.Value(deadlineCtxKey{}).(*deadlineCtx); ok && p.Done() == done {
		// parent wraps a deadlineCtx without changing when it is done.
		return c.linkUpLocked(p)
	}
	// A parent with an AfterFunc method of its own is told of c alone, as
	// context.AfterFunc would (see there). Any other parent, package
	// context's among them, costs a context in its children (or a
	// goroutine) per registration: the contexts under parents of one Done
	// channel share one per shard, from the second one on.
	if _, ok := parent.(afterFuncer); !ok && c.watchSharedLocked(done) {
		return true
	}
	// context.AfterFunc registers c.fn() among the children of a parent of
	// package context, or with the parent's AfterFunc method; otherwise it
	// starts a goroutine that waits, as context.WithDeadline would. It
	// never calls c.fn() before it returns, so c.mu may be held.
	c.linksLocked().stop = context.AfterFunc(parent, c.fn())
	return true
}

// afterFuncer is a context with the AfterFunc method that
// [context.AfterFunc] uses in place of its own registration.
type afterFuncer interface {
	AfterFunc(func()) func() bool
}

// ownCtx returns the deadlineCtx that parent is, if it is one.
func ownCtx(parent context.Context) *deadlineCtx {
	switch p := parent.(type) {
	case *deadlineCtx:
		return p
	case *deadlineCtxAt:
		return &p.deadlineCtx
	case *deadlineCtxCause:
		return &p.deadlineCtx
	}
	return nil
}

// linkUpLocked makes c a kid of p, unless p is done: then it reports
// false. c.mu is held; it takes p.mu (always in that order: a kid's lock,
// then its parent's), and has p watch its own parent first.
func (c *deadlineCtx) linkUpLocked(p *deadlineCtx) bool {
	p.mu.Lock()
	if !p.registerLocked() {
		return false
	}
	if p.phase() != ctxLive {
		p.mu.Unlock()
		return false
	}
	l := c.linksLocked()
	l.up.f, l.p = c.fn(), p
	pushNode(&p.linksLocked().kids, &l.up)
	p.mu.Unlock()
	return true
}

// stop is c.fn(): the callback of c's timer, the CancelFunc, and what c's
// parent calls once it is done. A parent that is done comes first (package
// context propagates a parent's end before its children's own cancel);
// otherwise, if c's armed timer cannot be stopped, its callback has
// started: the deadline passed (every end stops the timer with c.mu held
// and ends c before letting it go); otherwise the call is cancel's.
func (c *deadlineCtx) stop() {
	st := c.load()
	if st&ctxPhase != ctxLive {
		return
	}
	// Ask the parent before taking c.mu: a parent of this package that
	// learns here that its own parent is done ends, and calls its kids,
	// c among them.
	end := uint32(ctxCanceled)
	if st&ctxWatched != 0 && c.parent.Err() != nil {
		end = ctxParent
	}
	c.mu.Lock()
	if c.phase() != ctxLive {
		c.mu.Unlock()
		return
	}
	c.endLocked(end)
}

// endLocked ends c, which is live, by end (ctxExpired if its timer turns
// out to have fired): it stops the timer, records the end, closes Done and
// lets c.mu go; then it undoes c's registration with its parent and calls
// the funcs of c's kids on this goroutine. c.mu is held.
func (c *deadlineCtx) endLocked(end uint32) {
	st := c.load()
	if st&ctxArmed != 0 && !c.t.Stop() && end == ctxCanceled {
		end = ctxExpired
	}
	atomic.StoreUint32(&c.state, st|end)
	// The state first: Done closes once Err reports the end, never
	// before (Err waits for the close, which follows at once).
	if st&ctxDone != 0 {
		close(c.done)
	}
	links := c.links
	if links != nil {
		c.links = nil
	}
	c.mu.Unlock()
	// A parent that is done may not have dropped c yet (its end reaches c
	// on another goroutine): undo the registration whatever the end, so
	// that cancel returns with none left.
	if st&ctxShared != 0 {
		c.leaveWatch()
	}
	if links == nil {
		return
	}
	if links.p != nil {
		links.p.unlink(&links.up)
	} else if links.stop != nil {
		links.stop()
	}
	// The list is c's alone now: unlink and AfterFunc see c done and leave
	// it alone.
	callNodes(links.kids)
}

// unlink removes n from c's kids and reports whether it was there; false
// means c is done (n's func has run or is about to) or n was removed.
func (c *deadlineCtx) unlink(n *afterNode) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phase() != ctxLive {
		return false
	}
	return removeNode(&c.links.kids, n) // c has links: n was pushed there
}

// pushNode adds n to the list at *head.
func pushNode(head **afterNode, n *afterNode) {
	n.prev, n.next = nil, *head
	if *head != nil {
		(*head).prev = n
	}
	*head = n
}

// removeNode takes n out of the list at *head and reports whether it was
// there.
func removeNode(head **afterNode, n *afterNode) bool {
	switch {
	case n.prev != nil:
		n.prev.next = n.next
	case *head == n:
		*head = n.next
	default:
		return false
	}
	if n.next != nil {
		n.next.prev = n.prev
	}
	n.next, n.prev = nil, nil
	return true
}

// callNodes calls the funcs of a list that is no longer reachable from
// its owner, clearing the links as it goes, so that a node kept by
// someone does not keep its neighbours.
func callNodes(n *afterNode) {
	for n != nil {
		next := n.next
		n.next, n.prev = nil, nil
		n.f()
		n = next
	}
}

// Deadline returns the time the context is done by: the earlier of the
// deadline it was made with and its parent's. ok is always true.
func (c *deadlineCtx) Deadline() (deadline time.Time, ok bool) {
	// The timer's deadline: armNew stored it before c was returned, and
	// nothing changes it after, as c's timer is never re-armed.
	return c.t.home().h.origin.Add(time.Duration(c.t.fixedDeadlineNs())), true
}

// Deadline returns the time the context is done by, as
// [deadlineCtx.Deadline] does.
func (c *deadlineCtxAt) Deadline() (deadline time.Time, ok bool) {
	return c.deadline, true
}

// Done returns a channel that is closed when the context is done, made by
// the first call, which also asks the parent to tell the context of its
// end (until then Err asks the parent itself).
func (c *deadlineCtx) Done() <-chan struct{} {
	if c.load()&ctxDone != 0 {
		return c.done
	}
	c.mu.Lock()
	if c.load()&ctxDone == 0 {
		if !c.registerLocked() {
			c.mu.Lock()
		}
		if c.phase() == ctxLive {
			c.done = make(chan struct{})
		} else {
			c.done = closedchan
		}
		atomic.OrUint32(&c.state, ctxDone)
	}
	c.mu.Unlock()
	return c.done
}

// registerLocked has c's parent watch c (watchLocked) if c is live. If
// the parent is done already, c ends by it, and registerLocked returns
// false with c.mu let go. c.mu is held.
func (c *deadlineCtx) registerLocked() bool {
	if c.phase() == ctxLive && !c.watchLocked() {
		c.endLocked(ctxParent)
		return false
	}
	return true
}

// Err returns nil while the context is live; then
// [context.DeadlineExceeded] if its deadline passed, [context.Canceled] if
// it was cancelled, or its parent's Err if the parent was done first (seen
// at once, without waiting for the parent to tell). Once Err returns an
// error, Done is closed.
func (c *deadlineCtx) Err() error {
	st := c.load()
	if st&ctxPhase == ctxLive {
		if st&ctxWatched == 0 || c.parent.Err() == nil {
			return nil
		}
		c.stop()
		st = c.load()
	}
	if st&ctxDone != 0 {
		<-c.done // closed by now, or in a moment: see endLocked
	}
	switch st & ctxPhase {
	case ctxCanceled:
		return context.Canceled
	case ctxExpired:
		return context.DeadlineExceeded
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	return context.Canceled // a broken parent that is done with no Err
}

// Value returns the parent's value for key; once the context has ended by
// its own deadline or cancel, endedCtx's (see there).
func (c *deadlineCtx) Value(key any) any {
	if key == (deadlineCtxKey{}) {
		return c
	}
	v := c.parent.Value(key)
	if _, isCtx := v.(context.Context); isCtx {
		if st := c.phase(); st == ctxCanceled || st == ctxExpired {
			return endedCtx(c.parent, endErr(st)).Value(key)
		}
	}
	return v
}

// Value returns the parent's value for key, as [deadlineCtx.Value] does;
// once its deadline has passed, that of a context of package context
// ended with its cause (see endedCtx), made by the first look-up after.
func (c *deadlineCtxCause) Value(key any) any {
	if key == (deadlineCtxKey{}) || c.phase() != ctxExpired {
		return c.deadlineCtx.Value(key)
	}
	c.mu.Lock()
	if c.ended == nil {
		c.ended = endedCtx(c.parent, c.cause)
	}
	ended := c.ended
	c.mu.Unlock()
	return ended.Value(key)
}

// endErr returns the error of the end st, ctxCanceled or ctxExpired.
func endErr(st uint32) error {
	if st == ctxExpired {
		return context.DeadlineExceeded
	}
	return context.Canceled
}

// endedCtx returns a context of package context with parent's values,
// cancelled with cause: what a context that ended by its own deadline or
// cancel answers Value with, where the parent's answer is a context.
//
// [context.Cause] of a context that is not package context's, and the
// contexts package context derives from it, take their cause from the
// parent's values: forwarded unchanged, they would report the cause of an
// ancestor that has not ended (none) instead of this context's. Package
// context documents how a cancelled WithCancelCause context reports its
// cause, and that WithoutCancel keeps its parent's values; so the values
// asked of an ended context go to such a context, made when asked. Only a
// value that is a context is asked again (a value that is not one is the
// same either way, and nil is right: Cause is then Err), so a look-up
// allocates only where Cause's could be the one made, after the end. The
// Cause variants, whose Cause after the deadline is their cause, ask the
// context they keep for it for every value after the deadline.
func endedCtx(parent context.Context, cause error) context.Context {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	cancel(cause)
	return ctx
}

// AfterFunc arranges for f to be called once the context is done; stop
// reports whether it prevented that. [context.AfterFunc] and the contexts
// package context derives from this one use it, and so need no goroutine.
// Prefer context.AfterFunc: called directly, this method calls f on the
// goroutine that ends the context (cancel's caller, or the one advancing
// h), so f must be quick and must not block. If the context is done
// already, f is called at once in a goroutine of its own.
func (c *deadlineCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if !c.registerLocked() {
		c.mu.Lock()
	}
	if c.phase() != ctxLive {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	n := &afterNode{f: f}
	pushNode(&c.linksLocked().kids, n)
	c.mu.Unlock()
	return func() bool { return c.unlink(n) }
}

// String describes the context for debugging, in the form of
// [context.WithDeadline]'s, or [context.WithCancel]'s when the parent's
// deadline is the earlier one.
func (c *deadlineCtx) String() string {
	dl, _ := c.Deadline()
	return c.describe(dl)
}

// String describes the context as [deadlineCtx.String] does.
func (c *deadlineCtxAt) String() string { return c.describe(c.deadline) }

func (c *deadlineCtx) describe(dl time.Time) string {
	name := contextName(c.parent)
	if c.load()&ctxOwn == 0 {
		return name + ".WithCancel"
	}
	return name + ".WithDeadline(" + dl.String() + " [" + dl.Sub(c.t.home().h.Now()).String() + "])"
}

// contextName names a context as package context does: by its String
// method, or else by its type.
func contextName(c context.Context) string {
	if s, ok := c.(fmt.Stringer); ok {
		return s.String()
	}
	return reflect.TypeOf(c).String()
}
