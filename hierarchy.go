package timingwheel

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// Hierarchy is a hierarchy of timing wheels. Create one with [New]; the zero
// value is not usable (its methods panic). Every method of Hierarchy is
// safe for concurrent use by multiple goroutines, and so is every method
// of [Timer] except [Timer.Init] and [Timer.InitOn], which bind a timer
// before it is shared.
type Hierarchy struct {
	clock     clock.Clock
	realClock bool // clock is the default real clock: read package time directly
	origin    time.Time
	tick      int64 // nanoseconds
	top       int   // slots per level added beyond the configured ones
	parallel  bool  // WithParallelCallbacks
	// offMask and laterFree are the layout of a Timer's deadline word for
	// this tick (see when.go).
	offMask   int64
	laterFree bool

	// lastTick is the last tick the clock can reach: elapsed time saturates
	// at the largest Duration. A deadline there or later (which includes
	// every deadline that saturated) is due after it and never fires.
	lastTick int64

	shards []*shard
	// hints holds *shard: the shard whose timers the current processor
	// arms (see pickShard). sync.Pool keeps an item per processor; new ones
	// are dealt round robin from rr.
	hints sync.Pool
	rr    atomic.Int64
	// inTurn: the clock was given by WithClock, and shards are dealt in
	// turn from rr, not by processor (see pickShard).
	inTurn bool
	batch  int // the size of the batches of long work (see batch)

	// The fields above are read by every operation and written only by
	// New; those below are written
	// as the hierarchy runs. Keep them off each other's cache lines.
	_ [64]byte

	// frontier is the tick up to which the running Advance has fired, in
	// the default (ordered) mode: a timer armed meanwhile for that tick or
	// before waits for the next Advance, so the order of one Advance holds
	// across shards. MinInt64 outside an Advance.
	frontier atomic.Int64

	advMu sync.Mutex // serializes Advance

	driver driver
}

// New returns a Hierarchy configured by opts. Its origin, from which ticks
// are counted, is the clock's reading now. Invalid options are reported as
// an error that wraps [ErrInvalidConfig]; New never panics on bad options.
// Who drives the hierarchy, and when its driver goroutine starts and
// stops, is one rule: see "Driving the wheels" in the package doc.
func New(opts ...Option) (*Hierarchy, error) {
	c := config{tick: time.Millisecond, slots: []int{1000, 60, 60, 24}}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidConfig)
		}
		if err := o.apply(&c); err != nil {
			return nil, err
		}
	}
	realClock := c.clock == nil
	if realClock {
		c.clock = clock.New()
	}
	if c.shards == 0 && realClock {
		c.shards = min(runtime.GOMAXPROCS(0), MaxShards)
	} else if c.shards == 0 {
		c.shards = 1 // a given clock: one list of late timers, in the order armed (see WithShards)
	}
	if total := maxSlots(c.slots); total > MaxTotalSlots/c.shards {
		return nil, fmt.Errorf("%w: levels of %v slots, with those far deadlines add, in %d shards are %d slots; at most %d (MaxTotalSlots)",
			ErrInvalidConfig, c.slots, c.shards, total*c.shards, MaxTotalSlots)
	}
	h := &Hierarchy{
		clock:     c.clock,
		realClock: realClock,
		tick:      int64(c.tick),
		top:       c.slots[len(c.slots)-1],
		parallel:  c.parallel,
		inTurn:    !realClock,
		batch:     batch,
	}
	if c.batch > 0 {
		h.batch = c.batch
	}
	h.frontier.Store(math.MinInt64)
	h.driver.self = !c.manual
	h.driver.sleepUntil.Store(h.driver.idleState())
	h.origin = h.clock.Now()
	h.lastTick = h.dueTick(math.MaxInt64) - 1
	h.wordBits()
	for i := range c.shards {
		h.shards = append(h.shards, newShard(h, i, c.slots))
	}
	h.hints.New = func() any {
		return h.shards[int(uint64(h.rr.Add(1)-1)%uint64(len(h.shards)))]
	}
	return h, nil
}

// maxSlots returns the most slots a shard with levels of slots may hold:
// theirs, and those of the levels far deadlines add above them (see
// addLevelLocked), each with the last level's count, until one spans every
// tick.
func maxSlots(slots []int) int {
	total, span := 0, int64(1) // span 0: every tick
	grow := func(n int) {
		total += n // at most MaxSlots each, and fewer than 64 levels are added
		if span != 0 && span <= math.MaxInt64/int64(n) {
			span *= int64(n)
		} else {
			span = 0
		}
	}
	for _, n := range slots {
		grow(n)
	}
	for last := slots[len(slots)-1]; span != 0; {
		grow(last)
	}
	return total
}

// mustBeMade panics with a clear message for a zero Hierarchy.
func (h *Hierarchy) mustBeMade(method string) {
	if h == nil || h.shards == nil {
		panic("timingwheel: " + method + " called on a Hierarchy not created by New")
	}
}

// AfterFunc arms a timer that calls f once the clock reaches now+d, rounded
// up to the next tick, and returns the Timer, for Stop and Reset. f runs on
// the goroutine that advances the hierarchy. A d <= 0 is rounded up like
// any other: the timer fires on the first [Hierarchy.Advance] whose clock
// has reached that tick (the next Advance when the clock sits on a tick
// boundary, or is already past the tick; otherwise the first Advance at or
// after the next boundary), never inside AfterFunc. AfterFunc panics if f
// is nil.
//
// Each call allocates the Timer. A timer held by value and re-armed with
// [Timer.Reset] (see [Timer.Init]) allocates nothing.
func (h *Hierarchy) AfterFunc(d time.Duration, f func()) *Timer {
	h.mustBeMade("AfterFunc")
	if f == nil {
		panic("timingwheel: AfterFunc called with a nil func")
	}
	return h.arm(&Timer{f: f}, h.after(d), 0)
}

