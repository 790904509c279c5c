package timingwheel

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// A shard is one complete set of wheels with its own lock. A Hierarchy has
// several, so that goroutines on different cores arm, re-arm and stop
// timers without sharing a lock or writing a shared cache line: each timer
// belongs to the shard of the processor that created it (see
// Hierarchy.pickShard) and stays there. Advance merges the shards' timers
// in order of their due ticks.
//
// Everything below is guarded by mu except where a field says otherwise.
type shard struct {
	h   *Hierarchy
	idx int // in h.shards
	mu  sync.Mutex

	// The bindings of the shard's timers (see binding): oneShot for the
	// one-shot ones, and periodic one per period, made as needed.
	oneShot  binding
	periodic map[int64]*binding

	// waiting counts goroutines blocked on mu in lock. A cascade or a scan
	// that holds mu for long checks it between batches and lets them in.
	waiting atomic.Int32

	now atomic.Int64 // current tick; written with mu held

	// workFrom is a lower bound on the tick of the shard's next work for
	// an Advance (see nextLocked), from when an Advance last looked:
	// slotLocked lowers it for each timer it files. It is written with mu
	// held and read without it, so that an Advance passes over shards
	// with nothing due instead of taking their locks every tick.
	workFrom atomic.Int64

	count     int  // armed timers
	hops      int  // of which fired with their run pending on an executor, in no list (see InitOn)
	advancing bool // an Advance is running: timers due by now wait for the next one

	levels  []*level
	never   Timer  // timers due after the last tick, which never fire: in no wheel, so no Advance or Next sees them
	late    Timer  // timers filed at a tick already come, in the order filed (see fileLateLocked)
	lateMin int64  // a lower bound of the ticks filed on late
	walk    *Timer // the next late timer collectLateLocked looks at; nil outside it
	firing  Timer  // timers collected by Advance and not yet run

	stats shardStats

	_ [64]byte // keep the next shard's hot fields off this one's cache lines
}

// Long work — cascading a slot, sifting the late list when the clock went
// back — is done in
// batches of at most this many timers per hold of a shard's lock (measured
// for a cascade: about 30µs when the timers are in cache, about 0.45ms
// when each is a cache miss), so that stopping or re-arming a timer of
// that shard never waits for more; arming a new timer does not wait at
// all while another shard's lock is free (see Hierarchy.lockAnyShard). A
// batch is large enough that letting waiters in between two costs the
// long work little.
const batch = 2048

func newShard(h *Hierarchy, idx int, slots []int) *shard {
	s := &shard{h: h, idx: idx}
	s.oneShot = binding{s: s}
	s.never.initList()
	s.late.initList()
	s.firing.initList()
	width := int64(1)
	for _, n := range slots {
		l := newLevel(len(s.levels), n, width)
		s.levels = append(s.levels, l)
		if l.span == 0 {
			break // this level already covers every tick; more would stay empty
		}
		width = l.span
	}
	s.setNowLocked(0)
	return s
}

// lock takes s.mu, counting itself in waiting while it has to wait.
func (s *shard) lock() {
	if s.mu.TryLock() {
		return
	}
	s.waiting.Add(1)
	s.mu.Lock()
	s.waiting.Add(-1)
}

// yieldLocked lets goroutines waiting for s.mu take it, then takes it
// back. It is called between batches of long work. s.mu must be held.
func (s *shard) yieldLocked() {
	if s.waiting.Load() == 0 {
		return
	}
	s.mu.Unlock()
	// A waiter woken by Unlock is queued to run on this processor next:
	// yield so that it runs before this goroutine takes the lock again.
	runtime.Gosched()
	s.lock()
}

