package timingwheel

import (
	"context"
	"hash/maphash"
	"runtime"
	"sync/atomic"
	"weak"
)

// Contexts under one parent of package context share its registration, as
// do those under any parent with no AfterFunc method of its own.
//
// For a parent of package context the only hook with no goroutine is
// context.AfterFunc, which costs about what a whole context.WithTimeout
// does (a context in the parent's children map, put in and taken out under
// the parent's lock); for a parent of another package without an AfterFunc
// method, it starts a goroutine. Which package made a parent is not
// something package context documents a way to tell, and the share is
// right for any parent: it is keyed by the parent's Done channel. So the contexts of one shard under one parent share
// one, a parentWatch: each joins and leaves its list under the shard's
// lock, with no allocation. The first context a shard sees under a parent
// registers on its own, as a lone request deadline should, and notes the
// parent in the seen hints; the second makes the watch, which serves every
// later one. A watch whose parent ends ends its contexts and leaves the
// table.
//
// The table is keyed by the parent's Done channel: comparable, the same
// for the context.WithValue wrappers of a parent, and holding nothing of
// it. The table holds its watches, their registrations and so their
// parents; a parent holds its registration, and so the watch, its shard
// and hierarchy. Neither keeps the other alive for long: after each
// garbage collection a sweep unregisters every watch with no contexts that
// was not used since the sweep before. A registration holds the parent it
// was made through, which may be one request's wrapper of a long-lived
// parent (context.WithValue(base, ...)), with that request's values: so
// each sweep registers every watch it keeps again, through the parent of
// the context that joined it last (or of one still waiting), and drops the
// registration before, so that no wrapper is held more than about two
// collections for the contexts that came after it.

// A parentWatch is the registration of a shard's contexts with one parent
// of package context. Its fields are guarded by the shard's lock, except
// those set before it is shared.
type parentWatch struct {
	s    *shard
	done <-chan struct{} // the parent's, its key in s's table
	// stop is context.AfterFunc's: set before the watch is shared, then
	// by the sweeps that register it again, under s's lock.
	stop func() bool
	// kids are the contexts waiting for the parent, each at its widx: an
	// array, so that a context joins and leaves with no allocation.
	kids []*deadlineCtx
	// last is the parent of the context that joined last since the last
	// sweep, through which the sweep registers the watch again.
	last  context.Context
	used  bool // a context joined since the last sweep
	ended bool // the parent ended (fire ran), or the watch left the table to unregister
}

// watchSets is the length of the array a shard's watches field points
// to: one table.
const watchSets = 1

// seenHints is how many pairs of parents' Done channels a table notes as
// seen: two per slot, so that two parents whose channels fall in one slot
// and are used in turn both get a watch.
const seenHints = 64

// A watchSet is a shard's table of watches.
type watchSet struct {
	m map[<-chan struct{}]*parentWatch
	// seen holds the Done channels of parents a context registered under
	// on its own: the next context under one of them makes its watch. A
	// hint, by hash; cleared by each sweep.
	seen [seenHints][2]<-chan struct{}
	// last is the watch a context last joined, which a context leaving
	// most likely left, found without hashing; it leaves with its watch.
	last     *parentWatch
	sweeping bool // a sweep is to run after the next garbage collection
}

// seenSeed hashes Done channels into the seen hints.
var seenSeed = maphash.MakeSeed()

// seenSlot returns the slot of the seen hints for done.
func seenSlot(done <-chan struct{}) uint64 {
	return maphash.Comparable(seenSeed, done) % seenHints
}

// sawLocked reports whether done is noted as seen, and forgets it if so;
// if not, it notes it, in place of the older of its slot. The shard's lock
// is held.
func (set *watchSet) sawLocked(done <-chan struct{}) bool {
	hint := &set.seen[seenSlot(done)]
	for i := range hint {
		if hint[i] == done {
			hint[i] = nil
			return true
		}
	}
	hint[1], hint[0] = hint[0], done
	return false
}

// watchSharedLocked links c, under a parent of package context whose Done
// channel is done, into its shard's watch for the parent, making it if
// this is the second context the shard sees under the parent. It reports
// false if c is to register on its own: the first, or one that finds the
// parent ended. c.mu is held.
func (c *deadlineCtx) watchSharedLocked(done <-chan struct{}) bool {
	s := c.t.home()
	s.lock()
	if s.watches == nil {
		s.watches = &[watchSets]watchSet{{m: map[<-chan struct{}]*parentWatch{}}}
	}
	set := &s.watches[0]
	w := set.m[done]
	if w == nil {
		if !set.sawLocked(done) {
			s.mu.Unlock()
			return false
		}
		s.mu.Unlock()
		// AfterFunc never calls its func before it returns: it starts a
		// goroutine for it, also when the parent is done already.
		nw := &parentWatch{s: s, done: done}
		if testHookWatch != nil {
			testHookWatch(nw)
		}
		nw.stop = context.AfterFunc(c.parent, nw.fire)
		s.lock()
		if w = set.m[done]; w == nil && !nw.ended {
			w = nw
			set.m[done] = w
			if !set.sweeping {
				set.sweeping = true
				sweepAfterGC(weak.Make(s))
			}
		} else if !nw.ended {
			// Another context of s made one meanwhile.
			nw.ended = true
			defer nw.stop()
		}
		if w == nil {
			s.mu.Unlock()
			return false // the parent ended
		}
	}
	w.used = true
	w.last = c.parent
	set.last = w
	c.widx = uint32(len(w.kids))
	w.kids = append(w.kids, c)
	s.mu.Unlock()
	atomic.OrUint32(&c.state, ctxShared)
	return true
}

