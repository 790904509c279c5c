// Package idlestate is the one statement of the idle semantics that
// package netidle and the gnet module (package gnetwheel) share: given a
// conn's marks (the clock at the last data read and written), its idle,
// its write idle and the end of its lifetime, whether it is paused, and
// the clock, what is due when a timer fires for the conn, and when it is
// to fire next.
//
// Both keep marks that data moved stores (no lock, no timer touched), and
// a look, when a timer fires, that asks [State.Due] what is due, acts on
// it, and files the conn for [State.Next]. What they do not share is whose
// the conn is and where its timer is: netidle's marks are atomics of a
// conn used from any goroutine, with one Timer per conn, and its look runs
// on the goroutine that advances the hierarchy under the conn's mutex; a
// gnet conn's marks are plain fields of its event loop, filed in the
// loop's buckets (one timer per bucket, by measurement: see
// docs/design.md), whose scan on the loop is the look. So the faults that
// live in the semantics (a clock that went back, an idle of the largest
// Duration, Pause meeting the look) are fixed here once, and pinned by
// this package's tests.
//
// All instants are int64 nanoseconds since the hierarchy's origin
// (Hierarchy.Elapsed readings); [Never] is "no deadline".
package idlestate

import (
	"math"
	"time"

	"github.com/timingwheel/timingwheel"
)

// Never is the deadline of an event that is not due ever: no lifetime, no
// write-idle event, an idle of the largest Duration.
const Never = math.MaxInt64

// SatAdd returns a+b, saturated at [Never]; b >= 0. An idle of
// math.MaxInt64 ns after any mark is Never, not a deadline in the past.
func SatAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return Never
}

// End returns the end of a lifetime of lifetime ns that starts at now:
// [Never] if lifetime is 0 (none).
func End(now, lifetime int64) int64 {
	if lifetime <= 0 {
		return Never
	}
	return SatAdd(now, lifetime)
}

// Moved returns a mark moved for data moved at now, a clock reading, and
// whether the conn must be filed again (its timer armed again). A reading
// at or after the mark is the new mark. One behind it (a mark is only ever
// a past reading) means the clock went back (a clock.Mock set back): the
// count starts again from the reading, as a Reset would, and since the
// conn's deadline is then earlier than the one its timer was armed for, the
// timer is armed again. (A mark of netidle, raised by Reads on other
// goroutines, may also be ahead because of a later Read: netidle reads the
// clock again under its lock before it concludes the clock went back.)
func Moved(mark, now int64) (int64, bool) { return now, now < mark }

// Marks are one conn's own: what moves when data moves or the conn is
// controlled.
type Marks struct {
	Read  int64 // the clock at the last data read (or Resume, SetIdle, read-idle event): the idle close counts from it
	Write int64 // the same for data written and the write-idle event
	End   int64 // the end of the lifetime; Never if none
	Idle  int64 // ns, > 0: the conn's idle (SetIdle changes it)
}

// Start returns the marks of a conn opened at now, with idle and a
// lifetime of lifetime ns (0: none).
func Start(now, idle, lifetime int64) Marks {
	return Marks{Read: now, Write: now, End: End(now, lifetime), Idle: idle}
}

// State is what a look judges: a conn's marks, what its server's options
// say, and what the conn is doing.
type State struct {
	Marks
	WriteIdle int64 // ns; 0: no write-idle event
	Paused    bool  // Pause was called, Resume not yet
	Writing   bool  // a Write is in progress (netidle): the conn is not write idle
}

// ReadDeadline is when the idle close (or the read-idle event) is due: an
// idle after the Read mark.
func (s *State) ReadDeadline() int64 { return SatAdd(s.Read, s.Idle) }

// WriteDeadline is when the write-idle event is due; Never without one.
func (s *State) WriteDeadline() int64 {
	if s.WriteIdle <= 0 {
		return Never
	}
	return SatAdd(s.Write, s.WriteIdle)
}

// Next is the deadline the conn is filed for (its timer armed for): the
// earliest of the lifetime's end and, unless the conn is paused, the idle
// close (or read-idle event) and the write-idle event. Never means none:
// the timer is stopped. As the marks only move later (but for the clock
// going back, see [Moved]), the timer is never later than the earliest
// deadline due.
func (s *State) Next() int64 {
	next := s.End
	if !s.Paused {
		next = min(next, s.ReadDeadline(), s.WriteDeadline())
	}
	return next
}

// Event is what a look finds due, in the order it judges them.
type Event uint8

const (
	None        Event = iota // nothing: arm the timer for Next
	LifetimeEnd              // close the conn for its lifetime (ErrLifetime)
	ReadIdle                 // close it for being idle (ErrIdle), or run OnReadIdle's f
	WriteIdle                // run OnWriteIdle's f; the Write mark moves to the look's clock first
	WriteBusy                // the write-idle event's turn, with a Write in progress: the Write mark moves to the look's clock, no event
)

// Due returns the first event due at j's instant, judging from the event
// from on: LifetimeEnd for the whole look, WriteIdle for the rest of a
// look after a read-idle event's f has run (the Read mark then moves to
// j.Now). The lifetime's end comes whatever the conn does; a paused conn
// has no other event, whatever its silence. After WriteIdle or WriteBusy
// nothing else is due in the look.
func (s *State) Due(j *Judge, from Event) Event {
	if from <= LifetimeEnd && j.Due(s.End) {
		return LifetimeEnd
	}
	if s.Paused {
		return None
	}
	if from <= ReadIdle && j.Due(s.ReadDeadline()) {
		return ReadIdle
	}
	if s.WriteIdle > 0 {
		switch {
		case s.Writing:
			return WriteBusy
		case j.Due(s.WriteDeadline()):
			return WriteIdle
		}
	}
	return None
}

// Judge is the instant a look judges deadlines at: the due instant of the
// deadline the timer fired for (the conn's, or its bucket's) (Hierarchy.Due
// of it), as the hierarchy judges its own timers, or the clock if that is
// earlier (it went back since the firing, or the timer was armed again
// meanwhile). A deadline due at a later tick, which the same Advance (or,
// on a gnet loop, the hop's delay) reaches, is not due here: it waits for
// the timer armed for it, and comes in order with the other timers.
type Judge struct {
	Now   int64 // the clock's reading in the look
	armed int64 // the deadline the timer was armed for
	at    int64 // the instant judged at
	atT   time.Time
	fired bool // the clock has reached armed's due instant
	h     *timingwheel.Hierarchy
}

// NewJudge reads h's clock and returns the judge of a look for a timer
// that was armed for armed (its Deadline).
func NewJudge(h *timingwheel.Hierarchy, armed time.Time) Judge {
	origin := h.Origin()
	nowT := h.Now()
	at := h.Due(armed)
	fired := !nowT.Before(at)
	if !fired {
		at = nowT
	}
	return Judge{
		Now:   int64(nowT.Sub(origin)),
		armed: int64(armed.Sub(origin)),
		at:    int64(at.Sub(origin)),
		atT:   at,
		fired: fired,
		h:     h,
	}
}

// Due reports whether deadline d has come at j's instant: one no later
// than the deadline fired is, one later than the instant judged at is not,
// and one between the two is if its tick is due by then.
func (j *Judge) Due(d int64) bool {
	switch {
	case d == Never:
		return false
	case d <= j.armed && j.fired:
		return true
	case d > j.at:
		return false
	}
	return !j.h.Due(j.h.Origin().Add(time.Duration(d))).After(j.atT)
}