// inWheel reports whether tick f is after the shard's now and after the
// running Advance's frontier. A timer filed at such a tick is in a wheel
// slot whose tick has not come; one on the late or firing list is
// filed at or before one of them. A later-move (see Timer.rearm) asks it
// without the lock, of the due tick of the deadline it replaces: a timer is
// filed at that tick or before, and the timers of the late list at
// exactly that tick (they are never moved later in place; a panicking
// callback's leftovers, filed before, the firing re-files by deadline), so
// a due tick past both means a slot — or a timer collected for firing
// since, which the firing re-files by its deadline. The frontier is loaded first:
// endAdvance moves every shard's now before it clears the frontier, so a
// cleared frontier comes with a now at least as far.
func (s *shard) inWheel(f int64) bool {
	return f > s.h.frontier.Load() && f > s.now.Load()
}

// dueInWheel is inWheel of the due tick of deadline w, without its
// division: dueTick(w) > m exactly when w > m·tick. now, and so m, is
// never negative, and m·tick does not overflow up to the last tick.
func (s *shard) dueInWheel(w int64) bool {
	m := max(s.h.frontier.Load(), s.now.Load())
	return m <= s.h.lastTick && w > m*s.h.tick
}

// fileLocked files t under due tick d: on the late list if d is before
// now (see fileLateLocked), otherwise in the slot of the lowest level whose
// current revolution contains d. A timer just armed (fresh) also goes on
// the late list when armed by a callback (or beside one) for a tick already
// being fired, which waits for the next Advance, so that a callback that
// re-arms itself for "now" cannot keep one Advance from returning, and the
// order of one Advance holds. One that the shard files again by its
// deadline (a cascade, a later-move found when its tick came) goes to the
// slot for that tick, to fire in this Advance. A timer due after the last
// tick goes on the never list: its coarse slot would be an event for
// Advance and Next to wait for. s.mu must be held.
func (s *shard) fileLocked(t *Timer, d int64, fresh bool) {
	now := s.now.Load()
	if d < now || fresh && s.advancing && d <= max(now, s.h.frontier.Load()) {
		s.fileLateLocked(t, d)
		return
	}
	t.setFiledLocked(d)
	if d > s.h.lastTick {
		s.never.pushBack(t)
		return
	}
	s.slotLocked(t, d)
}

// fileLateLocked files t, due at tick d, a tick already come, on the late
// list, which the next Advance fires first, in the order filed: arming
// stays O(1) in any order, and such timers are as late as they will be. A
// tick already come is one before now, or at now or the running Advance's
// frontier (see lateForLocked), so every late timer is filed at or before
// now once that Advance ends. s.mu must be held.
func (s *shard) fileLateLocked(t *Timer, d int64) {
	t.setFiledLocked(d)
	if s.late.empty() || d < s.lateMin {
		s.lateMin = d
	}
	s.late.pushBack(t)
}

// collectLateLocked moves the late timers due by tick c to the firing list,
// in the order filed. Every late timer is filed at or before now, so all
// are due, in O(1), unless the clock went back before now: then each is
// looked at, in batches (see batch), the timers not due stay, and lateMin
// bounds them again. s.mu must be held.
func (s *shard) collectLateLocked(c int64) {
	if c >= s.now.Load() {
		s.late.moveAllTo(&s.firing)
		return
	}
	s.lateMin = math.MaxInt64
	for n, t := 1, s.late.next; t != &s.late; n++ {
		s.walk = t.next // a Stop or re-arm of that timer moves walk on (see unlinkLocked)
		if t.filed <= c {
			t.unlink()
			s.firing.pushBack(t)
		} else {
			s.lateMin = min(s.lateMin, t.filed)
		}
		if n%s.h.batch == 0 {
			s.yieldLocked()
		}
		t = s.walk
	}
	s.walk = nil
}

// requeueLocked puts the timers left on the firing list (by a callback
// that panicked, or collected by endAdvance) back at the head of the late
// list, for the next Advance. s.mu must be held.
func (s *shard) requeueLocked() {
	s.late.moveAllTo(&s.firing)
	s.firing.moveAllTo(&s.late)
	s.lateMin = math.MinInt64 // due at once, as far as the driver knows
}

