package timingwheel

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
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
//   - no slot holds a timer filed after the last tick, and the never list
//     only such timers;
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
			if b := x.b.Load(); x.home() != sh || (x.f == nil) == (b.fire == nil) {
				return errors.New("foreign node")
			}
			f := x.filed
			p := x.when.Load()
			if !movable(p) {
				return fmt.Errorf("timer in a list is marked not filed or frozen (filed %d, word %#x)", f, p)
			}
			if d := sh.h.dueTick(x.deadlineLocked(sh.h, p)); d < f {
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
				case f > sh.h.lastTick:
					return fmt.Errorf("filed at tick %d, after the last tick %d", f, sh.h.lastTick)
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
	if err := walk(func() string { return "never" }, &h.never, func(t *Timer) error {
		if f := t.filed; f <= sh.h.lastTick {
			return fmt.Errorf("filed at tick %d, not after the last tick %d", f, sh.h.lastTick)
		}
		return nil
	}); err != nil {
		return err
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

// withBatch makes h's long work under a shard's lock run in batches of n
// timers, so that small tests open the windows between batches (where the
// lock is let go to the goroutines waiting for it). Only tests reach it.
func withBatch(n int) Option {
	return optionFunc(func(c *config) error {
		c.batch = n
		return nil
	})
}

// dealNext makes the next timer h places (armed new, initialized, or an
// unarmed one re-armed) go to shard i. h's clock must be given by
// WithClock, where shards are dealt in turn (see pickShard).
func dealNext(h *Hierarchy, i int) {
	if !h.inTurn {
		panic("dealNext: shards are dealt in turn only with WithClock")
	}
	h.rr.Store(int64(i))
}

// inWindows runs f, on a goroutine of its own, each time that goroutine
// takes s's lock while open (called with the lock held) reports long work
// half done. It contends for the lock as any goroutine does, and counts
// itself waiting all along, so that the work lets the lock go between
// every two batches (see shard.yieldLocked). With one processor (until
// stop), the work's yield then runs this goroutine, which takes the lock,
// and f runs in the window between two batches; it yields back after each
// try. stop (also called at the end of the test) ends the goroutine and
// returns how many windows f ran in.
func inWindows(t testing.TB, s *shard, open func() bool, f func()) (stop func() int) {
	var quit atomic.Bool
	done := make(chan int, 1)
	procs := runtime.GOMAXPROCS(1)
	s.waiting.Add(1)
	go func() {
		n := 0
		for !quit.Load() {
			s.mu.Lock()
			in := open()
			s.mu.Unlock()
			if in {
				n++
				f()
			}
			runtime.Gosched()
		}
		done <- n
	}()
	var once sync.Once
	n := 0
	stop = func() int {
		once.Do(func() {
			quit.Store(true)
			n = <-done
			s.waiting.Add(-1)
			runtime.GOMAXPROCS(procs)
		})
		return n
	}
	t.Cleanup(func() { stop() })
	return stop
}