// AtFunc arms a timer that calls f once the clock reaches deadline, rounded
// up to the next tick, and returns the Timer, for Stop and Reset. f runs on
// the goroutine that advances the hierarchy. A deadline in the past fires on
// the first [Hierarchy.Advance] whose clock has reached its tick (see
// [Hierarchy.AfterFunc] for d <= 0), never inside AtFunc. AtFunc panics if f
// is nil.
func (h *Hierarchy) AtFunc(deadline time.Time, f func()) *Timer {
	h.mustBeMade("AtFunc")
	if f == nil {
		panic("timingwheel: AtFunc called with a nil func")
	}
	return h.arm(&Timer{f: f}, h.offset(deadline), 0)
}

// arm places the new timer t, due at w (ns since origin) and periodic with
// period per if per > 0, in the current processor's shard, or in another
// if that one's lock is held (by a long cascade, or by a goroutine of
// another processor): a new timer may go to any shard.
func (h *Hierarchy) arm(t *Timer, w, per int64) *Timer {
	s := h.pickShard()
	if !s.mu.TryLock() {
		s = h.lockAnyShard(s)
	}
	t.b.Store(s.bindingLocked(per))
	d := h.dueTick(w)
	s.tallyLocked(+1, &s.stats.armed)
	t.filed = d // t is not shared yet: no atomic store in fileLocked
	s.fileLocked(t, d, true)
	t.publishLocked(h, w)
	s.mu.Unlock()
	h.wakeFor(d)
	return t
}

// Len returns the number of timers armed now: those that have neither fired
// (their callback has not started) nor been stopped.
func (h *Hierarchy) Len() int {
	h.mustBeMade("Len")
	h.lockAll()
	n := 0
	for _, s := range h.shards {
		n += s.count
	}
	h.unlockAll()
	return n
}

// lockAll locks every shard, in index order, for a snapshot that holds at
// one instant: read one after the other, a timer stopped in one shard and
// then re-armed in another (an unarmed timer moves to the re-arming
// processor's shard) could be counted in both. Len, Stats and Next are the
// only holders of more than one shard lock (a Reset that moves a timer
// holds its old shard's lock while it only tries the new one's), and take
// them in this order, so they cannot deadlock. Each shard's lock is held for as long as it takes
// to take the others (at worst a batch of a cascade, see batch).
func (h *Hierarchy) lockAll() {
	for _, s := range h.shards {
		s.lock()
	}
}

func (h *Hierarchy) unlockAll() {
	for _, s := range h.shards {
		s.mu.Unlock()
	}
}

// Next returns the time at which [Hierarchy.Advance] next has work: a
// timer due, or a coarse slot to cascade. It may be early, never late: it
// is no later than the earliest deadline of the armed timers, rounded up
// to its tick, and may be before it, at the first tick of a coarse slot
// that must cascade before the timers in it fire, or at the tick a timer
// was filed at before a Reset moved it later. Calling Advance at that time
// and asking again gives a closer answer: at most one answer per level of
// the wheels, and one per timer moved later, comes before the deadline's
// own. Next may have passed already: a timer due and not yet advanced over
// (what a callback that panicked left reads as long past). From a
// callback, the timers collected for the tick being fired count as due at
// that tick.
//
// So an Advance loop of the caller's own that sleeps until Next and then
// calls Advance wakes, beyond the ticks its timers are due at, at most once
// for each occupied coarse slot (at its cascade) and for each timer moved
// later: as the driver does (see [Hierarchy.Start]), which asks the same.
// Next costs O(levels) per shard, whatever the number of timers, and reads
// every shard at one instant.
//
// Next reports false when no timer is armed, when the armed timers can
// never fire (their deadlines are held at the end of time; see Horizon in
// the package doc), and when the only timers counted as armed are executor
// timers whose runs were handed over and have not started (no Advance has
// work for them: see [Timer.InitOn]).
func (h *Hierarchy) Next() (time.Time, bool) {
	h.mustBeMade("Next")
	h.lockAll() // one instant: a timer handed from one shard to another is seen once, not never
	e, ok := h.nextWork(true)
	h.unlockAll()
	if !ok {
		return time.Time{}, false
	}
	return h.tickTime(e), true
}

// nextWork returns the tick at which Advance next has work, the earliest
// of the shards' (see shard.nextLocked), and false if nothing armed can
// fire: what Next reports and when the driver wakes. A shard's firing list
// (non-empty only while an Advance fires it) counts at the shard's now,
// the tick its timers are due by. held tells that every shard's lock is
// held (Next's one instant); otherwise each is taken in turn, which the
// driver can afford: a timer armed meanwhile wakes it (see wakeFor).
func (h *Hierarchy) nextWork(held bool) (int64, bool) {
	var best int64
	found := false
	for _, s := range h.shards {
		if !held {
			s.lock()
		}
		e, ok := s.nextLocked(true)
		if now := s.now.Load(); !s.firing.empty() && (!ok || now < e) {
			e, ok = now, true
		}
		if !held {
			s.mu.Unlock()
		}
		if ok && (!found || e < best) {
			best, found = e, true
		}
	}
	return best, found // a timer beyond the last tick is in no wheel (see fileLocked)
}
