package timingwheel

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// WithTimeout returns WithDeadline(parent, h.Now().Add(d)).
//
// Cancelling the context releases its timer at once, so code should call
// cancel as soon as the work done under the context completes:
//
//	ctx, cancel := h.WithTimeout(r.Context(), 200*time.Millisecond)
//	defer cancel()
func (h *Hierarchy) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	h.mustBeMade("WithTimeout")
	e := h.elapsed()
	w := e + int64(d)
	if (w > e) != (d > 0) {
		// e+d overflows: the deadline is the reading plus d, as
		// time.Time.Add has it, and w saturates.
		return h.withDeadline("WithTimeout", parent, h.origin.Add(time.Duration(e)).Add(d), false, clampDeadline(satAdd(e, int64(d))), e)
	}
	// The deadline is h.origin.Add(w): the same Time as the reading plus d
	// when e+d does not overflow, made only if needed.
	return h.withDeadline("WithTimeout", parent, time.Time{}, true, clampDeadline(w), e)
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
// [Hierarchy.Start] or the caller's own Advance loop. A deadline that h's
// clock has already reached returns a context that is done at once, with
// no timer armed. Contexts derived from the returned one by the functions
// of package context report DeadlineExceeded too when its deadline passes.
//
// The context holds its timer by value and is its own cancel func:
// creating one costs one allocation, one more when Done is first called.
// Once something waits for the context, registering it with its parent
// costs one more under a context returned by these methods (its entry in
// the parent's list), none under a parent of package context whose
// registration it shares (below), and the two of [context.AfterFunc] for
// the first context that waits under such a parent, as one alone under its
// parent should, or under a parent of another kind. It asks a parent that can be done to tell it of its end only
// once something waits for the context (its Done is called, an AfterFunc
// or a derived context is registered with it); until then Err asks the
// parent, so a parent's end reaches the context either way, and a context
// that is only checked with Err costs its parent nothing.
//
// When parent is [context.Background], [context.TODO], a context of
// package context or one returned by these methods, no goroutine is
// started per context. The contexts under one parent of package context
// that wait share one registration with it per shard of h, made by the
// second of them and kept while it is in use: each joins and leaves its
// list with no lock of the parent and no allocation, so a request whose
// calls each get a deadline under the request's context pays package
// context's registration once, not per call. When that parent ends,
// package context starts one goroutine that ends them all. Neither h nor
// the registration keeps the other alive: a parent dropped without being
// cancelled is freed as usual, and so is a hierarchy dropped while a parent
// it registered with lives on (the registration is undone once no context
// has used it since a garbage collection).
//
// Cancelling stops the timer and unregisters the context from its parent
// at once: the hierarchy keeps no reference to a cancelled context.
// Calling cancel again does nothing.
//
// WithDeadline panics if parent is nil, as [context.WithDeadline] does.
func (h *Hierarchy) WithDeadline(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	h.mustBeMade("WithDeadline")
	w := h.offset(deadline)
	return h.withDeadline("WithDeadline", parent, deadline, deadline == h.origin.Add(time.Duration(w)), w, h.elapsed())
}

// States of a deadlineCtx, in the low bits of its state word.
const (
	ctxLive     = iota
	ctxCanceled // its cancel func was called
	ctxExpired  // its own deadline passed
	ctxParent   // its parent was done first

	ctxPhase = 3 // the bits that hold one of the states above
	// ctxDone is set in the state word, with mu held, once the done
	// field holds the context's Done channel: a reader that sees it may
	// read the field without the lock.
	ctxDone = 4
	// ctxHasAt is set when the context is made, before it is returned,
	// if it is a deadlineCtxAt: its deadline is not its timer's.
	ctxHasAt = 8
	// ctxOwn, ctxArmed and ctxWatched are set when the context is made:
	// its deadline is its own, not the parent's earlier one; its timer
	// was armed; its parent can be done (see watchLocked).
	ctxOwn     = 16
	ctxArmed   = 32
	ctxWatched = 64
	// The two bits at ctxRegShift hold the kind of registration with the
	// parent that c.up holds (regNone until watchLocked registers c, with
	// mu held, once).
	ctxRegShift = 7
	// ctxKids is set, with mu held and c live (see claimLocked), before
	// c's first kid is linked (a func of AfterFunc's, a context of this
	// package under c): from then on c ends with mu held, so that its end
	// takes the whole list. Until then c ends without mu, with a
	// compare-and-swap of its state (see stop).
	ctxKids = 1 << 9
)

