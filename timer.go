package timingwheel

import (
	"sync/atomic"
	"time"
)

// Timer is one timer of a [Hierarchy], created by [Hierarchy.AfterFunc],
// [Hierarchy.AtFunc] or [Hierarchy.Every], or held by value in the caller's
// own struct and bound with [Timer.Init] or [Timer.InitOn]. Its methods
// mirror [time.Timer]'s. A zero Timer is not usable until Init: its other
// methods panic. A Timer must not be copied once created or initialized
// (go vet reports copies).
//
// Every method except Init and InitOn is safe for concurrent use, also on
// the same Timer. Concurrent re-arms of one timer take effect one after
// another, each at an instant during its call, and a Reset(d) measures d
// from a clock reading taken during its call after the re-arm before it
// took effect: of two Resets, the one that takes effect later also
// measures d from a later reading. That holds whatever happened between:
// a Reset that finds the timer armed and, before it takes effect, sees it
// stopped, fired or re-armed by another call — even armed again for the
// very deadline it had — takes effect after that call, from a reading
// taken after it. [Timer.Deadline] returns the deadline of the re-arm that
// took effect last.
type Timer struct {
	next, prev *Timer // position in a list; nil when in none
	// b is what the timer is bound to: its shard, and whether it is
	// periodic or runs on an executor. It changes only with the shard's
	// lock held, and moves to another shard only while the timer is
	// unarmed (see resetTo), so a method that locks b's shard checks after
	// locking that the shard is still b's.
	b atomic.Pointer[binding]
	// when is the deadline word (see when.go): whether the timer is filed
	// in a list of its shard, a generation, and the deadline as an offset
	// from filed. It is the one word a later-move changes, without the
	// shard's lock (see Reset): a compare-and-swap from the value it loaded,
	// to a later deadline. Everything else that changes it holds the lock
	// and moves it to the next generation, so a later-move lands only on the
	// arming it loaded; an arming's end (firing, Stop) is itself a
	// compare-and-swap to unfiled, so a later-move and the end of the arming
	// it moves are ordered by this word alone.
	when atomic.Int64
	// filed, while the timer is filed, is the tick it was filed under: its
	// due tick then, and no later than its due tick since (a later-move
	// leaves it where it is; the shard re-files it when that tick comes).
	// While it is not filed, filed keeps the tick it was last filed under
	// (neverArmed if none), which with when gives the last deadline, for
	// Deadline. Written with the shard's lock held, by atomic stores
	// (setFiledLocked): a later-move and Deadline load it without the lock.
	filed int64
	f     func()
}

// Init binds t, a zero or unarmed Timer held by value (typically a field of
// the caller's own struct: a connection, a packet record), to h with
// callback f, and returns t, unarmed. [Timer.Reset] and [Timer.ResetAt] then
// arm it (returning false the first time) and [Timer.Stop] disarms it,
// exactly as for a timer returned by [Hierarchy.AfterFunc] and then stopped.
// Neither Init nor any later Reset, ResetAt or Stop allocates.
//
// f may refer to t itself, to re-arm it (the retransmit pattern): t exists
// before it is first armed, so there is no race with a running driver.
//
//	p.rto.Init(h, func() { p.resend(); p.rto.Reset(p.backoff()) })
//	p.rto.Reset(rto)
//
// An unarmed Timer (stopped, or fired) may be initialized again, to
// another hierarchy or callback. Unlike the other methods, Init must not
// run concurrently with any other method of the same Timer: initialize a
// timer before sharing it. Init panics if h or f is nil, or if t is armed.
// Init makes t a one-shot timer whose callback runs on the advancing
// goroutine, whatever it was bound as before.
func (t *Timer) Init(h *Hierarchy, f func()) *Timer {
	if t == nil {
		panic("timingwheel: Timer.Init called on a nil *Timer")
	}
	if h == nil || h.shards == nil {
		panic("timingwheel: Timer.Init called with a nil or zero Hierarchy")
	}
	if f == nil {
		panic("timingwheel: Timer.Init called with a nil func")
	}
	if t.b.Load() != nil {
		s, _ := t.lockShard()
		armed := t.armedLocked()
		s.mu.Unlock()
		if armed {
			panic("timingwheel: Timer.Init called on an armed Timer")
		}
	}
	t.bindTo(&h.pickShard().oneShot, f)
	return t
}

