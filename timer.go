package timingwheel

import (
	"sync/atomic"
	"time"
)

// Timer is one timer of a [Hierarchy], created by [Hierarchy.AfterFunc] or
// [Hierarchy.AtFunc], or held by value in the caller's own struct and bound
// with [Timer.Init]. Its methods mirror [time.Timer]'s. A zero Timer is
// not usable until Init: its other methods panic. A Timer must not be
// copied once created or initialized (go vet reports copies).
type Timer struct {
	next, prev *Timer // position in a list; nil when in none
	// sh is the shard the timer belongs to. It changes only while the
	// timer is unarmed, with the old shard's lock held (see resetTo), so
	// a method that locks sh checks after locking that it still is sh.
	sh atomic.Pointer[shard]
	// when is the deadline in nanoseconds since the origin. It may be moved
	// later without the lock (Timer.resetTo), so it is atomic.
	when atomic.Int64
	// filed is the tick the timer was placed for (its due tick when placed),
	// or unarmed/claimed. Written with the shard's lock held; read without
	// it by resetTo.
	filed atomic.Int64
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
func (t *Timer) Init(h *Hierarchy, f func()) *Timer {
	if h == nil || h.shards == nil {
		panic("timingwheel: Timer.Init called with a nil or zero Hierarchy")
	}
	if f == nil {
		panic("timingwheel: Timer.Init called with a nil func")
	}
	if t.sh.Load() != nil {
		s, _ := t.lockShard()
		armed := t.filed.Load() != unarmed
		s.mu.Unlock()
		if armed {
			panic("timingwheel: Timer.Init called on an armed Timer")
		}
	}
	t.sh.Store(h.pickShard())
	t.f = f
	t.filed.Store(unarmed)
	t.when.Store(neverArmed)
	return t
}

// shard returns the timer's shard, panicking with a clear message for a
// Timer that is not bound to a hierarchy.
func (t *Timer) shard(method string) *shard {
	s := t.sh.Load()
	if s == nil {
		panic("timingwheel: " + method + " called on a Timer not created by AfterFunc or AtFunc, nor initialized by Init")
	}
	return s
}

// lockShard locks the timer's shard and returns it, and whether it had to
// wait for the lock. If it had to, the current processor shares the shard
// with another: it prefers the next shard from now on, so the timers it
// arms next (and the unarmed ones it re-arms) go there (see resetTo).
func (t *Timer) lockShard() (*shard, bool) {
	for {
		s := t.sh.Load()
		contended := !s.mu.TryLock()
		if contended {
			s.waiting.Add(1)
			s.mu.Lock()
			s.waiting.Add(-1)
		}
		if t.sh.Load() == s {
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
	if t.filed.Load() == unarmed {
		s.mu.Unlock()
		return false
	}
	s.unlinkLocked(t)
	t.filed.Store(unarmed)
	s.count--
	s.stats.stopped++
	emptied := s.count == 0
	s.mu.Unlock()
	if emptied {
		s.h.idle() // perhaps nothing is armed: the driver need not wake
	}
	return true
}

// Reset re-arms the timer to fire d from now (rounded up to the next tick),
// with the same callback. It reports whether the timer was armed: true means
// this call also cancelled the pending firing, exactly as [Timer.Stop] would
// have; false means the timer had fired (its callback started) or been
// stopped, and is now armed again. A callback may Reset its own timer. A
// d <= 0 is rounded up like any other (see [Hierarchy.AfterFunc]) and
// fires on an Advance, never inside Reset.
//
// Reset never allocates. Moving an armed timer's deadline later takes no
// lock unless the timer is within level 0's span of firing (1s by default):
// it keeps its slot and is re-filed when the slot comes up.
func (t *Timer) Reset(d time.Duration) bool {
	s := t.shard("Reset")
	return t.resetTo(s, s.h.after(d), true)
}

// ResetAt is like [Timer.Reset] with an absolute deadline; a deadline in the
// past fires on the first [Hierarchy.Advance] whose clock has reached its
// tick, as for [Hierarchy.AtFunc]. It lets a caller that re-arms
// many timers read the clock once for all of them, which is much cheaper
// than a clock read per timer.
func (t *Timer) ResetAt(deadline time.Time) bool {
	s := t.shard("ResetAt")
	return t.resetTo(s, s.h.offset(deadline), true)
}

// Deadline returns the deadline the timer was last armed with. After the
// timer fires or is stopped it still returns that deadline; for a timer
// initialized by Init and never armed, it returns the zero Time. A
// deadline more than about 292 years from the hierarchy's origin is held
// at that limit.
func (t *Timer) Deadline() time.Time {
	s := t.shard("Deadline")
	w := t.when.Load()
	if w == neverArmed {
		return time.Time{}
	}
	return s.h.origin.Add(time.Duration(w))
}

// testHookLazyReset, if set by a test, runs in the lock-free path of
// resetTo: at stage 0 before its store of the deadline, at stage 1 after it.
// At stage 2 it runs in every Reset that moves a deadline later, between
// the loads of the frontier and of now that decide on that path.
var testHookLazyReset func(t *Timer, stage int)

// resetTo re-arms t, of shard s (as read from t.sh), with deadline w (ns
// since origin). If t is unarmed, move is set and t's shard's lock was
// contended, it arms t in the current processor's shard if that shard's
// lock is free: a timer initialized on one goroutine (an accept loop) and
// then re-armed from others (each connection's) follows the goroutines
// that use it once they meet on its lock, instead of making them share one
// shard. An uncontended re-arm leaves t where it is and spares the lookup
// of the processor's shard. Timeouts does not move its timers: their
// callbacks are bound to a shard.
func (t *Timer) resetTo(s *shard, w int64, move bool) bool {
	// Fast path: an armed timer that sits beyond level 0 and moves later
	// only needs its new deadline stored. Its slot comes up no later than
	// before, and the cascade then re-files it by the deadline it finds.
	// Timers at level 0 take the lock, so Next stays exact for them.
	//
	// A cascade reads deadlines in batches with seq odd. If seq was even
	// and is unchanged after the store, no batch overlapped it, so the
	// cascade that takes t reads the new deadline. If Advance claimed t or
	// Stop took it meanwhile, only the lock can tell which came first.
	if old := t.when.Load(); w >= old {
		q := s.seq.Load()
		// A timer armed during an Advance for a tick it has passed waits on
		// the late list, filed at a tick that may be after its shard's now
		// but not after the Advance's frontier: count that as now too. The
		// order of the loads matters (see endAdvance).
		f := t.filed.Load()
		fr := s.h.frontier.Load()
		if testHookLazyReset != nil {
			testHookLazyReset(t, 2)
		}
		now := max(fr, s.now.Load())
		if q&1 == 0 && f > now && f-now >= s.h.lazyTicks {
			if testHookLazyReset != nil {
				testHookLazyReset(t, 0)
			}
			if t.when.CompareAndSwap(old, w) {
				if testHookLazyReset != nil {
					testHookLazyReset(t, 1)
				}
				if s.seq.Load() == q && t.filed.Load() == f && t.sh.Load() == s {
					return true
				}
			}
		}
	}
	d := s.h.dueTick(w)
	s, contended := t.lockShard()
	f := t.filed.Load()
	if f == d && f > s.now.Load() {
		// Re-armed for the tick it is filed under, which is after now: in
		// a wheel slot, or on the late list of a shard behind the running
		// Advance. Only the deadline changes; the timer stays where it is.
		t.when.Store(w)
		s.mu.Unlock()
		return true
	}
	armed := f != unarmed
	if armed {
		s.unlinkLocked(t)
	} else {
		if move && (contended || s.h.moveAlways) {
			if n := s.h.pickShard(); n != s && n.mu.TryLock() {
				t.sh.Store(n)
				s.mu.Unlock()
				s = n
			}
		}
		s.count++
		s.stats.armed++
	}
	t.when.Store(w)
	s.armLocked(t, d)
	s.mu.Unlock()
	s.h.wakeFor(d)
	return armed
}