// How a context ends. Its phase leaves ctxLive once, by a compare-and-swap
// of the state word that finds it live: whoever makes it has ended the
// context, and does what the end leaves to do (see ended) as the state it
// replaced tells. So what else may come to depend on the end, a Done
// channel or a registration with the parent, is set up first, under mu,
// and then published by a compare-and-swap that adds its bit (ctxDone,
// the kind at ctxRegShift) to a live state (see publishLocked): an end
// then sees the bit and the field it tells of; or the publishing finds
// the context ended, and undoes what it set up. The kids list, which
// changes after it is set up, is read by an end with mu held.

// A deadlineCtx is the context of WithDeadline and WithTimeout: one
// allocation holding its timer and everything else (a deadlineCtxAt when
// the deadline is not the timer's), and which is also t.f, the single
// func value that serves as the timer's callback, as the CancelFunc
// returned to the caller, and as the func its parent calls when it is done
// (see stop and setStopFunc). Err and Cause are not stored: they follow from
// the state and the parent. The fields fill the 128-byte size class: what
// only some contexts need (the entry among a parent's kids, a deadline
// that is not the timer's) is allocated when needed.
type deadlineCtx struct {
	// fm and self make c a func value of its own, that calls c.stop: see
	// setStopFunc. Set when c is made, and not changed after.
	fm   uintptr
	self *deadlineCtx

	t      Timer // armed with the deadline, when the deadline is the context's own; t.f is c.stop
	parent context.Context

	mu sync.Mutex // serializes setting up done and the registration with the parent (see publishLocked); guards the kids list
	// state holds a ctx constant (its phase), which leaves ctxLive once,
	// by a compare-and-swap, before done is closed (see "How a context
	// ends"); the bits ctxDone and ctxKids; the flags set when c is made;
	// and the kind of c's registration. After c is made, its writers but
	// an end without mu (stop, while ctxKids is clear) hold mu.
	state atomic.Uint32
	// widx is c's index in the kids of the parentWatch it is registered
	// with, if it is (regWatch). Guarded by that watch's shard's lock.
	widx uint32
	done chan struct{} // made by the first Done; set once, see ctxDone
	kids *afterNode    // funcs to call when done: kids of this type, and AfterFunc's
	// up is c's registration with its parent, by kind (see reg): regNode,
	// an *upNode, c's entry in the kids of the deadlineCtx that is or is
	// under the parent; regWatch, the *parentWatch c is a kid of; regFunc,
	// the stop func of context.AfterFunc(parent, c.stop), as the one word
	// a func value is. The parent is asked to tell c only once something
	// could wait for c (Done, AfterFunc, a kid: see watchLocked).
	up unsafe.Pointer
}

// Kinds of registration with the parent: see deadlineCtx.up.
const (
	regNone = iota
	regNode
	regWatch
	regFunc
)

// reg returns the kind of c's registration with its parent.
func (c *deadlineCtx) reg() uint32 {
	return c.state.Load() >> ctxRegShift & 3
}

// setRegLocked records c's registration with its parent, up of kind k,
// made by the caller; if c has ended meanwhile, by an end that did not
// see it, setRegLocked undoes it. c.mu is held, and no lock that undoing
// takes: a parent's of this package, or the shard's of a watch.
func (c *deadlineCtx) setRegLocked(up unsafe.Pointer, k uint32) {
	c.up = up
	if !c.publishLocked(k << ctxRegShift) {
		c.unregister(k<<ctxRegShift, false)
	}
}