// bindTo binds t, unarmed or not yet seen by other goroutines, to b with
// callback f (nil if b has a fire func), never armed.
func (t *Timer) bindTo(b *binding, f func()) {
	h := b.s.h
	t.b.Store(b)
	t.f = f
	t.when.Store(h.nextGen(t.when.Load()) | unfiledBit)
	atomic.StoreInt64(&t.filed, neverArmed)
}

// bound returns the timer's binding, panicking with a clear message for a
// Timer that is not bound to a hierarchy.
func (t *Timer) bound(method string) *binding {
	if t == nil {
		panic("timingwheel: " + method + " called on a nil *Timer")
	}
	b := t.b.Load()
	if b == nil {
		panic("timingwheel: " + method + " called on a zero Timer: create timers with AfterFunc, AtFunc or Every, or bind one held by value with Init or InitOn")
	}
	return b
}

// shard returns the timer's shard, panicking with a clear message for a
// Timer that is not bound to a hierarchy.
func (t *Timer) shard(method string) *shard { return t.bound(method).s }

// lockShard locks the timer's shard and returns it, and whether it had to
// wait for the lock. If it had to, the current processor shares the shard
// with another: it prefers the next shard from now on, so the timers it
// arms next (and the unarmed ones it re-arms) go there (see resetTo).
func (t *Timer) lockShard() (*shard, bool) {
	for {
		s := t.b.Load().s
		contended := !s.mu.TryLock()
		if contended {
			s.waiting.Add(1)
			s.mu.Lock()
			s.waiting.Add(-1)
		}
		if t.b.Load().s == s {
			if contended && len(s.h.shards) > 1 {
				s.h.prefer(s.h.shards[(s.idx+1)%len(s.h.shards)])
			}
			return s, contended
		}
		s.mu.Unlock() // it moved while unarmed: follow it
	}
}

// Stop prevents the timer from firing. It reports whether the call stopped
// the timer: true until its callback starts, even if an Advance has already
// collected it and is running other callbacks first; false if the callback
// has started or the timer was already stopped. Stop does not wait for a
// running callback. The timer is unlinked at once and the hierarchy keeps
// no reference to it.
func (t *Timer) Stop() bool {
	t.shard("Stop")
	s, _ := t.lockShard()
	stopped := t.stopLocked(s)
	emptied := stopped && s.count == 0
	s.mu.Unlock()
	if emptied {
		s.h.idle() // perhaps nothing is armed: the driver need not wake
	}
	return stopped
}

// stopLocked is Stop with t's shard s locked, but for telling the driver
// when s is emptied (see Stop).
func (t *Timer) stopLocked(s *shard) bool {
	if !t.armedLocked() {
		return false
	}
	t.cancelRunLocked(s)
	if t.unfileLocked(s.h) {
		s.unlinkLocked(t) // filed stays: with when, the deadline stopped, for Deadline
	}
	t.rebindLocked(s, 0)
	s.tallyLocked(-1, &s.stats.stopped)
	return true
}

// armedLocked reports whether t is armed: filed in a list, or fired with
// its run handed to an executor and not started (see InitOn). t's shard's
// lock must be held.
func (t *Timer) armedLocked() bool {
	return !unfiled(t.when.Load()) || t.b.Load().pending
}

// Reset re-arms the timer to fire d from now (rounded up to the next tick),
// with the same callback. It reports whether the timer was armed: true means
// this call also cancelled the pending firing, exactly as [Timer.Stop] would
// have; false means the timer had fired (its callback started) or been
// stopped, and is now armed again. A callback may Reset its own timer. A
// d <= 0 is rounded up like any other (see [Hierarchy.AfterFunc]) and
// fires on an Advance, never inside Reset. Reset makes a periodic timer
// (see [Hierarchy.Every]) a one-shot one.
//
// Moving an armed one-shot timer's deadline later — what a connection's
// reader does on every read — takes no lock and writes nothing but the
// timer itself: one clock read and one compare-and-swap of its deadline.
// The timer stays where it is filed, and its shard files it again when
// that tick comes. A move of more than about 4.6 minutes (2^38 ns) past
// that tick takes the lock once, to file the timer under its new tick; a
// hierarchy whose tick is longer than about 2 minutes takes it for every
// Reset. Any other Reset takes the timer's shard's lock. Of two
// concurrent Resets, the one that takes effect later also measured d from
// a later clock reading. Reset never allocates.
func (t *Timer) Reset(d time.Duration) bool {
	t.bound("Reset")
	return t.rearm(arming{v: int64(d), rel: true})
}

