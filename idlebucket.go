package timingwheel

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
)

// The conns of policies with options (eventConns) have no timer each: they
// sit in buckets, lists of conns whose next event falls in the same span of
// ticks, and each bucket has one timer. That keeps a conn at 64 bytes.
//
// Reads and Writes only move the conn's marks (see mark): the conn stays in
// the bucket it was filed in, which is now too early for it. When a
// bucket's timer fires, each of its conns is looked at against the tick
// being fired: events that are due by then run, and the conn is filed again
// for its next one. So an event is never early, a busy conn is looked at
// about once per idle period, and the events of one Advance come in the
// order of their ticks, with the other timers'.
//
// A bucket for an event less than 64 ticks away spans one tick and fires
// at the end of it, as the conns' own timers would have. One further away
// spans 2^L ticks, L chosen so that the span is 1/64 to 1/32 of the
// distance, and fires at its start, when its conns are filed again, closer:
// a conn is filed about log32 of its distance in ticks times, and the
// buckets of far events are few however their deadlines spread.
//
// The buckets are kept by groups, one per shard; conns are handed out to
// the groups in turn (an accept loop wraps every conn on one goroutine,
// and Reads and Writes take no lock, so there is no processor to be close
// to), and a group's buckets' timers are in its shard. A group's lock
// guards its maps and every list link of its conns; it is taken when a conn
// is wrapped, filed again, resumed or closed, never by Read, Write or
// Pause. A group's lock is taken before a shard's.

// idleWheel is a hierarchy's idle groups, made when the first conn with
// options is wrapped.
type idleWheel struct {
	groups []idleGroup
	rr     atomic.Uint32 // hands out groups to new conns
}

type idleGroup struct {
	mu      sync.Mutex
	sh      *shard
	buckets map[bucketKey]*idleBucket
	// plainHeads and extHeads map the list heads of each bucket in
	// buckets to it, and hold nothing else: a conn unlinked from a list
	// left empty finds there the bucket to drop (a head is a pure
	// sentinel, with nothing of its bucket in it).
	plainHeads map[*eventConn[noExtra]]*idleBucket
	extHeads   map[*eventConn[lifeExtra]]*idleBucket
	// spare is a bucket whose timer is unarmed (stopped, or fired and
	// done), kept for the next bucket made: a conn that is paused and
	// resumed, or moved by SetIdle, empties its bucket and makes one at
	// once, and allocates nothing so.
	spare *idleBucket
	_     [16]byte // 64 bytes: off the next group's cache line
}

// bucketKey names a bucket of a group: the span of ticks [j<<level,
// (j+1)<<level).
type bucketKey struct {
	level uint8
	j     int64
}

// idleBucket holds two lists of conns, one per extension (eventConn's X),
// and the timer that fires for them. Each list is circular and headed by a
// sentinel, an eventConn that is never handed out and of which only prev
// and next are used, as container/list's root Element; the group's head
// maps lead from a head back to its bucket.
type idleBucket struct {
	plain eventConn[noExtra]
	ext   eventConn[lifeExtra]
	t     Timer
	key   bucketKey
	tick  int64 // the tick its timer fires at
	g     *idleGroup
}

// fineTicks is how far, in ticks, a bucket spans a single tick.
const fineTicks = 64

// idleWheel returns h's idle wheel, making it on first use.
func (h *Hierarchy) idleWheel() *idleWheel {
	if w := h.idleW.Load(); w != nil {
		return w
	}
	w := &idleWheel{groups: make([]idleGroup, len(h.shards))}
	for i := range w.groups {
		w.groups[i].sh = h.shards[i]
		w.groups[i].buckets = make(map[bucketKey]*idleBucket)
		w.groups[i].plainHeads = make(map[*eventConn[noExtra]]*idleBucket)
		w.groups[i].extHeads = make(map[*eventConn[lifeExtra]]*idleBucket)
	}
	if !h.idleW.CompareAndSwap(nil, w) {
		return h.idleW.Load()
	}
	return w
}

// group returns the conn's group.
func (c *eventConn[X]) group() *idleGroup { return &c.p.h.idleW.Load().groups[c.home] }

