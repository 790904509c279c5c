package timingwheel

import (
	"fmt"
	"math"
	"math/bits"
	"time"
)

// Every arms a periodic timer that calls f at A+p, A+2p, A+3p, …, where A
// is the clock's reading now, until it is stopped, and returns the Timer.
// Each instant is rounded up to a tick: a run is never early and at most a
// tick late, and the runs do not drift, whatever the lateness of earlier
// ones (the k-th run is due at A+k·p).
//
// If one [Hierarchy.Advance] finds several instants due (the driver ran
// late, or the clock jumped), f runs once, and the next run is the first
// instant not yet due at that Advance, whose tick is after the Advance's
// tick: only runs that were due are skipped, as a [time.Ticker] drops only
// the ticks a slow receiver missed. An instant that lies before the clock
// but whose tick has not come is not missed, so a driver that wakes a
// little late within a tick loses no run: Every(tick, f) runs f once per
// tick.
//
// The next run is armed before f starts, so the timer is armed while f
// runs: [Timer.Stop], from f itself or from any goroutine while f runs,
// returns true and no later run starts. [Timer.Deadline] is the next run's
// instant; [Timer.Reset] and [Timer.ResetAt] make the timer a one-shot
// one, and [Timer.ResetEvery] changes its period. Every panics if f is nil
// or p <= 0. Each call allocates the Timer; a timer held by value and
// armed with ResetEvery allocates nothing once its shard knows the period
// (see [Timer.ResetEvery]).
func (h *Hierarchy) Every(p time.Duration, f func()) *Timer {
	h.mustBeMade("Every")
	if f == nil {
		panic("timingwheel: Every called with a nil func")
	}
	return h.arm(&Timer{f: f}, h.after(p), period("Every", p))
}

// ResetEvery re-arms t, a timer bound to its hierarchy by AfterFunc, AtFunc,
// Every, Init or InitOn, to run its callback every p from now, as
// [Hierarchy.Every] does. It reports whether t was armed, as [Timer.Reset]
// does: true means this call also cancelled the pending firing. It panics
// if p <= 0. It allocates nothing once t's shard has seen the period p: the
// first timer of a period in a shard allocates the 32 bytes the shard keeps
// for that period, for up to 1024 periods per shard (a conn with a period
// of its own, a jittered ping, pays that once per period). A timer that is
// not armed may be moved to another shard as it is armed, when its own is
// contended, and pays that once more there if that shard has not seen the
// period.
func (t *Timer) ResetEvery(p time.Duration) bool {
	t.shard("ResetEvery")
	return t.resetTo(arming{v: int64(p), rel: true, period: period("ResetEvery", p)})
}

// period returns p in ns, panicking for p <= 0.
func period(method string, p time.Duration) int64 {
	if p <= 0 {
		panic(fmt.Sprintf("timingwheel: %s called with period %v; it must be positive", method, p))
	}
	return int64(p)
}

// nextRun returns the instant of the next run of a periodic timer with
// instants when+k·per that an Advance whose clock read clockNs (ns since
// the origin) is firing: the first instant not yet due at that Advance,
// whose due tick is after the Advance's tick. An instant before the clock
// whose tick has not come is not missed: its run is the next one, so a
// driver that wakes a little late within a tick loses no run.
//
// fireLocked calls it with the timer's when and period and the clock
// reading it was given; the Advance's tick is derived from that reading
// exactly as Advance derives it.
func (h *Hierarchy) nextRun(when, per, clockNs int64) int64 {
	tick := min(floorDiv(clockNs, h.tick), h.lastTick) // Advance's target
	// An instant is due after tick exactly when it lies after the tick's
	// start: dueTick(x) > tick if and only if x > tick·h.tick.
	return nextInstant(when, per, h.tickNanos(tick))
}

// rearmPeriodicLocked files t, a periodic timer that is firing now and
// whose when claimLocked froze, for its next run, at the instant next,
// before its callback starts (so Stop from the callback wins), and stores
// its word, filed. s.mu must be held.
func (s *shard) rearmPeriodicLocked(t *Timer, next int64) {
	s.stats.fired++
	s.stats.armed++ // the next run is an arming of its own
	s.fileLocked(t, s.h.dueTick(next), true)
	t.publishLocked(s.h, next) // claimLocked froze when
}

// nextInstant returns the first instant when+k·per (k >= 1) after ns, all
// in ns since the origin, saturated at the end of time.
func nextInstant(when, per, ns int64) int64 {
	k := uint64(1)
	if ns >= when {
		k = uint64(satAdd(ns, -when))/uint64(per) + 1
	}
	hi, lo := bits.Mul64(k, uint64(per))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return satAdd(when, int64(lo))
}