// fire is called, in a goroutine of context.AfterFunc's, once w's parent
// is done: it calls the stop funcs of w's contexts, as their own
// registrations would have.
func (w *parentWatch) fire() {
	s := w.s
	s.lock()
	if w.ended {
		s.mu.Unlock()
		return
	}
	w.ended = true
	set := &s.watches[0]
	delete(set.m, w.done)
	if set.last == w {
		set.last = nil
	}
	kids := w.kids
	w.kids = nil
	s.mu.Unlock()
	for _, c := range kids {
		c.stop() // sees the parent done
	}
}

// leaveWatch takes c, which joined its shard's watch of its parent, out
// of the watch's kids, unless the parent ended (then fire has taken or
// will take c's stop). The watch is the one under the parent's Done
// channel: while c is among its kids no sweep drops it, and a watch made
// after the parent ended does not hold c.
func (c *deadlineCtx) leaveWatch() {
	done := c.parent.Done()
	s := c.t.home()
	s.lock()
	defer s.mu.Unlock()
	set := &s.watches[0]
	w := set.last
	if w == nil || w.done != done {
		w = set.m[done]
	}
	if w == nil || w.ended || int(c.widx) >= len(w.kids) || w.kids[c.widx] != c {
		return
	}
	last := len(w.kids) - 1
	m := w.kids[last] // moves into c's place
	w.kids[c.widx], m.widx = m, c.widx
	w.kids[last] = nil
	w.kids = w.kids[:last]
	if cap(w.kids) > 64 && len(w.kids) < cap(w.kids)/4 {
		// The array shrinks with its list, so that a watch of a parent
		// that once had many waiting keeps no room for them.
		w.kids = append(make([]*deadlineCtx, 0, cap(w.kids)/2), w.kids...)
	}
}

// testHookWatch, set by tests, is told of each parentWatch made.
var testHookWatch func(*parentWatch)

// A gcSentinel is garbage as soon as it is made, so that its cleanup runs
// once the next garbage collection has found it so. It holds a pointer so
// that it is not batched with other tiny objects, whose cleanups may wait.
type gcSentinel struct{ _ *byte }

// sweepAfterGC has s's table swept after the next garbage collection, and
// after each one while it holds watches: a watch with no contexts, unused
// since the sweep before, leaves and unregisters; the hints are forgotten.
func sweepAfterGC(ws weak.Pointer[shard]) {
	runtime.AddCleanup(new(gcSentinel), func(ws weak.Pointer[shard]) {
		s := ws.Value()
		if s == nil {
			return // s's hierarchy is gone: so is its table
		}
		s.lock()
		set := &s.watches[0]
		var drop []func() bool
		type again struct {
			w      *parentWatch
			parent context.Context
		}
		var renew []again
		for done, w := range set.m {
			if w.used || len(w.kids) > 0 {
				p := w.last
				if p == nil && len(w.kids) > 0 {
					p = w.kids[len(w.kids)-1].parent // waiting: held by that context anyway
				}
				if p != nil {
					renew = append(renew, again{w, p})
				}
				w.used, w.last = false, nil
				continue
			}
			w.ended = true
			delete(set.m, done)
			if set.last == w {
				set.last = nil
			}
			drop = append(drop, w.stop)
		}
		set.seen = [seenHints][2]<-chan struct{}{}
		more := len(set.m) > 0
		set.sweeping = more
		s.mu.Unlock()
		for _, stop := range drop {
			stop()
		}
		for _, r := range renew {
			r.w.registerAgain(r.parent)
		}
		if more {
			sweepAfterGC(ws)
		}
	}, ws)
}

// registerAgain registers w through parent, whose Done channel is w's, and
// drops the registration it had, unless w has ended meanwhile.
func (w *parentWatch) registerAgain(parent context.Context) {
	stop := context.AfterFunc(parent, w.fire)
	w.s.lock()
	if w.ended {
		w.s.mu.Unlock()
		stop()
		return
	}
	stop, w.stop = w.stop, stop
	w.s.mu.Unlock()
	stop()
}