// headOf returns b's list head for conns of extension X.
func headOf[X connExtra](b *idleBucket) *eventConn[X] {
	if h, ok := any(&b.plain).(*eventConn[X]); ok {
		return h
	}
	return any(&b.ext).(*eventConn[X])
}

// bucketOf returns the bucket whose list head is head, if it is still in
// g's map (a bucket whose timer fired has left it). g.mu must be held.
func bucketOf[X connExtra](g *idleGroup, head *eventConn[X]) *idleBucket {
	if h, ok := any(head).(*eventConn[noExtra]); ok {
		return g.plainHeads[h]
	}
	return g.extHeads[any(head).(*eventConn[lifeExtra])]
}

func (b *idleBucket) empty() bool {
	return b.plain.next == &b.plain && b.ext.next == &b.ext
}

// newBucketLocked returns an empty bucket for key, armed for tick at, in
// g's map: the spare one if there is one. g.mu must be held.
func (g *idleGroup) newBucketLocked(key bucketKey, at int64) *idleBucket {
	b := g.spare
	if b != nil {
		g.spare = nil
	} else {
		b = &idleBucket{g: g}
		b.plain.next, b.plain.prev = &b.plain, &b.plain
		b.ext.next, b.ext.prev = &b.ext, &b.ext
		b.t.initOnShard(g.sh, b.fire) // the group's shard, not the processor's
	}
	b.key, b.tick = key, at
	g.buckets[key] = b
	g.plainHeads[&b.plain] = b
	g.extHeads[&b.ext] = b
	b.t.armAt(g.sh.h.tickNanos(at))
	return b
}

// dropLocked takes b, empty, out of g's maps and stops its timer; if that
// stopped it (its callback has not started), b becomes the spare. g.mu
// must be held.
func (g *idleGroup) dropLocked(b *idleBucket) {
	g.forgetLocked(b)
	if b.t.Stop() && g.spare == nil {
		g.spare = b
	}
}

// forgetLocked takes b out of g's map and its heads out of the head maps.
// g.mu must be held.
func (g *idleGroup) forgetLocked(b *idleBucket) {
	delete(g.buckets, b.key)
	delete(g.plainHeads, &b.plain)
	delete(g.extHeads, &b.ext)
}

// fileLocked puts c in the bucket of its next event, unless c is closed;
// a paused conn with no event due is parked instead, in no bucket, until
// Resume. c must be in no list; g.mu must be held.
func fileLocked[X connExtra](g *idleGroup, c *eventConn[X]) {
	if c.state.Load()&(idleTimedOut|idleClosed) != 0 {
		return // closed: no reference is kept
	}
	due := c.nextDue()
	if due == math.MaxInt64 {
		c.state.Or(idleParked)
		return
	}
	h := c.p.h
	key, at := spanFor(due, h.elapsed(), h.tick)
	b := g.buckets[key]
	if b == nil {
		b = g.newBucketLocked(key, at)
	}
	head := headOf[X](b)
	last := head.prev
	c.prev, c.next = last, head
	last.next, head.prev = c, c
}

// spanFor returns the bucket for an event due at ns (since the origin)
// filed at now, and the tick at which its timer fires.
func spanFor(due, now, tick int64) (bucketKey, int64) {
	k := ceilDiv(due, tick) // the tick at which a timer for due fires
	q := k - now/tick
	if q < fineTicks {
		return bucketKey{j: k}, k
	}
	level := bits.Len64(uint64(q)) - 6 // 2^level <= q/32
	j := k >> level
	return bucketKey{level: uint8(level), j: j}, j << level
}

// unlinkLocked takes c out of its bucket's list, if it is in one; a
// bucket left empty, unless its timer has fired, is dropped and its timer
// stopped. g.mu must be held.
func unlinkLocked[X connExtra](g *idleGroup, c *eventConn[X]) {
	prev, next := c.prev, c.next
	if next == nil {
		return
	}
	prev.next, next.prev = next, prev
	c.prev, c.next = nil, nil
	if prev == next { // c's neighbours are one node: the list's head, alone
		if b := bucketOf(g, prev); b != nil && b.empty() {
			g.dropLocked(b)
		}
	}
}

