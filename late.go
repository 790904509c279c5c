package timingwheel

import (
	"cmp"
	"slices"
)

// Past deadlines. A timer armed for a tick before now (or at now, while an
// Advance runs) is due at the next Advance. Arming it must stay O(1)
// whatever order such timers come in, so it goes on the shard's late list
// unsorted, and the next Advance sorts the late list into the overdue list,
// which it fires first, in order.
//
// A burst of past deadlines (a clock that jumped, 10^5 timers armed with
// d <= 0) must not hold the shard's lock for the whole sort, so the sort
// runs with the lock released. mergeLate moves the late list aside (to
// pending, in O(1); timers armed meanwhile start a new late list), takes
// the pending timers off in batches, leaving each marked as in limbo (its
// links point at the shard's limbo sentinel, which no walk visits), sorts
// them, and puts them back in batches. A timer stopped or re-armed while in
// limbo leaves it through unlinkLocked, which records it in left: mergeLate
// then skips it without touching it again (it may belong to another shard
// or hierarchy by then, re-initialized).

// lateTimer is a late timer with the tick it was filed at when taken off.
type lateTimer struct {
	t     *Timer
	filed int64
}

// fileLateLocked files t, due at tick d before now (or at now, while an
// Advance runs), on the late list for the next Advance. s.mu must be held.
func (s *shard) fileLateLocked(t *Timer, d int64) {
	t.setFiledLocked(d)
	if (s.late.empty() && !s.sorting) || d < s.lateMin {
		s.lateMin = d
	}
	s.late.pushBack(t)
}

// mergeLate sorts the late list by due tick and merges it into the overdue
// list, holding s.mu for at most a batch of timers at a time. It is called
// by Advance (so never twice at once), without s.mu.
func (s *shard) mergeLate() {
	s.lock()
	defer s.mu.Unlock()
	if s.late.empty() {
		return
	}
	sc := s.scratch[:0]
	s.sorting = true
	s.late.moveAllTo(&s.pending)
	for !s.pending.empty() {
		for range s.h.batch {
			t := s.pending.next
			if t == &s.pending {
				break
			}
			t.unlink()
			t.next, t.prev = &s.limbo, &s.limbo
			sc = append(sc, lateTimer{t, t.filed})
		}
		s.yieldLocked()
	}
	if len(sc) > s.h.batch {
		s.mu.Unlock()
		slices.SortStableFunc(sc, func(a, b lateTimer) int { return cmp.Compare(a.filed, b.filed) })
		s.lock()
	} else {
		slices.SortStableFunc(sc, func(a, b lateTimer) int { return cmp.Compare(a.filed, b.filed) })
	}
	// Put them back in order: appended when they all come after the
	// overdue list's last timer (the usual case: it is empty unless the
	// clock went backwards), else each merged in at its place.
	atEnd := s.overdue.empty() || s.overdue.prev.filed <= sc[0].filed
	x := s.overdue.next
	for i, lt := range sc {
		if i > 0 && i%s.h.batch == 0 {
			s.yieldLocked()
			x = s.overdue.next // x may have been unlinked meanwhile
		}
		t := lt.t
		if _, gone := s.left[t]; gone {
			continue // stopped or re-armed while in limbo
		}
		t.next, t.prev = nil, nil
		if atEnd {
			s.overdue.pushBack(t)
			continue
		}
		for x != &s.overdue && x.filed <= lt.filed {
			x = x.next
		}
		x.insertBefore(t)
	}
	s.sorting = false
	s.left = nil
	clear(sc) // keep no references in the scratch slice
	if cap(sc) > 1<<12 {
		sc = nil // a burst of past deadlines: do not hold its memory
	}
	s.scratch = sc[:0]
}
