package timingwheel

import (
	"math"
	"math/bits"
)

// A level is one wheel of the hierarchy: a ring of slots, each as wide as a
// whole revolution of the level below (one tick at level 0).
//
// Placement is absolute, like the digits of a mixed-radix counter: a timer
// due at tick d lives at the lowest level whose current revolution (the one
// that contains the hierarchy's current tick, now) also contains d, in slot
// (d / width) mod len(slots). So a level only ever holds timers of its
// current revolution, in slots at or after now's digit, and no slot needs to
// remember which revolution it belongs to.
//
// When now reaches the first tick of an occupied slot at level > 0 (its
// event), the slot is emptied and each timer is placed again: it lands at a
// lower level, since now and the timer now agree on this level's digit.
type level struct {
	width int64   // ticks per slot
	span  int64   // ticks per revolution, width*len(slots); 0 if that exceeds int64 (unbounded)
	start int64   // first tick of the revolution that contains now (0 if unbounded)
	last  int64   // last tick of the revolution that contains now
	slots []Timer // list sentinels
	occ   []uint64

	// Levels of different shards are written by different cores: keep
	// each on cache lines of its own (with its occupancy words, which
	// newLevel allocates at least a line of).
	_ [56]byte
}

func newLevel(index, n int, width int64) *level {
	l := &level{
		width: width,
		slots: make([]Timer, n),
		occ:   make([]uint64, (n+63)/64, max((n+63)/64, 8)), // at least a cache line
	}
	if width <= math.MaxInt64/int64(n) {
		l.span = width * int64(n)
	}
	for i := range l.slots {
		l.slots[i].initList()
	}
	return l
}

// setNow recomputes the bounds of the revolution that contains now.
func (l *level) setNow(now int64) {
	if l.span == 0 {
		l.start, l.last = 0, math.MaxInt64
		return
	}
	l.start = now - now%l.span
	l.last = satAdd(l.start, l.span-1)
}

// slotOf returns the slot of tick d, which must lie in now's revolution:
// its offset from the revolution's start, in slots. It divides once
// (level 0 not at all), where (d/width) mod len(slots) would divide twice;
// this runs for every timer armed or cascaded.
func (l *level) slotOf(d int64) int {
	if l.width == 1 {
		return int(d - l.start)
	}
	return int((d - l.start) / l.width)
}

// setOccupied and clearOccupied maintain the occupancy bitmap.
func (l *level) setOccupied(s int)   { l.occ[s>>6] |= 1 << (s & 63) }
func (l *level) clearOccupied(s int) { l.occ[s>>6] &^= 1 << (s & 63) }

// next returns the first occupied slot at or after s, in now's revolution
// (a level holds no other), and its first tick, the level's event there.
// A slot holds only ticks at or after its own first one, so the tick does
// not exceed the (representable) due tick of any timer in it.
func (l *level) next(s int) (tick int64, slot int, ok bool) {
	for i := s >> 6; i < len(l.occ); i++ {
		w := l.occ[i]
		if i == s>>6 {
			w &^= 1<<(s&63) - 1
		}
		if w != 0 {
			slot = i<<6 | bits.TrailingZeros64(w)
			return l.start + int64(slot)*l.width, slot, true
		}
	}
	return 0, 0, false
}