// ResetAt is like [Timer.Reset] with an absolute deadline; a deadline in the
// past fires on the first [Hierarchy.Advance] whose clock has reached its
// tick, as for [Hierarchy.AtFunc]. It lets a caller that re-arms
// many timers read the clock once for all of them (see [Hierarchy.Now]),
// which is much cheaper than a clock read per timer. Moving an armed
// one-shot timer later takes no lock, as for Reset.
func (t *Timer) ResetAt(deadline time.Time) bool {
	b := t.bound("ResetAt")
	return t.rearm(arming{v: b.s.h.offset(deadline)})
}

// rearm re-arms t as a says (see resetTo). If t is filed in a wheel slot,
// one-shot, and a moves its deadline later, it only swaps the deadline
// in, without the shard's lock: it loads the deadline word, then the
// binding and the tick t is filed under, reads the clock, and swaps its
// deadline into the word it loaded. Anything else that changed the word
// since it was loaded (a concurrent re-arm, the timer firing or stopped,
// even re-armed since for the very deadline and binding it had: every
// such change moves the word to a new generation, see when.go) makes the
// swap fail, and the re-arm then takes the lock. The clock is read after
// the word is loaded, so of two re-arms the one whose swap lands later read
// the clock later. The binding is loaded after the word: a re-arm under
// the lock binds the timer before it changes the word, so a binding that
// allows the move and a swap that lands both belong to the arming loaded.
// A move to the deadline the timer has is a re-arm too: it moves the word
// to the next generation.
func (t *Timer) rearm(a arming) bool {
	p := t.when.Load()
	if movable(p) {
		b := t.b.Load()
		h := b.s.h
		if b.moveLaterFree() && h.laterFree {
			base := h.base(atomic.LoadInt64(&t.filed))
			old := base + p&h.offMask
			w := a.deadline(h)
			to := p&^h.offMask | (w - base)
			if w == old {
				to = h.nextGen(p) | p&h.offMask
			}
			// A deadline past the last tick never fires: it goes on the
			// never list under the lock (see fileLocked), not in a slot.
			if w >= old && uint64(w-base) <= uint64(h.offMask) && w <= h.lastTick*h.tick && b.s.dueInWheel(old) && t.when.CompareAndSwap(p, to) {
				return true
			}
		}
	}
	return t.resetTo(a)
}

// Deadline returns the deadline the timer was last armed with: for a
// periodic timer, its next run's instant. After the timer fires or is
// stopped it still returns that deadline; for a timer initialized by Init
// and never armed, it returns the zero Time. The Time returned is Equal to
// the deadline given (to ResetAt or AtFunc, or the clock's reading plus d),
// as an offset from the hierarchy's origin: in the origin's location, and
// with its monotonic reading, not the deadline's own. A deadline more than
// about 292 years from the hierarchy's origin is held at that limit.
func (t *Timer) Deadline() time.Time {
	s := t.shard("Deadline")
	h := s.h
	p := t.when.Load()
	// Filed: the word, then the tick it goes with (see when.go), and the
	// word again: the same word both times means the same arming, filed
	// under that tick throughout.
	if movable(p) {
		w := h.base(atomic.LoadInt64(&t.filed)) + p&h.offMask
		if t.when.Load() == p {
			return h.origin.Add(time.Duration(w))
		}
	}
	s, _ = t.lockShard() // not filed (the last deadline), or changing
	f, w := t.filed, t.deadlineLocked(h, t.when.Load())
	s.mu.Unlock()
	if f == neverArmed {
		return time.Time{}
	}
	return h.origin.Add(time.Duration(w))
}

