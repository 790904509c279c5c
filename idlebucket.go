package timingwheel

import (
	"math"
	"math/bits"
	"net"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"
)

// The conns of IdleConn with options (eventConns) have no timer each: they
// sit in buckets, lists of conns whose next event falls in the same span of
// ticks, and each bucket has one timer. That keeps a conn at 64 bytes.
//
// Reads and Writes only move the conn's marks (see mark): the conn stays in
// the bucket it was filed in, which is now too early for it. When a
// bucket's timer fires, each of its conns is looked at with the clock read
// then: events that are due run, and the conn is filed again for its next
// one. So an event is never early, and a busy conn is looked at about once
// per idle period.
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
// to), and a group's buckets' timers are in its shard. A group's lock guards its map and every list link of its
// conns; it is taken when a conn is wrapped, filed again or closed, never
// by Read or Write. A group's lock is taken before a shard's.

// idleWheel is a hierarchy's idle groups and cache of event configs, made
// when the first conn with options is wrapped.
type idleWheel struct {
	groups []idleGroup

	rr atomic.Uint32 // hands out groups to new conns

	cacheMu sync.Mutex
	cache   [8]cachedConfig
	next    int // the entry a miss replaces
}

type idleGroup struct {
	mu      sync.Mutex
	sh      *shard
	buckets map[bucketKey]*idleBucket
	_       [40]byte // off the next group's cache line
}

// bucketKey names a bucket of a group: the span of ticks [j<<level,
// (j+1)<<level).
type bucketKey struct {
	level uint8
	j     int64
}

// idleBucket is a list of conns, head its sentinel, and the timer that
// fires for them.
type idleBucket struct {
	head eventConn // head.home is sentinelHome
	t    Timer
	key  bucketKey
	g    *idleGroup
}

// sentinelHome marks a list's head among its conns.
const sentinelHome = math.MaxUint32

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
	}
	if !h.idleW.CompareAndSwap(nil, w) {
		return h.idleW.Load()
	}
	return w
}

// group returns the conn's group.
func (c *eventConn) group() *idleGroup { return &c.cfg.h.idleW.Load().groups[c.home] }

// file puts c in the bucket of its next event, unless c is closed.
func (g *idleGroup) file(c *eventConn) {
	g.mu.Lock()
	g.fileLocked(c)
	g.mu.Unlock()
}