// publishLocked adds bits to c's state if c is live, and reports whether
// it did: if not, c has ended without seeing what they tell of. c.mu is
// held, so the only change to the state another goroutine can make
// meanwhile is an end by stop (see ctxKids).
func (c *deadlineCtx) publishLocked(bits uint32) bool {
	for {
		st := c.state.Load()
		if st&ctxPhase != ctxLive {
			return false
		}
		if c.state.CompareAndSwap(st, st|bits) {
			return true
		}
	}
}

// An upNode is a context's entry in the kids of its parent p, a
// deadlineCtx: one allocation, from which the context takes itself out.
type upNode struct {
	afterNode
	p *deadlineCtx
}

// A deadlineCtxAt is a deadlineCtx with room for its deadline, for one
// whose deadline is not its timer's: set by WithDeadline, the parent's
// earlier one, or one whose timer was not armed (done at once). Its state
// has ctxHasAt. A deadlineCtx whose deadline is its timer's (c.t armed
// with it, and h.origin.Add of its ns since the origin the same Time:
// WithTimeout's, usually) reads it from the timer.
type deadlineCtxAt struct {
	deadlineCtx
	deadline time.Time
}

// An afterNode is one func to call when a deadlineCtx is done, in a list
// of them. A node is linked when it is the head of its list or has a prev.
type afterNode struct {
	next, prev *afterNode
	f          func()
}

// closedchan is the Done channel of a context that was done before Done
// was first called.
var closedchan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// deadlineCtxKey is the key under which a deadlineCtx returns itself from
// Value, so that one under a wrapper (context.WithValue) is found too.
type deadlineCtxKey struct{}

// cancelCtxKey is the key under which the context package's own
// cancellable contexts return themselves from Value. context.Cause looks a
// context's cause up under it, through Value; a deadlineCtx that ended by
// its own deadline or cancel answers nil for it, so that Cause is its own
// Err and not the cause of an ancestor cancelled later. The key is
// unexported, so it is learnt by asking Cause about a context that
// records the key it is asked for. If a future Go looks causes up another
// way, the key stays nil and Cause falls back to that Go's own rules.
var cancelCtxKey = func() any {
	var key any
	context.Cause(keySpy{Context: context.Background(), key: &key})
	return key
}()

// keySpy is a done context that records the last key Value was asked for.
type keySpy struct {
	context.Context
	key *any
}

func (keySpy) Err() error { return context.Canceled }

func (s keySpy) Value(key any) any {
	*s.key = key
	return nil
}

// withDeadline makes the context of WithDeadline. Its deadline is w in
// ns since the origin, and at as a Time; if exact, at is h.origin.Add(w),
// and withDeadline makes it only if needed (at is not read). e is the
// clock's reading.
func (h *Hierarchy) withDeadline(method string, parent context.Context, at time.Time, exact bool, w, e int64) (context.Context, context.CancelFunc) {
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
	var flags uint32
	if own {
		flags |= ctxOwn
		if st == ctxLive {
			flags |= ctxArmed
		}
	}
	if watched {
		flags |= ctxWatched
	}
	var c *deadlineCtx
	if own && exact && st == ctxLive {
		c = &deadlineCtx{parent: parent} // its deadline is its timer's
	} else {
		if exact {
			at = h.origin.Add(time.Duration(w))
		}
		x := &deadlineCtxAt{deadline: at}
		c = &x.deadlineCtx
		c.parent = parent
		flags |= ctxHasAt
	}
	// c is new: no other goroutine can see it before it is returned or
	// armed, so a plain store does (arm's lock publishes it).
	*(*uint32)(unsafe.Pointer(&c.state)) = flags | st
	c.setStopFunc()
	if st != ctxLive {
		c.t.Init(h, c.t.f) // String reads h from it
		return c, c.t.f
	}
	if own {
		// c.t is new, and so is c: arm files it as AtFunc does a new
		// Timer, with a single look-up of the processor's shard.
		h.arm(&c.t, w, 0)
	}
	return c, c.t.f
}

