package timingwheel

// A binding is what a Timer is bound to besides its callback: the shard
// whose lock guards it, and how it runs, once or periodically, on the
// advancing goroutine, through an executor (see Timer.InitOn), or through
// a func given the timer (Timeouts'). Keeping these here rather than in a
// word of every Timer keeps the Timer at 48 bytes, a size class of its
// own: a Timer of 56 bytes would cost 64 on the heap.
//
// Bindings are shared: every one-shot timer of a shard points to the
// shard's oneShot, and periodic timers to the binding the shard keeps for
// their period (see bindingLocked); those never change once made. Two
// kinds are a timer's or a set's own, and a timer bound to one stays on it
// (and so on its shard) until Init or InitOn binds it again (see fixed):
// an executor timer's, made by InitOn, whose period and pending flag
// change in place; and those of a Timeouts, one per shard of the set and
// of the hierarchy, whose fire serves all the set's timers there. A timer
// moves from one binding to another, and an executor binding changes, only
// with its shard's lock held.
type binding struct {
	s      *shard
	period int64 // ns between the runs of a periodic timer; 0: one-shot
	// fire, if set, is called with the timer instead of the timer's own f:
	// one func for every timer of the binding, told which one fired.
	fire func(*Timer)
	exec bool // bound by InitOn: f hands the run to an executor
	// pending, for an executor timer, says that a run was handed over and
	// has not started (see Timer.runOn).
	pending bool
}

// maxBindings bounds the periodic bindings a shard keeps. Past it the
// table starts afresh: timers keep the bindings they have, and a period
// seen again costs one allocation once more.
const maxBindings = 1024

// bindingLocked returns s's binding for timers with period per (0:
// one-shot) that run on the advancing goroutine. Only the first timer of a
// period on s allocates its binding. s.mu must be held.
func (s *shard) bindingLocked(per int64) *binding {
	if per == 0 {
		return &s.oneShot
	}
	if b := s.periodic[per]; b != nil {
		return b
	}
	if s.periodic == nil || len(s.periodic) >= maxBindings {
		s.periodic = make(map[int64]*binding)
	}
	b := &binding{s: s, period: per}
	s.periodic[per] = b
	return b
}

// moveLaterFree reports whether a timer bound to b, once filed, may be
// moved later without its shard's lock (see Timer.Reset): a one-shot timer
// whose callback runs on the advancing goroutine. A periodic timer's
// Reset makes it one-shot, and an executor timer's run may be pending:
// both change more than the deadline, under the lock. exec is read
// first: an executor binding's period changes in place.
func (b *binding) moveLaterFree() bool { return !b.exec && b.period == 0 }

// fixed reports whether a timer bound to b keeps b, and its shard, until
// it is bound again: b is the timer's own (InitOn) or a set's (Timeouts).
// Neither field changes once b is made, so it may be read without the
// lock.
func (b *binding) fixed() bool { return b.exec || b.fire != nil }
