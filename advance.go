package timingwheel

import (
	"math"
	"sync"
	"sync/atomic"
)

// Advance runs on the calling goroutine the callback of every armed timer
// due by the clock's reading now.
//
// A timer is due once its deadline, rounded up to a tick, is at or before
// the clock's reading. Timers armed for a tick that had already come (a
// past deadline, or one a callback armed for the tick being fired) run
// first, in the order they were armed, shard by shard; then the others, in
// order of their rounded deadlines across all shards. Advance returns how
// many callbacks ran. It
// cascades coarse slots on the way, visiting only slots that hold timers,
// so a jump of the clock by any amount costs work proportional to the
// timers due and the occupied slots crossed.
//
// Calls of Advance, including the driver's, are serialized: one returns
// before the next starts firing. So a callback of h must not call h's
// Advance, nor [Hierarchy.Stop] while the driver runs: each would wait for
// the callback that called it, which cannot return until it does. Like a
// recursive Lock of a [sync.Mutex], that is a deadlock, and nothing detects
// it (the same calls from any other goroutine, or from a callback of
// another hierarchy, just wait their turn). A timer
// armed by a callback for a time already reached fires in this Advance or
// the next. If a callback panics, the panic propagates to the caller of
// Advance; the hierarchy stays consistent and the timers still due fire on
// the next Advance. If the clock has gone backwards, nothing fires until it
// passes the deadlines again.
//
// With [WithParallelCallbacks], each shard's callbacks run on a goroutine
// of their own and Advance returns once all have run.
//
// A caller that drives h with an Advance loop of its own makes h with
// [WithManualAdvance] (or [WithClock]), so that no driver starts by itself
// and every callback runs on its goroutine (see "Driving the wheels" in
// the package doc).
func (h *Hierarchy) Advance() int {
	h.mustBeMade("Advance")
	h.advMu.Lock()
	defer h.advMu.Unlock()
	return h.advance()
}

// advance is Advance's work, with h.advMu held: each shard's late timers
// first, in the order of the shards, then the wheels' timers due by the
// clock's tick.
func (h *Hierarchy) advance() int {
	ns := h.elapsed()
	target := min(floorDiv(ns, h.tick), h.lastTick)
	for _, s := range h.shards {
		s.lock()
		s.advancing = true
		s.mu.Unlock()
	}
	defer h.endAdvance(target)
	if h.parallel && len(h.shards) > 1 {
		return h.advanceParallel(target, ns)
	}
	ran := 0
	for _, s := range h.shards {
		n, _ := s.advanceTo(target, ns, true)
		ran += n
	}
	return ran + h.advanceOrdered(target, ns)
}

// endAdvance moves every shard's now to target, unless it is there already,
// and ends the Advance. The frontier is cleared only after: a re-arm that
// reads it cleared (see Timer.resetTo) then reads a now at least as far.
func (h *Hierarchy) endAdvance(target int64) {
	for _, s := range h.shards {
		s.lock()
		if target > s.now.Load() {
			// Usually this only moves now. After a callback panicked, or
			// for a timer armed meanwhile into a shard that was behind,
			// what is due goes on the late list, for the next Advance.
			s.collectLocked(target)
			s.requeueLocked()
		}
		s.advancing = false
		s.mu.Unlock()
	}
	h.frontier.Store(math.MinInt64)
}

// advanceOrdered fires the timers of all shards due by target, merged in
// order of their due ticks: tick by tick with work, each shard collects
// and fires what it has for that tick. ns is the clock's reading.
//
// The first round looks at every shard under its lock. Later rounds pass
// over a shard whose workFrom says it has nothing due by the tick at hand,
// without taking its lock: with many shards and timers spread thin, most
// have nothing due at a given tick. A timer filed there meanwhile, by
// another goroutine or a callback, lowers workFrom and is found in the
// next round, as if it had been armed just after this one.
func (h *Hierarchy) advanceOrdered(target, ns int64) int {
	ran := 0
	for first := true; ; first = false {
		c := target + 1 // target is before the end of time: no overflow
		for _, s := range h.shards {
			if w := s.workFrom.Load(); !first && w >= c {
				continue
			}
			s.lock()
			e, due := s.nextLocked(false)
			if !due {
				e = math.MaxInt64
			}
			s.workFrom.Store(e) // a lower bound of its work from now on (see slotLocked)
			s.mu.Unlock()
			c = min(c, e)
		}
		if c > target {
			return ran
		}
		// Never back: a round can find, at a tick before the last round's,
		// a timer filed into a shard it passed over (see fileLocked).
		if c > h.frontier.Load() {
			h.frontier.Store(c)
		}
		for _, s := range h.shards {
			if s.workFrom.Load() <= c {
				n, _ := s.advanceTo(c, ns, false)
				ran += n
			}
		}
	}
}

// advanceTo runs the callbacks of the shard's work due by tick c and returns
// how many ran, and whether it had such work: the late timers due by c if
// late is set, else the timers its wheels' next event collects, if that
// event is due by c. clockNs is the clock's reading, for the lateness
// statistics. If a callback panics, the timers it leaves collected go back
// on the late list and the panic goes on: the one panic path of both modes
// of Advance (advanceParallel only carries it to Advance's goroutine).
func (s *shard) advanceTo(c, clockNs int64, late bool) (int, bool) {
	s.lock()
	held := true
	defer func() {
		if !held { // a callback panicked
			s.lock()
			s.requeueLocked()
		}
		s.mu.Unlock()
	}()
	if late {
		s.collectLateLocked(c)
	} else if e, due := s.nextLocked(false); due && e <= c {
		s.collectLocked(e)
	} else {
		return 0, false
	}
	return s.fireLocked(c, clockNs, &held), true
}

// advanceParallel runs each shard's due timers on a goroutine of its own,
// each shard in its own order (its late timers first), and waits for all.
// The first panic of a callback is raised again here once every shard is
// done. ns is the clock's reading.
func (h *Hierarchy) advanceParallel(target, ns int64) int {
	var (
		wg   sync.WaitGroup
		ran  atomic.Int64
		perr atomic.Pointer[any] // the first panic
	)
	for _, s := range h.shards {
		s.lock()
		e, due := s.nextLocked(true)
		s.mu.Unlock()
		if !due || e > target {
			continue // nothing due: no goroutine
		}
		wg.Go(func() {
			defer func() {
				if r := recover(); r != nil {
					perr.CompareAndSwap(nil, &r)
				}
			}()
			for late, more := true, true; more; late = false {
				var n int
				n, more = s.advanceTo(target, ns, late)
				ran.Add(int64(n))
			}
		})
	}
	wg.Wait()
	if p := perr.Load(); p != nil {
		panic(*p)
	}
	return int(ran.Load())
}
