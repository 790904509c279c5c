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
// another, each at an instant during its call: a Reset(d) reads the clock
// at that instant, so of two Resets the one that takes effect later also
// measures d from a later reading, and [Timer.Deadline] returns the
// deadline of the re-arm that took effect last.
type Timer struct {
	next, prev *Timer // position in a list; nil when in none
	// b is what the timer is bound to: its shard, and whether it is
	// periodic or runs on an executor. It changes only with the shard's
	// lock held, and moves to another shard only while the timer is
	// unarmed (see resetTo), so a method that locks b's shard checks after
	// locking that the shard is still b's.
	b atomic.Pointer[binding]
	// when is the deadline in nanoseconds since the origin; filed is the
	// tick the timer was placed for (its due tick when placed), or unarmed.
	// Both are guarded by the shard's lock.
	when  int64
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
	t.b.Store(&h.pickShard().oneShot)
	t.f = f
	t.filed = unarmed
	t.when = neverArmed
	return t
}

// shard returns the timer's shard, panicking with a clear message for a
// Timer that is not bound to a hierarchy.
func (t *Timer) shard(method string) *shard {
	b := t.b.Load()
	if b == nil {
		panic("timingwheel: " + method + " called on a zero Timer: create timers with AfterFunc, AtFunc or Every, or bind one held by value with Init or InitOn")
	}
	return b.s
}

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
	if t.filed != unarmed {
		s.unlinkLocked(t)
		t.filed = unarmed
	}
	t.rebindLocked(s, 0)
	s.count--
	s.stats.stopped++
	return true
}