// fire is a bucket's timer's callback: each conn in it is looked at, and
// runs its due events or is filed again. The bucket is out of the map
// first, so conns filed meanwhile go to a new one. The conns are judged at
// the bucket's tick, the tick being fired, not at the shard's (which is
// later when the Advance jumped, or when the clock went back after the
// shard had passed it): a conn's event due at a later tick that this
// Advance reaches is filed for that tick, and runs there, in order with
// the other timers and with the conn's other events.
func (b *idleBucket) fire() {
	g := b.g
	g.mu.Lock()
	if g.buckets[b.key] == b {
		g.forgetLocked(b)
	}
	at := min(g.sh.h.tickNanos(b.tick), g.sh.h.elapsed())
	done := false
	defer func() {
		if !done {
			// An event's function panicked: the conns not yet looked
			// at keep their events.
			g.mu.Lock()
			refileAllLocked(g, &b.plain)
			refileAllLocked(g, &b.ext)
			g.mu.Unlock()
		}
	}()
	fireList(g, &b.plain, at)
	fireList(g, &b.ext, at)
	if g.spare == nil {
		g.spare = b // its timer has fired and its lists are done: unarmed
	}
	done = true
	g.mu.Unlock()
}

// fireList looks at each conn of the list headed by head; g.mu is held on
// entry and on return, and let go while a conn is looked at.
func fireList[X connExtra](g *idleGroup, head *eventConn[X], at int64) {
	var cur *eventConn[X]
	defer func() {
		if cur != nil {
			// cur's function panicked: it keeps its events.
			g.mu.Lock()
			fileLocked(g, cur)
			g.mu.Unlock()
		}
	}()
	for {
		c := head.next
		if c == head {
			return
		}
		unlinkLocked(g, c)
		cur = c
		g.mu.Unlock()
		c.fire(g, at)
		g.mu.Lock()
		cur = nil
	}
}

// refileAllLocked files again every conn of the list headed by head.
func refileAllLocked[X connExtra](g *idleGroup, head *eventConn[X]) {
	for c := head.next; c != head; c = head.next {
		unlinkLocked(g, c)
		fileLocked(g, c)
	}
}

// A mark is an instant in ns since the origin whose low bit freezes it: a
// frozen mark no longer moves, which is how the idle close keeps
// IdleDeadline where the conn was closed even if a Read in flight returns
// data afterwards. An instant is stored rounded up to even, so a deadline
// counted from a mark is at most a nanosecond later than from the instant,
// never earlier.
type mark struct{ v atomic.Int64 }

func encodeMark(ns int64) int64 { return min(ns, math.MaxInt64-1) + ns&1 }

// load returns the mark's instant.
func (m *mark) load() int64 { return m.v.Load() &^ 1 }

// store sets the mark to now.
func (m *mark) store(now int64) { m.v.Store(encodeMark(now)) }

// raise moves the mark forward to now and reports true, unless it is
// frozen (true) or later than now (false: a concurrent Read or Write
// recorded a later reading, or the clock went back; see
// recordBehind).
func (m *mark) raise(now int64) bool {
	n := encodeMark(now)
	for {
		o := m.v.Load()
		switch {
		case o&1 != 0 || o == n:
			return true
		case o > n:
			return false
		case m.v.CompareAndSwap(o, n):
			return true
		}
	}
}

// set sets the mark to now, unless it is frozen: Resume, or the clock went
// back.
func (m *mark) set(now int64) {
	n := encodeMark(now)
	for {
		o := m.v.Load()
		if o&1 != 0 || m.v.CompareAndSwap(o, n) {
			return
		}
	}
}

// due reports whether d has passed since the mark by the instant at, and
// if so moves the mark to now (the event restarts the count), unless a
// concurrent Read or Write moved it first.
func (m *mark) due(d, at, now int64) bool {
	n := encodeMark(now)
	for {
		o := m.v.Load()
		if o&1 != 0 || at < satAdd(o, d) {
			return false
		}
		if m.v.CompareAndSwap(o, n) {
			return true
		}
	}
}

// freezeIfDue freezes the mark if d has passed since it by the instant at,
// and reports whether it did; a concurrent Read that moved it first wins.
func (m *mark) freezeIfDue(d, at int64) bool {
	for {
		o := m.v.Load()
		if o&1 != 0 || at < satAdd(o, d) {
			return false
		}
		if m.v.CompareAndSwap(o, o|1) {
			return true
		}
	}
}