// canEnd reports whether parent can be done.
func canEnd(parent context.Context) bool {
	if _, ok := parent.(*deadlineCtx); ok {
		return true // without making its Done channel
	}
	return parent.Done() != nil
}

// watchLocked asks c's parent, if it can be done, to tell c when it is,
// unless it was asked already: with no goroutine for parents of package
// context and of this one. Until then, c asks its parent when it needs to
// know (Err, stop): a context whose Done is never called, with no kids,
// costs its parent nothing. watchLocked reports false if the parent is
// done already. c.mu is held and c is live.
func (c *deadlineCtx) watchLocked() bool {
	if c.state.Load()&ctxWatched == 0 || c.reg() != regNone {
		return true
	}
	parent := c.parent
	if p, ok := parent.(*deadlineCtx); ok {
		return c.linkUpLocked(p)
	}
	done := parent.Done()
	select {
	case <-done:
		return false
	default:
	}
	if cc, ok := stdCancelCtx(parent, done); ok {
		// parent is, or wraps, a cancelCtx of package context that is done
		// when it is (and so no deadlineCtx, whose Done is its own).
		if s := c.t.home(); s != nil && c.watchSharedLocked(s, cc) {
			return true
		}
	} else if p, ok := parent.Value(deadlineCtxKey{}).(*deadlineCtx); ok && p.Done() == done {
		// parent wraps a deadlineCtx without changing when it is done.
		return c.linkUpLocked(p)
	}
	// A context of package context, or another kind: context.AfterFunc
	// registers c.stop among parent's children when parent is one of
	// package context's own, and with parent's AfterFunc method if it has
	// one. Otherwise context.AfterFunc starts a goroutine that waits for
	// parent, as context.WithDeadline would. It never calls c.stop before
	// it returns, so c.mu may be held.
	stop := context.AfterFunc(parent, c.t.f)
	c.setRegLocked(*(*unsafe.Pointer)(unsafe.Pointer(&stop)), regFunc) // see unregister
	return true
}

// linkUpLocked makes c a kid of p, unless p is done: then it reports
// false. c.mu is held; it takes p.mu (always in that order: a kid's lock,
// then its parent's), and has p watch its own parent first.
func (c *deadlineCtx) linkUpLocked(p *deadlineCtx) bool {
	p.mu.Lock()
	if p.claimLocked() && !p.watchLocked() {
		p.endByParentLocked()
		return false
	}
	if p.phase() != ctxLive {
		p.mu.Unlock()
		return false
	}
	n := &upNode{afterNode: afterNode{f: c.t.f}, p: p}
	p.linkLocked(&n.afterNode)
	p.mu.Unlock()
	c.setRegLocked(unsafe.Pointer(n), regNode)
	return true
}

// phase returns c's state without the ctxDone bit.
func (c *deadlineCtx) phase() uint32 {
	return c.state.Load() & ctxPhase
}

// parentErr returns parent.Err() of a done parent, which a broken parent
// may have left nil.
func parentErr(parent context.Context) error {
	if err := parent.Err(); err != nil {
		return err
	}
	return context.Canceled
}

// stopFM is the code of the method value c.stop (its closure's first
// word), or 0 if method values are not laid out as setStopFunc expects.
var stopFM = func() uintptr {
	probe := new(deadlineCtx)
	f := probe.stop
	words := (*[2]unsafe.Pointer)(*(*unsafe.Pointer)(unsafe.Pointer(&f)))
	if words[1] != unsafe.Pointer(probe) {
		return 0
	}
	return uintptr(words[0])
}()

