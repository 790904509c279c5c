package timingwheel

// InitOn is [Timer.Init] for a timer whose callback runs through an
// executor: an event loop, a worker pool. When t fires, the goroutine that
// advances the hierarchy calls exec(run), and run, when the executor calls
// it, calls f — unless t was stopped or re-armed after it fired and before
// run started. exec must not block (typically it queues run on the loop,
// as gnet's EventLoop.Execute or a buffered channel does) and must call
// run at most once per call, at any later time, on any goroutine.
//
// Between the firing and the start of run, t counts as armed: [Timer.Stop]
// and [Timer.Reset] return true, exactly as for a timer whose callback has
// not started, and f does not run for that arming. So a loop that re-arms
// or stops a connection's timer on the loop itself never sees a callback
// for an arming it cancelled. A run called more than once calls f at most
// once. For a periodic timer ([Timer.ResetEvery]) each run is handed over
// the same way, the next one armed before it.
//
// The run exec is handed is the same func for every firing of one binding
// (so that firing allocates nothing): a run is not tied to the firing it
// was handed over for. One called late, after its firing was stopped or
// re-armed and a later firing of t is pending, takes that later firing and
// calls f for it, and the later firing's own run then calls nothing. So f
// runs at most once per firing, never for a firing cancelled before a run
// took it, and never before a firing; an executor that must tell the
// firings apart (a run per loop, say) binds t to each with its own InitOn.
//
// InitOn allocates run, the function that hands it to exec and t's own
// binding (see binding.go) once; the arming, firing and stopping of t
// allocate nothing. A run handed over before t was bound again (by Init or
// InitOn) does not call f, nor the f bound since. Like Init, InitOn must
// not run concurrently with t's other methods, and panics if h, exec or f
// is nil, or if t is armed.
func (t *Timer) InitOn(h *Hierarchy, exec func(run func()), f func()) *Timer {
	if t == nil {
		panic("timingwheel: Timer.InitOn called on a nil *Timer")
	}
	if h == nil || h.shards == nil {
		panic("timingwheel: Timer.InitOn called with a nil or zero Hierarchy")
	}
	if exec == nil {
		panic("timingwheel: Timer.InitOn called with a nil exec func")
	}
	if f == nil {
		panic("timingwheel: Timer.InitOn called with a nil func")
	}
	// t's own binding, this InitOn's: a run handed over by an earlier
	// binding of t finds another and does not take this one's firing.
	own := new(binding)
	run := func() {
		if t.runOn(own) {
			f()
		}
	}
	t.Init(h, func() { exec(run) })
	*own = binding{s: t.b.Load().s, exec: true}
	t.b.Store(own)
	return t
}

// An executor timer's run is pending from the moment it fires until the
// executor starts it (runOn), or a Stop or re-arm cancels it
// (cancelRunLocked). Meanwhile a one-shot timer is in no list but still
// counted as armed: the shard's hops counts those.

// handOverLocked marks the run of t, which just fired and whose f is about
// to hand the run to its executor, pending. s.mu must be held.
func (s *shard) handOverLocked(t *Timer) {
	t.b.Load().pending = true
	if unfiled(t.when.Load()) { // one-shot: its arming ends when the run starts
		s.hops++
	}
}

// cancelRunLocked cancels t's pending run, if it has one: the run, when
// the executor starts it, will not call f. t's shard s must be locked.
func (t *Timer) cancelRunLocked(s *shard) {
	b := t.b.Load()
	if !b.pending {
		return
	}
	b.pending = false
	if unfiled(t.when.Load()) {
		s.hops--
	}
}

// runOn takes the run an executor timer bound to own handed over,
// reporting whether its f is to be called: false if the timer was stopped
// or re-armed since it fired, the run was taken already, or t was bound
// again since (its pending run is another binding's).
func (t *Timer) runOn(own *binding) bool {
	s, _ := t.lockShard()
	if t.b.Load() != own || !own.pending {
		s.mu.Unlock()
		return false
	}
	own.pending = false
	emptied := false
	if unfiled(t.when.Load()) { // a one-shot run: the arming ends here
		s.hops--
		s.tallyLocked(-1, &s.stats.fired)
		emptied = s.count == 0
	}
	s.mu.Unlock()
	if emptied {
		s.h.idle()
	}
	return true
}
