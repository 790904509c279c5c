package timingwheel

import (
	"context"
	"runtime"
	"unsafe"
	"weak"
)

// Contexts under one parent of package context share its registration.
//
// A deadlineCtx that something waits for must learn when its parent ends
// (see watchLocked). For a parent of package context the only way with no
// goroutine is context.AfterFunc, and that costs about what a whole
// context.WithTimeout does: a context of its own in the parent's children
// map, put in by the registration and taken out again by the child's
// cancel, with the parent's lock taken each time. A server that gives
// each backend call of a request its own deadline under the request's
// context pays it for every call.
//
// So the contexts of one shard under one parent share one registration, a
// parentWatch: each links into its list and out again under the shard's
// lock, with no allocation in package context and no lock of the parent.
// The first context a shard sees under a parent registers on its own, as
// one that is alone under its parent should (a request with a single
// deadline): it only notes the parent in the shard's table. The next one
// under the same parent makes the watch, which stays registered while it
// is in use, and serves every later one. A watch whose parent ends calls
// its contexts' stop, as context.AfterFunc would have for each, and leaves
// the table. A watch that another parent's takes the place of in the table
// unregisters once its list is empty, so a parent that lives long never
// collects more than the watches that are in use.
//
// What holds a watch: the contexts in its list (which hold the parent
// too), and the table, strongly from its use until the next garbage
// collection ends and weakly after. The registration holds it weakly, and
// a watch freed undoes its registration (newParentWatch). So the table
// keeps no parent alive past a collection, and a parent that lives on
// keeps no watch, shard or hierarchy alive.

// A parentWatch is the registration of a shard's contexts with one parent
// of package context. Its fields are guarded by the shard's lock, except
// those set before it is shared.
type parentWatch struct {
	s    *shard
	key  unsafe.Pointer // the parent's cancelCtx, registered with, as the table's key
	stop func() bool    // context.AfterFunc's; set before the watch is shared
	set  *watchSet      // where the watch is in s's table, or nil once it left it
	// kids are the contexts waiting for the parent, each at its widx: an
	// array, so that a context joins and leaves with no allocation.
	kids    []*deadlineCtx
	ended   bool            // the parent ended (fire ran) or the watch unregistered
	cleanup runtime.Cleanup // unregisters the watch once it is freed; stopped when it ends (zero until set)
}

// watchWays is how many watches a set of the table holds, and watchSets
// how many sets a shard's table has: with two ways, parents whose keys
// fall in one set alternate without evicting each other's watches.
const (
	watchWays    = 2
	watchSetBits = 7
	watchSets    = 1 << watchSetBits
)

// watchSetOf returns the index of the set of the table for key.
func watchSetOf(key unsafe.Pointer) uint64 {
	return uint64(uintptr(key)) * 0x9E3779B97F4A7C15 >> (64 - watchSetBits)
}

// A watchSet is one set of a shard's table of watches.
type watchSet struct {
	w   [watchWays]weak.Pointer[parentWatch]
	key [watchWays]uintptr // of w's watches, so that find asks only one of them
	// hot holds w's watches strongly from their use until the next
	// garbage collection ends (see clearHotAfterGC): turning a weak pointer
	// strong takes a global atomic while the heap is being swept, which
	// many cores making contexts would contend for. A parent dropped
	// without being cancelled is so kept one collection longer at most.
	hot [watchWays]*parentWatch
	// seen holds the keys of the last parents looked up here that had no
	// watch, two so that two that alternate both get one: the next context
	// under either makes it. They are only hints (a parent freed since may
	// have left its address to another), and uintptrs, so that they keep
	// no parent alive.
	seen     [watchWays]uintptr
	nextSeen int // the entry of seen to replace next
	lru      int // the way to replace next
}