// tallyLocked counts an arming that starts (by +1: a timer armed that was
// not, in stats.armed) or ends (by -1, in stats.fired or stats.stopped):
// the only place the count of armed timers changes. s.mu must be held.
func (s *shard) tallyLocked(by int, stat *uint64) {
	s.count += by
	*stat++
}

// slotLocked links t, whose filed is d, no earlier than now, in the slot
// of the lowest level whose current revolution contains d. s.mu must be
// held.
func (s *shard) slotLocked(t *Timer, d int64) {
	i := 0
	for d > s.levels[i].last {
		i++
		if i == len(s.levels) {
			s.addLevelLocked()
		}
	}
	l := s.levels[i]
	sl := l.slotOf(d)
	l.setOccupied(sl)
	l.slots[sl].pushBack(t)
	if ev := l.start + int64(sl)*l.width; ev < s.workFrom.Load() { // the slot's event: its first tick
		s.workFrom.Store(ev)
	}
}

// addLevelLocked adds a level above the top one, for deadlines beyond the
// top's current revolution. It is not called once a level spans every tick.
func (s *shard) addLevelLocked() {
	top := s.levels[len(s.levels)-1]
	l := newLevel(len(s.levels), s.h.top, top.span)
	l.setNow(s.now.Load())
	s.levels = append(s.levels, l)
}

// unlinkLocked takes t off whatever list holds it, keeping the occupancy
// bitmaps exact. s.mu must be held.
func (s *shard) unlinkLocked(t *Timer) {
	if t == s.walk {
		s.walk = t.next // collectLateLocked goes on from the next one
	}
	head := t.unlink()
	// If that emptied the list, and it is the slot t was filed in, its
	// occupancy bit goes. That slot is the one slotLocked chose: until the
	// slot's cascade, now stays before the slot's first tick and in the same
	// revolution of its level. A tick before that level's revolution is a
	// late timer's.
	for i := 0; head != nil && i < len(s.levels); i++ {
		if l := s.levels[i]; t.filed <= l.last {
			if sl := l.slotOf(t.filed); t.filed >= l.start && head == &l.slots[sl] {
				l.clearOccupied(sl)
			}
			return
		}
	}
}

// setNowLocked moves the current tick to now. s.mu must be held.
func (s *shard) setNowLocked(now int64) {
	s.now.Store(now)
	for _, l := range s.levels {
		l.setNow(now)
	}
}

// nextEventLocked returns the earliest event of the wheels: the first tick
// of the earliest occupied slot, preferring the higher level on a tie, so
// cascades into a tick come before it fires. s.mu must be held.
func (s *shard) nextEventLocked() (tick int64, lv, slot int, ok bool) {
	now := s.now.Load()
	for i := len(s.levels) - 1; i >= 0; i-- {
		if e, sl, found := s.levels[i].next(s.levels[i].slotOf(now)); found && (!ok || e < tick) {
			tick, lv, slot, ok = e, i, sl, true
		}
	}
	return
}

// nextLocked returns the tick of the shard's next work for an Advance, and
// false if it has none: the wheels' next event (a firing or a cascade).
// withLate adds the late list (its lower bound lateMin), which the next
// Advance fires first: the driver asks with it, to call that Advance; an
// Advance's rounds ask without it. It costs O(levels), not O(timers). s.mu
// must be held.
func (s *shard) nextLocked(withLate bool) (int64, bool) {
	e, _, _, ok := s.nextEventLocked()
	if withLate && !s.late.empty() && (!ok || s.lateMin < e) {
		e, ok = s.lateMin, true // may be earlier than needed after a Stop: harmless
	}
	return e, ok
}