// setStopFunc makes c.stop c.t.f, as a func value with no allocation of
// its own. A method value c.stop is a pointer to a closure of two words,
// the code of the method value (stopFM, which calls stop with the receiver
// it finds in the second word) and c; c starts with those two words (fm
// and self), so a pointer to c is that func value. This saves one
// allocation per context, a sixth of what making and cancelling one costs.
// stopFM checks the layout once; if a compiler lays method values out
// otherwise, c.t.f is the ordinary method value.
//
// Both words that point to c are stored without a write barrier: a
// pointer from c to c itself makes nothing reachable that was not, and c,
// on the caller's stack, is marked by this collection if one is running
// (allocated during it, or found on the stack). That spares two of the
// write barriers that making a context costs while the garbage collector
// marks, which is much of the time when contexts are made at a high rate.
func (c *deadlineCtx) setStopFunc() {
	if stopFM == 0 {
		c.t.f = c.stop
		return
	}
	p := uintptr(unsafe.Pointer(c))
	c.fm = stopFM
	*(*uintptr)(unsafe.Pointer(&c.self)) = p
	*(*uintptr)(unsafe.Pointer(&c.t.f)) = p
}

// stop is c.t.f: the callback of c's timer, the CancelFunc returned to
// the caller, and what c's parent calls once it is done. Which of them
// calls it tells from the state: a parent that is done comes first
// (package context propagates a parent's end before its children's own
// cancel); otherwise, if c's timer was armed and its callback is running
// (Stop cannot stop it, see stopTimer), the deadline passed; otherwise the
// call is cancel's. A context with no kids (ctxKids clear) ends with one
// compare-and-swap of its state, without c.mu; one with kids with c.mu
// held, so that the end takes the whole list.
func (c *deadlineCtx) stop() {
	st := c.state.Load()
	if st&ctxPhase != ctxLive {
		return
	}
	// Ask the parent before anything else: a parent of this package that
	// learns here that its own parent is done ends, and calls its kids, c
	// among them.
	end, left := uint32(ctxParent), false
	if st&ctxWatched == 0 || c.parent.Err() == nil {
		end = ctxCanceled
		if st&ctxArmed != 0 {
			// A timer that fired has its end recorded by its callback
			// (this call, or one that its firing makes), and a parent's
			// end stops the timer before it records itself: if the timer
			// can neither be stopped nor is firing, another end stopped
			// it and is recording itself, and cancel's is as true as it.
			var stopped, firing bool
			stopped, firing, left = c.stopTimer(st)
			if !stopped && firing {
				end = ctxExpired
			}
		}
	} else if st&ctxArmed != 0 {
		// The parent's end stops the timer (and leaves the watch) before
		// it is recorded, so that an end that finds c ended, as a cancel
		// racing the parent's goroutine may, finds its timer stopped.
		_, _, left = c.stopTimer(st)
	}
	for st&ctxKids == 0 {
		if c.state.CompareAndSwap(st, st|end) {
			c.ended(st, end, left)
			return
		}
		// Another goroutine ended c, or published something of it.
		st = c.state.Load()
		if st&ctxPhase != ctxLive {
			return
		}
	}
	c.mu.Lock()
	c.finishLocked(end, left)
}

// claimLocked sets ctxKids in c's state, unless c is done, and reports
// whether c is live: from then on c ends with c.mu held, and the caller
// may link a kid. c.mu is held.
func (c *deadlineCtx) claimLocked() bool {
	if c.state.Load()&ctxKids != 0 {
		return c.phase() == ctxLive // no end but with c.mu held
	}
	return c.publishLocked(ctxKids)
}