// armedLocked reports whether t is armed: filed in a list, or fired with
// its run handed to an executor and not started (see InitOn). t's shard's
// lock must be held.
func (t *Timer) armedLocked() bool {
	return t.filed != unarmed || t.b.Load().pending
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
// Now is read once the timer's shard is locked, so a Reset that takes
// effect after another concurrent one also measures d from a later clock
// reading. Reset never allocates. Moving an armed timer's deadline later
// usually only stores it, unless the timer is within level 0's span of
// firing (1s by default): it keeps its slot and is re-filed when the slot
// comes up.
func (t *Timer) Reset(d time.Duration) bool {
	t.shard("Reset")
	return t.resetTo(arming{v: int64(d), rel: true, move: true})
}

// ResetAt is like [Timer.Reset] with an absolute deadline; a deadline in the
// past fires on the first [Hierarchy.Advance] whose clock has reached its
// tick, as for [Hierarchy.AtFunc]. It lets a caller that re-arms
// many timers read the clock once for all of them (see [Hierarchy.Now]),
// which is much cheaper than a clock read per timer.
func (t *Timer) ResetAt(deadline time.Time) bool {
	s := t.shard("ResetAt")
	return t.resetTo(arming{v: s.h.offset(deadline), move: true})
}

// Deadline returns the deadline the timer was last armed with: for a
// periodic timer, its next run's instant. After the timer fires or is
// stopped it still returns that deadline; for a timer initialized by Init
// and never armed, it returns the zero Time. A deadline more than about
// 292 years from the hierarchy's origin is held at that limit.
func (t *Timer) Deadline() time.Time {
	t.shard("Deadline")
	// Under the lock: a Reset reads the clock and stores the deadline
	// there, so no Deadline sees the old one after the new one's reading.
	s, _ := t.lockShard()
	w := t.when
	s.mu.Unlock()
	if w == neverArmed {
		return time.Time{}
	}
	return s.h.origin.Add(time.Duration(w))
}

// An arming says how resetTo re-arms a timer.
type arming struct {
	v      int64 // the deadline in ns since the origin, or, if rel, the duration from now
	rel    bool
	period int64 // for a periodic timer; 0: one-shot
	// move lets an unarmed timer move to the current processor's shard
	// when its own shard's lock was contended (see resetTo). Timeouts
	// does not move its timers: their callbacks are bound to a shard.
	move bool
}

// beyondLevel0 reports whether t, filed at tick f of shard s whose now is
// now, sits at least level 0's span after both now and the running
// Advance's frontier: in a coarse slot, so a later deadline need only be
// stored. It loads the frontier, a word Advance writes, only when asked.
// s.mu must be held.
func (t *Timer) beyondLevel0(s *shard, f, now int64) bool {
	n := max(now, s.h.frontier.Load())
	return f > n && f-n >= s.h.lazyTicks
}

// resetTo re-arms t as a says, under its shard's lock: the re-arm takes
// effect there, and a relative deadline is measured from the clock read
// there, so that concurrent re-arms of one timer take effect in one order
// and their clock readings follow that order.
//
// If t is unarmed, a.move is set and t's shard's lock was contended, it
// arms t in the current processor's shard if that shard's lock is free: a
// timer initialized on one goroutine (an accept loop) and then re-armed
// from others (each connection's) follows the goroutines that use it once
// they meet on its lock, instead of making them share one shard. An
// uncontended re-arm leaves t where it is and spares the lookup of the
// processor's shard.
func (t *Timer) resetTo(a arming) bool {
	if testHookReset != nil {
		testHookReset(t)
	}
	s, contended := t.lockShard()
	armed := t.armedLocked()
	if !armed {
		if a.move && !t.b.Load().exec && (contended || s.h.hooks != nil && s.h.hooks.moveAlways) {
			if n := s.h.pickShard(); n != s && n.mu.TryLock() {
				t.b.Store(n.bindingLocked(a.period))
				s.mu.Unlock()
				s = n
			}
		}
	}
	w := a.v
	if a.rel {
		w = s.h.after(time.Duration(a.v))
	}
	t.cancelRunLocked(s)
	t.rebindLocked(s, a.period)
	d := s.h.dueTick(w)
	if f := t.filed; f != unarmed {
		now := s.now.Load()
		// Re-armed for the tick it is filed under, which is after now: in
		// a wheel slot, or on the late list of a shard behind the running
		// Advance. Only the deadline changes; the timer stays where it is.
		// Likewise for a later deadline of a timer beyond level 0: its slot
		// comes up no later than before, and the cascade then re-files it by
		// the deadline it finds. A timer armed during an Advance for a tick
		// it has passed waits on the late list, filed at a tick that may be
		// after its shard's now but not after the Advance's frontier: count
		// that as now too.
		if f == d && f > now || w >= t.when && t.beyondLevel0(s, f, now) {
			t.when = w
			s.mu.Unlock()
			return true
		}
		s.unlinkLocked(t)
	} else if !armed {
		s.count++
		s.stats.armed++
	}
	t.when = w
	s.armLocked(t, d)
	s.mu.Unlock()
	s.h.wakeFor(d)
	return armed
}

// The layers above the core (request deadlines, Timeouts) use
// these, not the Timer's fields.

// home returns the shard t belongs to now, or nil for a zero Timer. It may
// change while t is unarmed; lockShard is the way to hold it.
func (t *Timer) home() *shard {
	if b := t.b.Load(); b != nil {
		return b.s
	}
	return nil
}

// fixedDeadlineNs returns the deadline of a timer that is never re-armed
// once other goroutines can see it (a context's), without the shard's
// lock: the one write of when came before t was shared.
func (t *Timer) fixedDeadlineNs() int64 { return t.when }

// rebindLocked binds t to shard s (locked) with period per (0: one-shot).
// An executor timer stays one, on its shard; its run must not be pending
// (see cancelRunLocked).
func (t *Timer) rebindLocked(s *shard, per int64) {
	b := t.b.Load()
	switch {
	case b.exec: // its own pair, on its own shard: the period changes in place
		b.period, b.flip.period = per, per
	case b.s != s || b.period != per:
		t.b.Store(s.bindingLocked(per))
	}
}

// callback returns t's callback, as Init or armNew bound it.
func (t *Timer) callback() func() { return t.f }