// stdCancelCtx returns parent's own cancelCtx of package context, when
// parent ends exactly when it does (parent is one, or wraps one without
// changing Done): that is the parent package context links its children
// to. done is parent.Done().
func stdCancelCtx(parent context.Context, done <-chan struct{}) (context.Context, bool) {
	if cancelCtxKey == nil {
		return nil, false
	}
	cc, ok := parent.Value(cancelCtxKey).(context.Context)
	if !ok || cc.Done() != done {
		return nil, false
	}
	return cc, true
}

// watchSharedLocked links c into the watch of s for cc, the cancelCtx of
// c's parent, making the watch if this is the second context s sees under
// cc. It reports false if c is to register on its own: the first under
// cc, or one that finds the watch's parent ended. c.mu is held.
func (c *deadlineCtx) watchSharedLocked(s *shard, cc context.Context) bool {
	key := dataWord(cc)
	s.lock()
	if s.watches == nil {
		s.watches = new([watchSets]watchSet)
		clearHotAfterGC(weak.Make(s))
	}
	set := &s.watches[watchSetOf(key)]
	w := set.find(key)
	var drop *parentWatch // a watch to unregister once s.mu is let go
	if w == nil {
		if !set.sawLocked(uintptr(key)) {
			s.mu.Unlock()
			return false
		}
		s.mu.Unlock()
		w = newParentWatch(s, cc, key)
		s.lock()
		if o := set.find(key); o != nil {
			drop, w = w, o // another context of s made one meanwhile
			drop.endLocked()
		} else {
			drop = set.installLocked(w)
		}
	}
	linked := !w.ended // a new watch may have ended already
	if linked {
		c.widx = uint32(len(w.kids))
		w.kids = append(w.kids, c)
	}
	s.mu.Unlock()
	if drop != nil {
		drop.stop()
	}
	if linked {
		c.setRegLocked(unsafe.Pointer(w), regWatch) // which may take s.mu to undo it
	}
	return linked
}

// newParentWatch registers a new watch of s with cc.
//
// The registration holds the watch weakly, so that it does not keep the
// watch, its shard and its hierarchy alive for as long as cc lives (a
// server's root context may outlive many hierarchies): the watch lives
// while contexts wait in it (they hold it) or the table holds it hot (until
// the next collection ends). Once it is freed, its cleanup undoes the
// registration, so none pile up in a parent that lives long; the next
// context under cc that waits registers on its own again, and the one
// after makes a new watch.
func newParentWatch(s *shard, cc context.Context, key unsafe.Pointer) *parentWatch {
	w := &parentWatch{s: s, key: key}
	if testHookWatch != nil {
		testHookWatch(w)
	}
	wp := weak.Make(w)
	// AfterFunc never calls its func before it returns: it starts a
	// goroutine for it, also when cc is done already.
	w.stop = context.AfterFunc(cc, func() {
		if w := wp.Value(); w != nil {
			w.fire()
		}
	})
	cleanup := runtime.AddCleanup(w, func(stop func() bool) { stop() }, w.stop)
	// w's end (fire, if cc is done already) may have come first: then the
	// cleanup is not wanted.
	s.lock()
	w.cleanup = cleanup
	ended := w.ended
	s.mu.Unlock()
	if ended {
		cleanup.Stop()
	}
	return w
}

// find returns the watch of the set for key, unless it has ended. s.mu
// is held.
func (set *watchSet) find(key unsafe.Pointer) *parentWatch {
	for i := range set.w {
		if set.key[i] != uintptr(key) {
			continue
		}
		w := set.hot[i]
		if w == nil {
			w = set.w[i].Value()
		}
		if w != nil && w.key == key && !w.ended {
			set.hot[i] = w
			set.lru = 1 - i
			return w
		}
	}
	return nil
}

// sawLocked reports whether key was seen here, and notes it if not. s.mu
// is held.
func (set *watchSet) sawLocked(key uintptr) bool {
	for _, k := range set.seen {
		if k == key {
			return true
		}
	}
	set.seen[set.nextSeen] = key
	set.nextSeen = (set.nextSeen + 1) % watchWays
	return false
}