// stopTimer stops c's armed timer, and reports whether it did; if it did
// not, whether the timer's callback is running (so the deadline passed).
// A context registered with a parentWatch in st leaves it in the same hold
// of the shard's lock (left). The watch is its timer's shard's
// (watchLocked registers c with the watch of c.t.sh), and c's timer,
// never re-armed, never moves.
func (c *deadlineCtx) stopTimer(st uint32) (stopped, firing, left bool) {
	s, _ := c.t.lockShard()
	stopped = c.t.stopLocked(s)
	firing = !stopped && s.current == &c.t
	emptied := stopped && s.count == 0
	drop := false
	if st>>ctxRegShift&3 == regWatch {
		drop, left = (*parentWatch)(c.up).removeLocked(c), true
	}
	s.mu.Unlock()
	if drop {
		(*parentWatch)(c.up).stop()
	}
	if emptied {
		s.h.idle() // perhaps nothing is armed: the driver need not wake
	}
	return stopped, firing, left
}

// finishLocked ends c with end, unless it has ended: it records the end,
// unlocks c.mu, and does what the end leaves to do (ended), then calls
// the funcs of c's kids on this goroutine. left tells whether c has left
// its watch. c.mu is held.
func (c *deadlineCtx) finishLocked(end uint32, left bool) {
	st := c.state.Load()
	for {
		if st&ctxPhase != ctxLive {
			c.mu.Unlock()
			return
		}
		if c.state.CompareAndSwap(st, st|end) {
			break
		}
		st = c.state.Load()
	}
	kids := c.kids
	if kids != nil {
		c.kids = nil // a store the write barrier may cost: not when nil
	}
	c.mu.Unlock()
	c.ended(st, end, left)
	// The list is c's alone now: unlink and AfterFunc see c done and leave
	// it alone.
	callNodes(kids)
}

// endByParentLocked ends c, whose parent is done: it stops c's timer
// first, so that an end that finds c ended finds its timer stopped (see
// stop), then records the end as finishLocked does. c.mu is held; c has
// no registration with the parent (it found the parent done while making
// one).
func (c *deadlineCtx) endByParentLocked() {
	if c.state.Load()&ctxArmed != 0 {
		c.t.Stop()
	}
	c.finishLocked(ctxParent, false)
}

// ended does what c's end, end recorded over the state st, leaves to do
// but for its kids and its timer (stopped before a parent's end is
// recorded, see stop): close Done, undo the registration with the parent
// (a parent that is done has dropped c already). left tells whether c has
// left its watch.
func (c *deadlineCtx) ended(st, end uint32, left bool) {
	// The state first: Done closes once Err reports the end, never
	// before (Err waits for the close, which follows at once).
	if st&ctxDone != 0 {
		close(c.done)
	}
	if end != ctxParent {
		c.unregister(st, left)
	}
}

// unregister undoes c's registration with its parent that st tells of,
// if any, unless it is a watch that c has left. The fields it reads were
// set before st was.
func (c *deadlineCtx) unregister(st uint32, left bool) {
	switch st >> ctxRegShift & 3 {
	case regNode:
		n := (*upNode)(c.up)
		n.p.unlink(&n.afterNode)
	case regWatch:
		if !left {
			(*parentWatch)(c.up).remove(c)
		}
	case regFunc:
		// A func value is a pointer-shaped word: up holds the stop func
		// that context.AfterFunc returned, stored by watchLocked.
		stop := *(*func() bool)(unsafe.Pointer(&c.up))
		stop()
	}
}

// linkLocked adds n to c's kids. c.mu is held and c is live.
func (c *deadlineCtx) linkLocked(n *afterNode) {
	pushNode(&c.kids, n)
}

// unlink removes n from c's kids and reports whether it was there; false
// means c is done (n's func has run or is about to) or n was removed.
func (c *deadlineCtx) unlink(n *afterNode) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phase() != ctxLive {
		return false
	}
	return removeNode(&c.kids, n)
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
	if c.state.Load()&ctxHasAt != 0 {
		return (*deadlineCtxAt)(unsafe.Pointer(c)).deadline, true // c is its first field
	}
	// The timer's deadline: arm stored it before c was returned, and
	// nothing changes it after, as c's timer is never re-armed. Read
	// without the shard's lock, which Timer.Deadline would wait for.
	return c.t.home().h.origin.Add(time.Duration(c.t.deadlineNs())), true
}

