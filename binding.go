package timingwheel

// A binding is what a Timer is bound to besides its callback: the shard
// whose lock guards it, and how it runs, once or periodically, on the
// advancing goroutine or through an executor (see Timer.InitOn). Keeping
// these here rather than in a word of every Timer keeps the Timer at 48
// bytes, a size class of its own: a Timer of 56 bytes costs 64 on the heap.
//
// A binding never changes once made, and timers share them: every one-shot
// timer of a shard points to the shard's oneShot, every executor one-shot
// timer to one of its onExec, and periodic timers to the binding the shard
// keeps for their period (see bindingLocked). A timer moves from one
// binding to another only with its shard's lock held.
type binding struct {
	s      *shard
	period int64 // ns between the runs of a periodic timer; 0: one-shot
	exec   bool  // bound by InitOn: f hands the run to an executor
	// pending, for an executor timer, says that a run was handed over and
	// has not started (see Timer.runOn); flip is the same binding with
	// pending the other way.
	pending bool
	flip    *binding
}

// maxBindings bounds the periodic bindings a shard keeps. Past it the
// table starts afresh: timers keep the bindings they have, and a period
// seen again costs one allocation once more.
const maxBindings = 1024

type bindingKey struct {
	period int64
	exec   bool
}

// initBindings makes the bindings every shard has from the start.
func (s *shard) initBindings() {
	s.oneShot = binding{s: s}
	s.onExec[0] = binding{s: s, exec: true, flip: &s.onExec[1]}
	s.onExec[1] = binding{s: s, exec: true, pending: true, flip: &s.onExec[0]}
}

// bindingLocked returns s's binding for timers with period per (0: one-shot)
// that run on an executor if exec, with no run pending. Only the first
// timer of a period on s allocates its binding. s.mu must be held.
func (s *shard) bindingLocked(per int64, exec bool) *binding {
	switch {
	case per == 0 && !exec:
		return &s.oneShot
	case per == 0:
		return &s.onExec[0]
	}
	k := bindingKey{per, exec}
	if b := s.periodic[k]; b != nil {
		return b
	}
	if s.periodic == nil || len(s.periodic) >= maxBindings {
		s.periodic = make(map[bindingKey]*binding)
	}
	b := &binding{s: s, period: per}
	if exec {
		pair := new([2]binding)
		pair[0] = binding{s: s, period: per, exec: true, flip: &pair[1]}
		pair[1] = binding{s: s, period: per, exec: true, pending: true, flip: &pair[0]}
		b = &pair[0]
	}
	s.periodic[k] = b
	return b
}
