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
// instant after that Advance's clock: missed runs are skipped, as a
// [time.Ticker] drops ticks for a slow receiver.
//
// The next run is armed before f starts, so the timer is armed while f
// runs: [Timer.Stop], from f itself or from any goroutine while f runs,
// returns true and no later run starts. [Timer.Deadline] is the next run's
// instant; [Timer.Reset] and [Timer.ResetAt] make the timer a one-shot
// one, and [Timer.ResetEvery] changes its period. Every panics if f is nil
// or p <= 0. Each call allocates the Timer; a timer held by value and
// armed with ResetEvery allocates nothing.
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
// does: true means this call also cancelled the pending firing. It
// allocates nothing, and panics if p <= 0.
func (t *Timer) ResetEvery(p time.Duration) bool {
	t.shard("ResetEvery")
	return t.resetTo(arming{v: int64(p), rel: true, period: period("ResetEvery", p), move: true})
}

// period returns p in ns, panicking for p <= 0.
func period(method string, p time.Duration) int64 {
	if p <= 0 {
		panic(fmt.Sprintf("timingwheel: %s called with period %v; it must be positive", method, p))
	}
	return int64(p)
}

// nextInstant returns the first instant when+k·per (k >= 1) after clock,
// all in ns since the origin, saturated at the end of time.
func nextInstant(when, per, clock int64) int64 {
	k := uint64(1)
	if clock >= when {
		k = uint64(satAdd(clock, -when))/uint64(per) + 1
	}
	hi, lo := bits.Mul64(k, uint64(per))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return satAdd(when, int64(lo))
}
