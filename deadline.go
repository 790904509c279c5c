package timingwheel

import (
	"math"
	"time"
)

// Time inside the hierarchy is counted in two units, both relative to the
// origin (the clock reading taken by New):
//
//   - a deadline is kept in nanoseconds since the origin, so that
//     [Timer.Deadline] can give back the instant it was armed with;
//   - the wheels work in ticks since the origin. A deadline is due at the
//     first tick at or after it (rounded up: never early), and the clock is
//     at the last tick at or before it (rounded down).
//
// All arithmetic saturates at the int64 limits instead of wrapping, so a
// deadline of the largest time.Duration, or a clock read far in the past,
// is handled like any other.

// Deadlines are clamped to minDeadline, so that the tick of every deadline
// is above neverArmed, the marker in Timer.filed of a timer initialized by
// Init and not armed since (its Deadline is the zero Time).
const (
	minDeadline = math.MinInt64 + 2 // earliest deadline representable, in ns since origin
	neverArmed  = math.MinInt64
)

// satAdd returns a+b, saturated to the int64 range.
func satAdd(a, b int64) int64 {
	c := a + b
	if b > 0 && c < a {
		return math.MaxInt64
	}
	if b < 0 && c > a {
		return math.MinInt64
	}
	return c
}

// clampDeadline keeps ns clear of the marker values.
func clampDeadline(ns int64) int64 { return max(ns, minDeadline) }

// ceilDiv returns ns/tick rounded towards +Inf; tick > 0.
func ceilDiv(ns, tick int64) int64 {
	q := ns / tick // truncates towards zero, which is already the ceiling for ns < 0
	if ns%tick > 0 {
		q++
	}
	return q
}

// floorDiv returns ns/tick rounded towards -Inf; tick > 0.
func floorDiv(ns, tick int64) int64 {
	q := ns / tick
	if ns%tick < 0 {
		q--
	}
	return q
}

// dueTick is the tick at which a deadline of ns (since the origin) is due.
func (h *Hierarchy) dueTick(ns int64) int64 { return ceilDiv(ns, h.tick) }

// tickNanos returns the offset of tick e from the origin in nanoseconds,
// saturated.
func (h *Hierarchy) tickNanos(e int64) int64 {
	switch {
	case e > math.MaxInt64/h.tick:
		return math.MaxInt64
	case e < math.MinInt64/h.tick:
		return math.MinInt64
	}
	return e * h.tick
}

// tickTime returns the instant of tick e.
func (h *Hierarchy) tickTime(e int64) time.Time {
	return h.origin.Add(time.Duration(h.tickNanos(e)))
}

// elapsed returns the clock's reading in nanoseconds since the origin.
// Since is used rather than Now: with the real clock it reads only the
// monotonic clock, half the price of Now.
func (h *Hierarchy) elapsed() int64 {
	if h.realClock {
		return int64(time.Since(h.origin)) // what clock.New() does, minus two calls
	}
	return int64(h.clock.Since(h.origin))
}

// offset returns deadline in nanoseconds since the origin, clamped.
// time.Time.Sub saturates, so no deadline overflows.
func (h *Hierarchy) offset(deadline time.Time) int64 {
	return clampDeadline(int64(deadline.Sub(h.origin)))
}

// after returns the deadline d from now, in nanoseconds since the origin.
func (h *Hierarchy) after(d time.Duration) int64 {
	return clampDeadline(satAdd(h.elapsed(), int64(d)))
}