// fileLocked is file with g.mu held. c must be in no list.
func (g *idleGroup) fileLocked(c *eventConn) {
	if c.state.Load()&(idleTimedOut|idleClosed) != 0 {
		return // closed: no reference is kept
	}
	h := c.cfg.h
	key, at := spanFor(c.nextDue(), h.elapsed(), h.tick)
	b := g.buckets[key]
	if b == nil {
		b = &idleBucket{key: key, g: g}
		b.head.home = sentinelHome
		b.head.next, b.head.prev = &b.head, &b.head
		b.t.initOnShard(g.sh, b.fire) // the group's shard, not the processor's
		g.buckets[key] = b
		b.t.armAt(h.tickNanos(at))
	}
	last := b.head.prev
	c.prev, c.next = last, &b.head
	last.next, b.head.prev = c, c
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
func (g *idleGroup) unlinkLocked(c *eventConn) {
	prev, next := c.prev, c.next
	if next == nil {
		return
	}
	prev.next, next.prev = next, prev
	c.prev, c.next = nil, nil
	if prev == next && prev.home == sentinelHome {
		b := (*idleBucket)(unsafe.Pointer(prev)) // head is its first field
		if g.buckets[b.key] == b {
			delete(g.buckets, b.key)
			b.t.Stop()
		}
	}
}

// fire is a bucket's timer's callback: each conn in it is looked at, and
// runs its due events or is filed again. The bucket is out of the map
// first, so conns filed meanwhile go to a new one.
func (b *idleBucket) fire() {
	g := b.g
	g.mu.Lock()
	if g.buckets[b.key] == b {
		delete(g.buckets, b.key)
	}
	// Only what is due by the tick being fired runs now: a conn whose
	// event comes at a later tick that this Advance reaches is filed for
	// that tick, and runs there, in order with the other timers.
	at := min(g.sh.h.tickNanos(g.sh.now.Load()), g.sh.h.elapsed())
	var cur *eventConn
	defer func() {
		if cur != nil {
			// An event's function panicked: the conns not yet looked
			// at, and the one that panicked, keep their events.
			g.mu.Lock()
			for c := b.head.next; c != &b.head; c = b.head.next {
				g.unlinkLocked(c)
				g.fileLocked(c)
			}
			g.fileLocked(cur)
			g.mu.Unlock()
		}
	}()
	for {
		c := b.head.next
		if c == &b.head {
			break
		}
		g.unlinkLocked(c)
		cur = c
		g.mu.Unlock()
		c.fire(at)
		g.mu.Lock()
		cur = nil
	}
	g.mu.Unlock()
}

// eventConfig is what the conns of one IdleConn or IdleListener call, or of
// calls with equal arguments, share: a conn holds a pointer to it.
type eventConfig struct {
	h         *Hierarchy
	idle      int64 // ns; 0: each conn's own (see extConn)
	writeIdle int64 // ns; 0: no write-idle event
	lifetime  int64 // ns; 0: no lifetime
	onRead    func(net.Conn)
	onWrite   func(net.Conn)
}

// configKey identifies an eventConfig by its values, the functions by
// their func values' words. A key holds no reference: a cached config that
// no conn holds any more is collected, and its functions with it.
type configKey struct {
	idle, writeIdle, lifetime int64
	onRead, onWrite           uintptr
}

type cachedConfig struct {
	key configKey
	cfg weak.Pointer[eventConfig]
}

// funcWord returns the word of a func value: equal for the same func value
// (a closure made once and passed again, or a top-level function).
func funcWord(f func(net.Conn)) uintptr { return *(*uintptr)(unsafe.Pointer(&f)) }

// config returns a config for idle and cfg, shared with the conns already
// wrapped with the same values if one is cached. A server that wraps each
// conn with the same idle and options (the same functions) thus allocates
// none per conn. Once conns with the same options come with different
// idles, the config returned has idle 0: each conn then keeps its own
// (an extConn). One that passes a new closure per conn gets a config per
// conn.
func (w *idleWheel) config(h *Hierarchy, idle int64, cfg *idleConfig) *eventConfig {
	key := configKey{idle, int64(cfg.writeIdle), int64(cfg.lifetime), funcWord(cfg.onRead), funcWord(cfg.onWrite)}
	perConn := key
	perConn.idle = 0
	w.cacheMu.Lock()
	defer w.cacheMu.Unlock()
	if c := w.cached(key); c != nil {
		return c
	}
	if c := w.cached(perConn); c != nil {
		return c
	}
	// A config of the same options with another idle means idles differ
	// per conn: share one config and keep the idle in each conn.
	for i := range w.cache {
		if e := &w.cache[i]; e.key.idle != 0 && e.key.sameOptions(key) && e.cfg.Value() != nil {
			idle, key = 0, perConn
			break
		}
	}
	c := &eventConfig{h: h, idle: idle, writeIdle: int64(cfg.writeIdle), lifetime: int64(cfg.lifetime),
		onRead: cfg.onRead, onWrite: cfg.onWrite}
	w.cache[w.next] = cachedConfig{key, weak.Make(c)}
	w.next = (w.next + 1) % len(w.cache)
	return c
}

// cached returns the live config cached under key, or nil.
func (w *idleWheel) cached(key configKey) *eventConfig {
	for i := range w.cache {
		if e := &w.cache[i]; e.key == key {
			if c := e.cfg.Value(); c != nil {
				return c
			}
		}
	}
	return nil
}

// sameOptions reports whether k and o differ at most in idle.
func (k configKey) sameOptions(o configKey) bool {
	k.idle = o.idle
	return k == o
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
// eventConn.recordBehind).
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

// lower sets the mark back to now, unless it is frozen; the clock went back.
func (m *mark) lower(now int64) {
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
