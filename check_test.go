package timingwheel

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"math/bits"
)

// setBits yields the index of every set bit of a bitmap.
func setBits(words []uint64) iter.Seq[int] {
	return func(yield func(int) bool) {
		for i, w := range words {
			for w != 0 {
				if !yield(i<<6 | bits.TrailingZeros64(w)) {
					return
				}
				w &= w - 1
			}
		}
	}
}

// check verifies the hierarchy's invariants and returns the first one that
// does not hold. It takes h.mu (callbacks run without it, so it may be
// called from one). It is test-only code: the production build carries none
// of it.
//
//   - every list is a well-formed circular list; its nodes belong to h;
//   - every timer in a slot of level i is filed (marker-free) at a tick in
//     now's revolution of level i but not of level i-1, in the slot its tick
//     implies, at or after now's slot (after it, above level 0);
//   - its deadline is due no earlier than the tick it is filed at (a lazy
//     Reset only moves deadlines later);
//   - a slot's occupancy bit is set exactly when the slot is non-empty
//     (set bits are checked directly; a timer under a clear bit would be
//     missed by the walk and caught by the count);
//   - the late list is filed at or before now and lateMin bounds it; the
//     firing list is empty between Advances;
//   - Len equals the number of timers in all lists.
func (h *Hierarchy) check() error {
	for i, s := range h.shards {
		if s.idx != i || s.h != h {
			return fmt.Errorf("shard %d: says it is shard %d of %p", i, s.idx, s.h)
		}
		if err := s.check(); err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
	}
	return nil
}

// check verifies one shard's invariants; see Hierarchy.check.
func (sh *shard) check() error {
	sh.lock()
	defer sh.mu.Unlock()
	h := sh
	if sh.current != nil {
		return errors.New("current names a timer outside a callback")
	}
	if sh.walk != nil {
		return errors.New("a walk of the late list outside an Advance")
	}
	now := h.now.Load()
	n := 0
	// walk checks the list s; name is called only to describe a failure.
	walk := func(name func() string, s *Timer, each func(t *Timer) error) (err error) {
		defer func() {
			if err != nil {
				err = fmt.Errorf("%s: %w", name(), err)
			}
		}()
		if s.f != nil {
			return errors.New("sentinel has a callback")
		}
		for x := s.next; x != s; x = x.next {
			if x == nil || x.next == nil || x.next.prev != x {
				return errors.New("broken links")
			}
			if x.home() != sh || x.f == nil {
				return errors.New("foreign node")
			}
			f := x.filed
			w := x.when.Load()
			if w == notFiled {
				return fmt.Errorf("timer in a list is marked not filed (filed %d)", f)
			}
			if d := sh.h.dueTick(w); d < f {
				return fmt.Errorf("timer due at tick %d filed later, at %d", d, f)
			}
			n++
			if n > sh.count-sh.hops {
				return fmt.Errorf("more timers in lists than the %d armed (a list that loops?)", sh.count)
			}
			if err := each(x); err != nil {
				return err
			}
		}
		return nil
	}
	for i, l := range h.levels {
		want := int64(math.MaxInt64)
		if l.span != 0 {
			want = satAdd(now-now%l.span, l.span-1)
		}
		if l.last != want {
			return fmt.Errorf("level %d: last = %d, want %d for now %d", i, l.last, want, now)
		}
		wantStart := int64(0)
		if l.span != 0 {
			wantStart = now - now%l.span
		}
		if l.start != wantStart {
			return fmt.Errorf("level %d: start = %d, want %d for now %d", i, l.start, wantStart, now)
		}
		cur := l.slotOf(now)
		// Walk the slots whose bit is set. A timer in a slot whose bit is
		// clear is caught by the count at the end: it is in no list walked.
		for s := range setBits(l.occ) {
			if s >= len(l.slots) {
				return fmt.Errorf("level %d: occupancy bit %d beyond %d slots", i, s, len(l.slots))
			}
			sent := &l.slots[s]
			if sent.empty() {
				return fmt.Errorf("level %d slot %d: occupancy bit set, slot empty", i, s)
			}
			if s < cur || (i > 0 && s == cur) {
				return fmt.Errorf("level %d: slot %d occupied, behind now's slot %d", i, s, cur)
			}
			name := func() string { return fmt.Sprintf("level %d slot %d", i, s) }
			err := walk(name, sent, func(t *Timer) error {
				f := t.filed
				switch {
				case f < now:
					return fmt.Errorf("filed at tick %d, before now %d", f, now)
				case f > l.last:
					return fmt.Errorf("filed at tick %d, beyond the level's revolution (last %d)", f, l.last)
				case i > 0 && f <= h.levels[i-1].last:
					return fmt.Errorf("filed at tick %d, within the level below (last %d)", f, h.levels[i-1].last)
				case l.slotOf(f) != s || slotByDigit(l, f) != s:
					return fmt.Errorf("filed at tick %d, which is slot %d (by its digit: %d)", f, l.slotOf(f), slotByDigit(l, f))
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	minLate := int64(math.MaxInt64)
	if err := walk(func() string { return "late" }, &h.late, func(t *Timer) error {
		f := t.filed
		if f > now {
			return fmt.Errorf("filed at tick %d, after now %d", f, now)
		}
		minLate = min(minLate, f)
		return nil
	}); err != nil {
		return err
	}
	if !h.late.empty() && h.lateMin > minLate {
		return fmt.Errorf("late: lateMin %d above the earliest, %d", h.lateMin, minLate)
	}
	// The firing list is empty between Advances: a callback that panicked
	// put what it left back on the late list.
	if err := walk(func() string { return "firing" }, &h.firing, func(t *Timer) error {
		if h.advancing {
			return nil
		}
		return fmt.Errorf("filed at tick %d: on the firing list between Advances", t.filed)
	}); err != nil {
		return err
	}
	if h.hops < 0 {
		return fmt.Errorf("%d timers with a pending run", h.hops)
	}
	if c := h.count; c != n+h.hops {
		return fmt.Errorf("Len %d, but %d timers in lists and %d with a pending run", c, n, h.hops)
	}
	return nil
}

// slotByDigit is the slot of tick d at level l computed as the level's
// digit of d, (d / width) mod len(slots), independently of l.start.
func slotByDigit(l *level, d int64) int {
	q := d / l.width
	if l.span != 0 {
		q %= int64(len(l.slots))
	}
	return int(q)
}

// knobs returns h's test hooks, making them on first use.
func (h *Hierarchy) knobs() *hooks {
	if h.hooks == nil {
		h.hooks = &hooks{}
	}
	return h.hooks
}