// Done returns a channel that is closed when the context is done. The
// channel is made by the first call, so a context whose Done is never
// called costs no channel. The first call also asks a parent that can be
// done to tell the context when it is (see [context.AfterFunc]); until
// then Err asks the parent itself.
func (c *deadlineCtx) Done() <-chan struct{} {
	if c.state.Load()&ctxDone != 0 {
		return c.done
	}
	c.mu.Lock()
	if c.state.Load()&ctxDone != 0 {
		c.mu.Unlock()
		return c.done
	}
	if c.phase() == ctxLive && !c.watchLocked() {
		c.endByParentLocked()
		c.mu.Lock()
	}
	if c.phase() == ctxLive {
		d := make(chan struct{})
		c.done = d
		if c.publishLocked(ctxDone) {
			c.mu.Unlock()
			return d // c's end will close it
		}
		// c ended meanwhile, and its end did not see d.
	}
	c.done = closedchan
	c.state.Or(ctxDone) // c is done: nothing else changes its state
	c.mu.Unlock()
	return closedchan
}

// Err returns nil while the context is live; then
// [context.DeadlineExceeded] if its deadline passed, [context.Canceled] if
// it was cancelled, or its parent's Err if the parent was done first. Once
// Err returns an error, Done is closed. Err notices a parent that is done
// at once, without waiting for the parent to notify the context.
func (c *deadlineCtx) Err() error {
	st := c.state.Load()
	if st&ctxPhase == ctxLive {
		if st&ctxWatched == 0 || c.parent.Err() == nil {
			return nil
		}
		c.stop()
		st = c.state.Load()
	}
	if st&ctxDone != 0 {
		<-c.done // closed by now, or in a moment: see finishLocked
	}
	st &= ctxPhase
	switch st {
	case ctxCanceled:
		return context.Canceled
	case ctxExpired:
		return context.DeadlineExceeded
	}
	return parentErr(c.parent)
}

// Value returns the parent's value for key.
func (c *deadlineCtx) Value(key any) any {
	switch key {
	case deadlineCtxKey{}:
		return c
	case nil:
	case cancelCtxKey:
		if st := c.phase(); st == ctxCanceled || st == ctxExpired {
			return nil // see cancelCtxKey
		}
	}
	return c.parent.Value(key)
}

// AfterFunc arranges for f to be called once the context is done, and
// returns a function that stops that: stop returns true if it prevented f
// from being called, false if f has been called (or is being called) or
// was stopped already. [context.AfterFunc] uses this method, and so do the
// contexts that package context derives from this one, which is how they
// are cancelled with it without a goroutine each.
//
// Prefer [context.AfterFunc], which calls f in a goroutine of its own.
// Called directly, this method calls f on the goroutine that ends the
// context: the caller of cancel, or the goroutine that advances the
// hierarchy when the deadline passes. So f must be quick and must not
// block. If the context is done already, f is called at once in a
// goroutine of its own.
func (c *deadlineCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.claimLocked() && !c.watchLocked() {
		c.endByParentLocked()
		c.mu.Lock()
	}
	if c.phase() != ctxLive {
		c.mu.Unlock()
		go f()
		return stopped
	}
	n := &afterNode{f: f}
	c.linkLocked(n)
	c.mu.Unlock()
	return func() bool { return c.unlink(n) }
}

// stopped is the stop func of an AfterFunc that already called its func.
func stopped() bool { return false }

// String describes the context for debugging, in the form of
// [context.WithDeadline]'s, or [context.WithCancel]'s when the parent's
// deadline is the earlier one.
func (c *deadlineCtx) String() string {
	name := contextName(c.parent)
	if c.state.Load()&ctxOwn == 0 {
		return name + ".WithCancel"
	}
	dl, _ := c.Deadline()
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