// collectLocked processes, in order, the wheels' events up to tick c,
// cascading coarse slots and moving the timers of level-0 slots to the
// firing list. It
// leaves now at c (or where it was, if later). s.mu must be held; it is
// released and taken again between batches of a long cascade.
func (s *shard) collectLocked(c int64) {
	for e, lv, sl, ok := s.nextEventLocked(); ok && e <= c; e, lv, sl, ok = s.nextEventLocked() {
		if e > s.now.Load() {
			s.setNowLocked(e)
		}
		l := s.levels[lv]
		if lv == 0 {
			l.clearOccupied(sl)
			l.slots[sl].moveAllTo(&s.firing)
			continue
		}
		s.cascadeLocked(l, sl)
	}
	if c > s.now.Load() {
		s.setNowLocked(c)
	}
}

// cascadeLocked places again, each at a lower level, the timers of slot sl
// of level l, whose first tick is now, in batches: between two, arming and
// stopping (of these timers too) can take the lock. No timer can be filed
// into the slot meanwhile, as the level below now covers its ticks. s.mu
// must be held.
func (s *shard) cascadeLocked(l *level, sl int) {
	sent := &l.slots[sl]
	for n := 1; !sent.empty(); n++ {
		t := sent.next
		t.unlink()
		s.refileLocked(t, math.MinInt64)
		if n%s.h.batch == 0 {
			s.yieldLocked()
		}
	}
	l.clearOccupied(sl)
}

// claimLocked ends the arming of t, bound to b and taken off the firing
// list, if its deadline is still due at the tick it is filed at: a later-move
// may have changed it since (see Timer.Reset). when becomes unfiled, or
// for a periodic timer frozen, for rearmPeriodicLocked to file it for its
// next run, at next, the first instant after the Advance whose clock read
// clockNs. It returns the deadline it found, next, and whether it claimed
// the arming: a later-move that comes after finds when changed and takes
// the lock. s.mu must be held.
func (t *Timer) claimLocked(b *binding, clockNs int64) (w, next int64, due bool) {
	h := b.s.h
	for {
		p := t.when.Load()
		w = t.deadlineLocked(h, p)
		if h.dueTick(w) != t.filed {
			return w, 0, false
		}
		to := p | unfiledBit
		if b.period > 0 {
			next = h.nextRun(w, b.period, clockNs)
			to = p | frozenBit
		}
		if t.when.CompareAndSwap(p, to) {
			return w, next, true
		}
	}
}

// fireLocked runs the callbacks of the timers on the firing list, in order,
// with s.mu released around each, and returns how many ran: all due by tick
// c, the tick collected up to. clockNs is the clock's reading, for the lateness statistics and the next run of a
// periodic timer. *held tells whether s.mu is held: if a callback panics,
// the panic propagates with s.mu released and the rest of the list is left
// for the next Advance. s.mu must be held.
//
// A periodic timer is armed for its next run before its callback starts,
// so Stop during the callback stops it. A timer bound by InitOn stays
// armed, its run pending, until the executor starts the run (see runOn).
func (s *shard) fireLocked(c, clockNs int64, held *bool) (ran int) {
	for {
		t := s.firing.next
		if t == &s.firing {
			return ran
		}
		t.unlink()
		b := t.b.Load()
		_, next, due := t.claimLocked(b, clockNs)
		if !due {
			s.refileLocked(t, c) // moved later since it was filed
			continue
		}
		s.stats.lateness.add(satAdd(clockNs, -max(s.h.tickNanos(t.filed), math.MinInt64+1))) // saturated: a deadline centuries past is very late, not on time
		switch {
		case b.period > 0:
			s.rearmPeriodicLocked(t, next)
		case b.exec: // still counted: armed until the run starts (see runOn)
		default:
			s.tallyLocked(-1, &s.stats.fired)
		}
		if b.exec {
			s.handOverLocked(t)
		}
		f, fire := t.f, b.fire
		*held = false
		s.mu.Unlock()
		ran++
		if fire != nil {
			fire(t)
		} else {
			f()
		}
		s.lock()
		*held = true
	}
}