// An arming says how resetTo re-arms a timer.
type arming struct {
	v      int64 // the deadline in ns since the origin, or, if rel, the duration from now
	rel    bool
	period int64 // for a periodic timer; 0: one-shot
}

// deadline returns the deadline a arms for, reading h's clock if it is
// relative.
func (a arming) deadline(h *Hierarchy) int64 {
	if a.rel {
		return h.after(time.Duration(a.v))
	}
	return a.v
}

// resetTo re-arms t as a says, under its shard's lock. A relative deadline
// is measured from a clock reading taken after the last change of when
// that this re-arm replaces: when is loaded, then the clock read, and the
// deadline swapped in from what was loaded, again with a fresh reading if
// a later-move came between, so that concurrent re-arms of one timer take
// effect in one order and their clock readings follow that order.
//
// If t is unarmed, its binding is not fixed (an executor's or a Timeouts':
// see binding.fixed) and t's shard's lock was contended, it arms t in the current processor's shard if that shard's lock is free: a
// timer initialized on one goroutine (an accept loop) and then re-armed
// from others (each connection's) follows the goroutines that use it once
// they meet on its lock, instead of making them share one shard. An
// uncontended re-arm leaves t where it is and spares the lookup of the
// processor's shard.
func (t *Timer) resetTo(a arming) bool {
	s, contended := t.lockShard()
	armed := t.armedLocked()
	if !armed {
		if contended && !t.b.Load().fixed() {
			if n := s.h.pickShard(); n != s && n.mu.TryLock() {
				t.b.Store(n.bindingLocked(a.period))
				s.mu.Unlock()
				s = n
			}
		}
	}
	// The binding first, then the deadline word: a later-move that loads
	// the word before this re-arm changes it and the binding after finds
	// the binding changed and takes the lock; one whose swap lands before
	// this re-arm's makes this one's swap fail and read the clock again.
	t.cancelRunLocked(s)
	t.rebindLocked(s, a.period)
	h := s.h
	for {
		p := t.when.Load()
		w := a.deadline(h)
		d := h.dueTick(w)
		if unfiled(p) { // only holders of the lock change it from unfiled
			if !armed {
				s.tallyLocked(+1, &s.stats.armed)
			}
			s.fileLocked(t, d, true)
			t.publishLocked(h, w) // filed now: later-moves may swap it from here on
			s.mu.Unlock()
			s.h.wakeFor(d)
			return armed
		}
		f := t.filed
		if d == f || d > f && d <= h.lastTick && s.inWheel(f) && uint64(w-h.base(f)) <= uint64(h.offMask) {
			// Kept its tick, or moved later in a wheel: it stays where it
			// is filed, and the shard files it again by its deadline when
			// that tick comes.
			if t.when.CompareAndSwap(p, h.nextGen(p)|(w-h.base(f))) {
				s.mu.Unlock()
				return true
			}
			continue
		}
		if !t.freezeLocked(h, p) {
			continue
		}
		s.unlinkLocked(t)
		s.fileLocked(t, d, true)
		t.publishLocked(h, w)
		s.mu.Unlock()
		s.h.wakeFor(d)
		return true
	}
}

// rebindLocked binds t to shard s (locked) with period per (0: one-shot).
// A timer with a fixed binding keeps it: an executor timer stays one, on
// its shard (its run must not be pending: see cancelRunLocked), and a
// Timeouts' timer is only ever re-armed one-shot, on its own shard (s is
// b.s: see resetTo), so it matches no case.
func (t *Timer) rebindLocked(s *shard, per int64) {
	b := t.b.Load()
	switch {
	case b.exec: // its own, on its own shard: the period changes in place
		b.period = per
	case b.s != s || b.period != per:
		t.b.Store(s.bindingLocked(per))
	}
}

// isFiled reports whether t is filed in a list: armed, and not an executor
// timer's pending run. Timeouts asks it under its own lock, which every
// re-arm of its timers holds.
func (t *Timer) isFiled() bool { return !unfiled(t.when.Load()) }
