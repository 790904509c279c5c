package timingwheel

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// The deadline word. A Timer's when is the one word a later-move (see
// Timer.rearm) swaps without its shard's lock, so it must say, by itself,
// which arming it belongs to: a later-move that loaded it takes effect only
// if nothing else changed it since, and a Stop followed by a re-arm for the
// same deadline is a change. So when holds a generation beside the
// deadline, and never comes back to a filed value it held (but after 2^k
// filed values of that very timer, k >= 24; see wordBits). Unfiled and
// frozen keep the generation of the word they end: a later-move never
// swaps from them, and the lock's holder stores a new one after them.
//
//	bit 63      unfiled: the timer is in no list (never armed, stopped,
//	            fired, or an executor run pending)
//	bit 62      frozen: filed, and being filed again under the lock; a
//	            later-move that finds it takes the lock
//	bits R..61  the generation: one more in every filed word stored under
//	            the lock, and at a later-move to the deadline the timer has
//	bits 0..R-1 off: the deadline, as an offset from base(filed)
//
// The deadline is base(filed) + off, where filed is the tick the timer was
// last filed under and base(F) the first nanosecond due at tick F. A filed
// timer's deadline is due at filed or later (a later-move leaves it where it
// is filed), so off >= 0; it starts below a tick and grows with the
// later-moves. A move whose off would not fit takes the lock, which files
// the timer again under the new deadline's tick. A timer that is not filed
// keeps filed and off as they were: its last deadline, for Deadline.
//
// filed changes only while when is unfiled or frozen, so a later-move that
// loads when, then filed, and then swaps when from the value it loaded,
// read the filed that goes with it. filed is written under the lock with
// atomic stores (setFiledLocked) and read without it by the later-move and
// Deadline with atomic loads; the lock's holders read it plainly.
const (
	unfiledBit = math.MinInt64 // bit 63
	frozenBit  = 1 << 62

	// minOffBits is R unless the tick needs more: moves of up to about
	// four and a half minutes (2^38 ns, 275s) past the tick the timer is
	// filed under take no lock. The shard files a moved timer again when
	// that tick comes, so an idle timeout of up to that, moved on every
	// read, never takes the lock; a longer one takes it about once per
	// 275s of moves, which file it again under its new tick.
	minOffBits = 38
	// minGenBits is the fewest generation bits with which a later-move
	// may run without the lock: with fewer (a tick of more than 2^37 ns,
	// about 137s), every re-arm takes it.
	minGenBits = 24
)

// wordBits sets h's layout of the deadline word for its tick: off must
// hold a tick and then some (see minOffBits); the generation gets the rest
// of the 62 bits, at least minGenBits, or later-moves take the lock.
func (h *Hierarchy) wordBits() {
	r := max(minOffBits, bits.Len64(uint64(h.tick))+1)
	if r > 62 {
		r = 62
	}
	h.offMask = 1<<r - 1
	h.laterFree = 62-r >= minGenBits
}

// base returns the first nanosecond due at tick f, saturated: a deadline
// filed at f is at least that.
func (h *Hierarchy) base(f int64) int64 {
	if f == math.MinInt64 {
		return math.MinInt64
	}
	return satAdd(h.tickNanos(f-1), 1)
}

// nextGen returns p's bits R..61, the generation, advanced by one.
func (h *Hierarchy) nextGen(p int64) int64 {
	return (p + h.offMask + 1) & (frozenBit - 1) &^ h.offMask
}

// movable reports whether p is a filed timer's word that a later-move may
// swap: neither unfiled nor frozen.
func movable(p int64) bool { return uint64(p) < frozenBit }

// unfiled reports whether p is the word of a timer in no list.
func unfiled(p int64) bool { return p < 0 }

// deadlineLocked returns the deadline p says, for t: its deadline if it is
// filed, its last one if not. t's shard's lock must be held (or t not yet
// shared).
func (t *Timer) deadlineLocked(h *Hierarchy, p int64) int64 {
	return h.base(t.filed) + p&h.offMask
}

// setFiledLocked files t under tick d, as far as filed goes. A later-move
// may load filed at any time, so it is stored atomically; when is unfiled
// or frozen meanwhile. t's shard's lock must be held.
func (t *Timer) setFiledLocked(d int64) {
	if t.filed != d {
		atomic.StoreInt64(&t.filed, d)
	}
}

// publishLocked stores when for t, unfiled or frozen and now filed under
// tick t.filed, as filed with deadline w, in the next generation. t's
// shard's lock must be held.
func (t *Timer) publishLocked(h *Hierarchy, w int64) {
	t.when.Store(h.nextGen(t.when.Load()) | (w - h.base(t.filed)))
}

// unfileLocked ends t's filing: it swaps when to unfiled, keeping the
// deadline for Deadline, and reports whether t was filed. A later-move
// racing it either lands first, and the deadline kept is the moved one, or
// finds when changed and takes the lock. t's shard's lock must be held.
func (t *Timer) unfileLocked(h *Hierarchy) bool {
	for {
		p := t.when.Load()
		if unfiled(p) {
			return false
		}
		if t.when.CompareAndSwap(p, p|unfiledBit) {
			return true
		}
	}
}

// freezeLocked swaps t's word, filed, to frozen if it is still p, so that
// t may be filed again under another tick: no later-move lands meanwhile.
// t's shard's lock must be held; publishLocked ends it.
func (t *Timer) freezeLocked(h *Hierarchy, p int64) bool {
	return t.when.CompareAndSwap(p, p|frozenBit)
}

// refileLocked files t, taken off its list, again by its deadline, which a
// later-move may have changed since it was filed: a cascade, or a firing
// that found it moved. A deadline still due by tick c (a late timer of an
// earlier Advance, see shard.requeueLocked) goes back on the firing list
// instead, filed under its tick. s is t's shard, locked.
func (s *shard) refileLocked(t *Timer, c int64) {
	h := s.h
	for {
		p := t.when.Load()
		w := t.deadlineLocked(h, p)
		d := h.dueTick(w)
		if d == t.filed { // its word stays as it is
			s.placeLocked(t, d, c)
			return
		}
		if t.freezeLocked(h, p) {
			s.placeLocked(t, d, c)
			t.publishLocked(h, w)
			return
		}
	}
}

// placeLocked files t under tick d: on the firing list if d is due by
// tick c, else as fileLocked does. s.mu must be held.
func (s *shard) placeLocked(t *Timer, d, c int64) {
	if d > c {
		s.fileLocked(t, d, false)
		return
	}
	t.setFiledLocked(d)
	s.firing.pushBack(t)
}
