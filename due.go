package timingwheel

import "time"

// Due returns the instant at which a timer armed for deadline is due: the
// deadline rounded up to the next tick after the hierarchy's origin, due(D)
// in docs/guarantees.md's "Never early, at most one tick late". An Advance
// whose clock has reached Due(D) runs every timer armed for D, and none
// before. A layer that keeps deadlines of its own behind one timer (an idle
// conn's events: package netidle) compares Due of each with the instant
// being fired to decide, as the hierarchy would for a timer of its own,
// which are due. Deadlines are held at the limits [Timer.Deadline]
// describes; a timer whose deadline is due only at the end of time (see
// Horizon in the package doc) never fires, though a clock held there
// reaches Due of it.
func (h *Hierarchy) Due(deadline time.Time) time.Time {
	h.mustBeMade("Due")
	return h.tickTime(h.dueTick(h.offset(deadline)))
}