// installLocked puts w in the set, in a free way or else in place of the
// least recently used watch, and returns that watch if it is to be
// unregistered now (its list is empty). s.mu is held.
func (set *watchSet) installLocked(w *parentWatch) (drop *parentWatch) {
	i := set.lru
	for j := range set.w {
		if o := set.w[j].Value(); o == nil || o.ended {
			i = j
			break
		}
	}
	if o := set.w[i].Value(); o != nil && !o.ended {
		o.set = nil
		if len(o.kids) == 0 {
			o.endLocked()
			drop = o
		}
	}
	set.w[i], set.key[i] = weak.Make(w), uintptr(w.key)
	if !w.ended {
		set.hot[i] = w
	}
	set.lru = 1 - i
	for j := range set.seen {
		if set.seen[j] == uintptr(w.key) {
			set.seen[j] = 0
		}
	}
	w.set = set
	return drop
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
	w.endLocked()
	kids := w.kids
	w.kids = nil
	s.mu.Unlock()
	for _, c := range kids {
		c.stop() // sees the parent done
	}
}

// remove takes c out of w's kids, unless the parent ended (then fire has
// taken or will take c's stop). A watch that left the table unregisters
// when its last kid leaves.
func (w *parentWatch) remove(c *deadlineCtx) {
	s := w.s
	s.lock()
	drop := w.removeLocked(c)
	s.mu.Unlock()
	if drop {
		w.stop()
	}
}

// removeLocked is remove with s.mu held, but for unregistering: it
// reports whether the caller is to call w.stop once s.mu is let go.
func (w *parentWatch) removeLocked(c *deadlineCtx) (drop bool) {
	if w.ended || int(c.widx) >= len(w.kids) || w.kids[c.widx] != c {
		return false // fire took c, or c left already (two ends of c race)
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
	if len(w.kids) == 0 && w.set == nil {
		w.endLocked()
		return true
	}
	return false
}

// testHookWatch, set by tests, is told of each parentWatch made.
var testHookWatch func(*parentWatch)

// endLocked marks w ended: its parent ended, or it is to unregister. It
// leaves the table (find passes over it). s.mu is held.
func (w *parentWatch) endLocked() {
	if set := w.set; set != nil {
		for i := range set.hot {
			if set.hot[i] == w {
				set.hot[i] = nil // the table keeps no ended watch's parent
			}
		}
	}
	w.ended = true
	w.set = nil
	// Ended, w needs no unregistering when freed (its parent ended, or
	// the caller unregisters it now); and the cleanup's hold on the
	// registration would keep the parent one more collection.
	w.cleanup.Stop()
}

// A gcSentinel is garbage as soon as it is made, so that its cleanup runs
// once the next garbage collection has found it so. It holds a pointer so
// that it is not batched with other tiny objects, whose cleanups may wait.
type gcSentinel struct{ _ *byte }

// clearHotAfterGC arranges for the hot watches of s's table to be cleared
// once the next garbage collection ends, and again after each one, for as
// long as s lives: from then until they are used again, the table holds
// them only weakly.
func clearHotAfterGC(ws weak.Pointer[shard]) {
	runtime.AddCleanup(new(gcSentinel), func(ws weak.Pointer[shard]) {
		s := ws.Value()
		if s == nil {
			return // s's hierarchy is gone: so is its table
		}
		s.lock()
		for i := range s.watches {
			s.watches[i].hot = [watchWays]*parentWatch{}
		}
		s.mu.Unlock()
		clearHotAfterGC(ws)
	}, ws)
}

// dataWord returns the data word of an interface value: for a pointer, the
// pointer.
func dataWord(c context.Context) unsafe.Pointer {
	return (*[2]unsafe.Pointer)(unsafe.Pointer(&c))[1]
}
