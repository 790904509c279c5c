// Package timingwheel keeps very many timers — a timeout for every
// connection, a retransmit timer for every packet in flight — at O(1) cost
// per operation, in a hierarchy of hashed timing wheels (Varghese and Lauck,
// "Hashed and Hierarchical Timing Wheels", SOSP 1987).
//
//	h, err := timingwheel.New() // 1ms tick; levels of ms, s, min, h
//	if err != nil { ... }
//	h.Start()
//	defer h.Stop()
//	t := h.AfterFunc(30*time.Second, func() { conn.Close() })
//	...
//	t.Reset(30 * time.Second) // heartbeat: push the deadline back
//
// # Resolution
//
// The finest level has one slot per tick ([WithTick], 1ms by default); each
// coarser level has slots as wide as a whole revolution of the level below
// ([WithLevels], by default 1000, 60, 60 and 24 slots: milliseconds,
// seconds, minutes, hours). A timer is placed by its own deadline and moves
// (cascades) to a finer level as the coarser wheel turns, so it fires with
// one-tick precision however far away it was armed. A deadline is rounded
// up to the next tick after the origin (the clock reading taken by [New]):
// a timer never fires early and fires at most one tick late.
//
// # Horizon
//
// Deadlines beyond the span of the top level (one day by default) are held
// in further levels that are added on demand, each with as many slots as
// the last configured level, every slot as wide as a whole revolution of
// the level below. Any deadline up to the largest [time.Duration] from now
// works; the arithmetic saturates instead of overflowing. Deadlines are
// kept in nanoseconds since the origin, so one at or beyond the largest
// Duration (about 292 years) from the origin is held at that limit and
// never fires, as the clock's reading saturates there too: firing it would
// be early.
//
// # Driving the wheels
//
// Timers fire only when the hierarchy is advanced: either by the driver
// goroutine ([Hierarchy.Start]), which sleeps until the next tick that has
// work and not at all while nothing is armed, or by calling
// [Hierarchy.Advance] from the caller's own loop. With a [clock.Mock]
// (see [WithClock]) "mock.Add(d); h.Advance()" is fully deterministic; so is
// the real clock inside a testing/synctest bubble.
//
// # Callbacks
//
// Callbacks run one at a time on the goroutine that advances the hierarchy,
// in order of their (rounded) deadlines, with no lock held: they may arm,
// stop and reset any timer, their own included. They should be short, as
// they delay the timers after them; hand long work to another goroutine.
package timingwheel

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// ErrInvalidConfig is reported (wrapped) by [New] for an invalid [Option];
// test for it with errors.Is.
var ErrInvalidConfig = errors.New("timingwheel: invalid config")

// MaxSlots is the largest number of slots [WithLevels] accepts for one
// level. Each slot takes 48 bytes, so a level this large takes about 200 MB.
const MaxSlots = 1 << 22

// An Option configures a [Hierarchy] built by [New]. A nil Option makes New
// return an error.
type Option interface {
	apply(*config) error
}

type config struct {
	clock clock.Clock
	tick  time.Duration
	slots []int
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithTick sets the resolution of the finest level: deadlines are rounded up
// to a multiple of d after the origin. The default is 1ms. d must be > 0.
func WithTick(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithTick(%v): the tick must be positive", ErrInvalidConfig, d)
		}
		c.tick = d
		return nil
	})
}

// WithLevels sets the number of slots of each level, finest first. The
// default is 1000, 60, 60, 24: with the default 1ms tick, levels of
// milliseconds, seconds, minutes and hours spanning one day. There must be
// at least one level and every level needs at least 2 (and at most
// [MaxSlots]) slots; counts need not be powers of two. Deadlines beyond the
// top level are held in further levels added as needed, each with as many
// slots as the last level given. Each slot costs 48 bytes; as the last
// count also sizes every overflow level, keep it small.
func WithLevels(slots ...int) Option {
	slots = append([]int(nil), slots...) // the caller may reuse its slice
	return optionFunc(func(c *config) error {
		if len(slots) == 0 {
			return fmt.Errorf("%w: WithLevels(): at least one level is needed", ErrInvalidConfig)
		}
		for i, n := range slots {
			if n < 2 || n > MaxSlots {
				return fmt.Errorf("%w: WithLevels(%v): level %d has %d slots; each level needs 2 to %d",
					ErrInvalidConfig, slots, i, n, MaxSlots)
			}
		}
		c.slots = slots
		return nil
	})
}

// Hierarchy is a hierarchy of timing wheels. Create one with [New]; the zero
// value is not usable. All methods of Hierarchy and [Timer] are safe for
// concurrent use by multiple goroutines.
type Hierarchy struct {
	clock     clock.Clock
	realClock bool // clock is the default real clock: read package time directly
	origin    time.Time
	tick      int64 // nanoseconds
	top       int   // slots per level added beyond the configured ones

	// lastTick is the last tick the clock can reach: elapsed time saturates
	// at the largest Duration. A deadline there or later (which includes
	// every deadline that saturated) is due after it and never fires.
	lastTick int64

	// lazyTicks is the number of ticks level 0 spans. A timer filed at least
	// that far beyond now is not at level 0, so moving its deadline later can
	// skip the lock (see Timer.resetTo): it is re-filed when its slot comes up.
	lazyTicks int64

	now atomic.Int64 // current tick; written with mu held

	advMu sync.Mutex // serializes Advance

	mu          sync.Mutex
	count       int // armed timers
	levels      []*level
	overdue     Timer        // timers due before now, sorted by filed tick
	late        Timer        // timers filed due before now since the last Advance, unsorted
	lateMin     int64        // a lower bound of the ticks filed on late
	scratch     []*Timer     // reused by mergeLateLocked
	firing      Timer        // timers collected by Advance and not yet run
	advancing   bool         // an Advance is running callbacks
	running     bool         // the driver is running
	sleepUntil  int64        // tick the driver sleeps until (MaxInt64: idle)
	driverTimer *clock.Timer // the clock timer the driver sleeps on, if any

	wake   chan struct{} // wakes the driver for an earlier timer
	runMu  sync.Mutex    // serializes Start and Stop
	stopCh chan struct{}
	doneCh chan struct{}
}

// New returns a Hierarchy configured by opts. Its origin, from which ticks
// are counted, is the clock's reading now. Invalid options are reported as
// an error that wraps [ErrInvalidConfig]; New never panics on bad options.
// The hierarchy does nothing on its own until [Hierarchy.Start] or
// [Hierarchy.Advance] is called.
func New(opts ...Option) (*Hierarchy, error) {
	c := config{tick: time.Millisecond, slots: []int{1000, 60, 60, 24}}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidConfig)
		}
		if err := o.apply(&c); err != nil {
			return nil, err
		}
	}
	realClock := c.clock == nil
	if realClock {
		c.clock = clock.New()
	}
	h := &Hierarchy{
		clock:      c.clock,
		realClock:  realClock,
		tick:       int64(c.tick),
		top:        c.slots[len(c.slots)-1],
		lazyTicks:  int64(c.slots[0]),
		sleepUntil: math.MaxInt64,
		wake:       make(chan struct{}, 1),
	}
	h.origin = h.clock.Now()
	h.lastTick = h.dueTick(math.MaxInt64) - 1
	h.overdue.initList(-1, 0)
	h.late.initList(-1, 0)
	h.firing.initList(-1, 0)
	width := int64(1)
	for _, n := range c.slots {
		l := newLevel(len(h.levels), n, width)
		h.levels = append(h.levels, l)
		if l.span == 0 {
			break // this level already covers every tick; more would stay empty
		}
		width = l.span
	}
	h.setNowLocked(0)
	return h, nil
}

// Timer is one timer of a [Hierarchy], created by [Hierarchy.AfterFunc] or
// [Hierarchy.AtFunc]. Its methods mirror [time.Timer]'s. The zero Timer is
// not usable: its methods panic.
type Timer struct {
	next, prev *Timer // position in a list; nil when in none
	h          *Hierarchy
	// when is the deadline in nanoseconds since the origin. It may be moved
	// later without the lock (Timer.resetTo), so it is atomic.
	when atomic.Int64
	// filed is the tick the timer was placed for (its due tick when placed),
	// or unarmed/claimed. Written with h.mu held; read without it by resetTo.
	filed atomic.Int64
	f     func()
}

// AfterFunc arms a timer that calls f once the clock reaches now+d, rounded
// up to the next tick, and returns the Timer, for Stop and Reset. f runs on
// the goroutine that advances the hierarchy. A d <= 0 makes the timer due at
// once: it fires on the next [Hierarchy.Advance], never inside AfterFunc.
// AfterFunc panics if f is nil.
func (h *Hierarchy) AfterFunc(d time.Duration, f func()) *Timer {
	if f == nil {
		panic("timingwheel: AfterFunc called with a nil func")
	}
	return h.arm(&Timer{h: h, f: f}, h.after(d))
}

// AtFunc arms a timer that calls f once the clock reaches deadline, rounded
// up to the next tick, and returns the Timer, for Stop and Reset. f runs on
// the goroutine that advances the hierarchy. A deadline in the past fires on
// the next [Hierarchy.Advance], never inside AtFunc. AtFunc panics if f is
// nil.
func (h *Hierarchy) AtFunc(deadline time.Time, f func()) *Timer {
	if f == nil {
		panic("timingwheel: AtFunc called with a nil func")
	}
	return h.arm(&Timer{h: h, f: f}, h.offset(deadline))
}

// arm places the new timer t, due at w (ns since origin).
func (h *Hierarchy) arm(t *Timer, w int64) *Timer {
	t.when.Store(w)
	d := h.dueTick(w)
	h.mu.Lock()
	h.count++
	h.armLocked(t, d)
	h.mu.Unlock()
	return t
}

// Len returns the number of timers armed now: those that have neither fired
// (their callback has not started) nor been stopped.
func (h *Hierarchy) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

// armLocked places t, newly (re-)armed and due at tick d, and wakes the
// driver if t is due before the driver meant to wake. h.mu must be held.
func (h *Hierarchy) armLocked(t *Timer, d int64) {
	if h.advancing && d <= h.now.Load() {
		// Armed by a callback (or beside one) for a tick already being
		// fired: keep it for the next Advance, so that a callback that
		// re-arms itself for "now" cannot keep one Advance from returning.
		h.fileOverdueLocked(t, d)
	} else {
		h.placeLocked(t, d)
	}
	if d < h.sleepUntil && h.running {
		h.sleepUntil = d
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

// placeLocked files t under due tick d: on the overdue list if d is before
// now, otherwise in the slot of the lowest level whose current revolution
// contains d. h.mu must be held.
func (h *Hierarchy) placeLocked(t *Timer, d int64) {
	if d < h.now.Load() {
		h.fileOverdueLocked(t, d)
		return
	}
	t.filed.Store(d)
	i := 0
	for d > h.levels[i].last {
		i++
		if i == len(h.levels) {
			h.addLevelLocked()
		}
	}
	l := h.levels[i]
	s := l.slotOf(d)
	l.setOccupied(s)
	l.slots[s].pushBack(t)
}

// addLevelLocked adds a level above the top one, for deadlines beyond the
// top's current revolution. It is not called once a level spans every tick.
func (h *Hierarchy) addLevelLocked() {
	top := h.levels[len(h.levels)-1]
	l := newLevel(len(h.levels), h.top, top.span)
	l.setNow(h.now.Load())
	h.levels = append(h.levels, l)
}

// fileOverdueLocked files t, due at tick d before now (or at now, while an
// Advance runs), for the next Advance: on the late list, in O(1). The next
// Advance sorts the late list into the overdue list (mergeLateLocked), so
// that arming stays O(1) whatever order past deadlines come in.
// h.mu must be held.
func (h *Hierarchy) fileOverdueLocked(t *Timer, d int64) {
	t.filed.Store(d)
	if h.late.empty() || d < h.lateMin {
		h.lateMin = d
	}
	h.late.pushBack(t)
}

// mergeLateLocked sorts the late list by due tick and merges it into the
// overdue list, O(k log k) for k late timers. h.mu must be held.
func (h *Hierarchy) mergeLateLocked() {
	if h.late.empty() {
		return
	}
	s := h.scratch[:0]
	for t := h.late.takeAll(); t != nil; t = t.next {
		s = append(s, t)
	}
	slices.SortStableFunc(s, func(a, b *Timer) int { return cmp.Compare(a.filed.Load(), b.filed.Load()) })
	x := h.overdue.next
	for _, t := range s {
		for x != &h.overdue && x.filed.Load() <= t.filed.Load() {
			x = x.next
		}
		x.insertBefore(t)
	}
	clear(s) // keep no references in the scratch slice
	if cap(s) > 1<<12 {
		s = nil // a burst of past deadlines: do not hold its memory
	}
	h.scratch = s[:0]
}

// unlinkLocked takes t off whatever list holds it, keeping the occupancy
// bitmaps exact. h.mu must be held.
func (h *Hierarchy) unlinkLocked(t *Timer) {
	if s := t.unlink(); s != nil {
		if lv := s.when.Load(); lv >= 0 {
			h.levels[lv].clearOccupied(int(s.filed.Load()))
		}
	}
}

// setNowLocked moves the current tick to now. h.mu must be held.
func (h *Hierarchy) setNowLocked(now int64) {
	h.now.Store(now)
	for _, l := range h.levels {
		l.setNow(now)
	}
}

// Advance runs, on the calling goroutine, the callback of every armed timer
// whose deadline, rounded up to a tick, is at or before the clock's reading
// now, in order of those rounded deadlines. It returns how many callbacks
// ran. It cascades coarse slots on the way, visiting only slots that hold
// timers, so a jump of the clock by any amount costs work proportional to
// the timers due and the occupied slots crossed.
//
// Calls of Advance, including the driver's, are serialized: a callback must
// not call Advance or [Hierarchy.Stop], which would wait for it. A timer
// armed by a callback for a time already reached fires in this Advance or
// the next. If a callback panics, the panic propagates to the caller of
// Advance; the hierarchy stays consistent and the timers still due fire on
// the next Advance. If the clock has gone backwards, nothing fires until it
// passes the deadlines again.
func (h *Hierarchy) Advance() int {
	h.advMu.Lock()
	defer h.advMu.Unlock()
	target := min(floorDiv(h.elapsed(), h.tick), h.lastTick)
	ran := 0
	h.mu.Lock()
	h.advancing = true
	locked := true
	defer func() {
		if !locked { // a callback panicked
			h.mu.Lock()
		}
		h.advancing = false
		h.mu.Unlock()
	}()

	// Timers that were due before now come first: take those due by the
	// target (the clock may have gone backwards), in order. What a panicking
	// callback left on the firing list goes back among them, in order.
	for t := h.firing.next; t != &h.firing; t = h.firing.next {
		t.unlink()
		h.fileOverdueLocked(t, t.filed.Load())
	}
	h.mergeLateLocked()
	for t := h.overdue.next; t != &h.overdue && t.filed.Load() <= target; t = h.overdue.next {
		t.unlink()
		h.firing.pushBack(t)
	}
	for {
		t := h.firing.next
		if t == &h.firing {
			if !h.collectLocked(target) {
				return ran
			}
			continue
		}
		t.unlink()
		filed := t.filed.Load()
		// Claim t before looking at its deadline: a Reset racing without the
		// lock either sees the claim (and takes the lock) or its new
		// deadline is seen here.
		t.filed.Store(claimed)
		if d := h.dueTick(t.when.Load()); d != filed {
			h.placeLocked(t, d) // moved later since it was filed
			continue
		}
		t.filed.Store(unarmed)
		h.count--
		f := t.f
		h.mu.Unlock()
		locked = false
		ran++
		f()
		h.mu.Lock()
		locked = true
	}
}

// collectLocked processes the wheels' events in order, up to the first that
// fires timers, which it moves to the firing list. It reports false when no
// event is due by target, after moving now to target. h.mu must be held.
func (h *Hierarchy) collectLocked(target int64) bool {
	for {
		e, lv, s, ok := h.nextEventLocked()
		if !ok || e > target {
			if target > h.now.Load() {
				h.setNowLocked(target)
			}
			return false
		}
		if e > h.now.Load() {
			h.setNowLocked(e)
		}
		l := h.levels[lv]
		l.clearOccupied(s)
		if lv == 0 {
			l.slots[s].moveAllTo(&h.firing)
			return true
		}
		// Take every timer off the slot before placing any: each lands at a
		// lower level now, and re-filing into a list being walked would be
		// unsound.
		for t := l.slots[s].takeAll(); t != nil; {
			next := t.next
			t.next, t.prev = nil, nil
			h.placeLocked(t, h.dueTick(t.when.Load()))
			t = next
		}
	}
}

// nextEventLocked returns the earliest event of the wheels: the first tick
// of the earliest occupied slot, preferring the higher level on a tie, so
// cascades into a tick come before it fires. h.mu must be held.
func (h *Hierarchy) nextEventLocked() (tick int64, lv, slot int, ok bool) {
	now := h.now.Load()
	for i := len(h.levels) - 1; i >= 0; i-- {
		if e, s, found := h.levels[i].next(now); found && (!ok || e < tick) {
			tick, lv, slot, ok = e, i, s, true
		}
	}
	return
}

// Next returns the time at which [Hierarchy.Advance] next has work: the
// earliest deadline of the armed timers, rounded up to its tick. That time
// may have passed already (a timer due but not yet advanced over). Next
// reports false when no timer is armed, and when the armed timers can never
// fire (their deadlines are held at the end of time; see Horizon in the
// package doc).
//
// Next looks inside the earliest occupied coarse slots to find the exact
// deadline, so it takes time proportional to the timers in them. The
// driver does not call it: it wakes at the cheaper next event of the
// wheels, which may be an earlier cascade of a coarse slot.
func (h *Hierarchy) Next() (time.Time, bool) {
	h.mu.Lock()
	e, ok := h.nextDueLocked()
	h.mu.Unlock()
	if !ok || e > h.lastTick {
		return time.Time{}, false
	}
	return h.tickTime(e), true
}

// nextDueLocked returns the earliest due tick of the armed timers. The
// overdue, firing and level-0 lists are in tick order, so their heads tell;
// the late list and coarse slots are scanned, coarse slots in order while
// they start before the best found (a timer a lazy Reset moved can sit in a
// slot earlier than its due tick). h.mu must be held.
func (h *Hierarchy) nextDueLocked() (best int64, ok bool) {
	if h.count == 0 {
		return 0, false
	}
	consider := func(d int64) {
		if !ok || d < best {
			best, ok = d, true
		}
	}
	for _, l := range []*Timer{&h.firing, &h.overdue} {
		if !l.empty() {
			consider(l.next.filed.Load())
		}
	}
	for t := h.late.next; t != &h.late; t = t.next {
		consider(t.filed.Load())
	}
	now := h.now.Load()
	for i, l := range h.levels {
		for e, s, found := l.next(now); found && (!ok || e < best); e, s, found = l.nextAfter(now, s) {
			if i == 0 {
				consider(e) // a level-0 slot holds timers due at its tick
				break
			}
			sent := &l.slots[s]
			for t := sent.next; t != sent; t = t.next {
				consider(h.dueTick(t.when.Load()))
			}
		}
	}
	return best, ok
}

// nextLocked returns the tick of the next work for Advance: the earliest
// event of the wheels (which may be a cascade) or of the overdue, late and
// firing lists. It costs O(levels), not O(timers). h.mu must be held.
func (h *Hierarchy) nextLocked() (int64, bool) {
	if h.count == 0 {
		return 0, false
	}
	e, _, _, ok := h.nextEventLocked()
	for _, l := range []*Timer{&h.firing, &h.overdue} {
		if !l.empty() {
			if f := l.next.filed.Load(); !ok || f < e {
				e, ok = f, true
			}
		}
	}
	if !h.late.empty() && (!ok || h.lateMin < e) {
		e, ok = h.lateMin, true // may be earlier than needed after a Stop: harmless
	}
	return e, ok
}

// Stop prevents the timer from firing. It reports whether the call stopped
// the timer: true until its callback starts, even if an Advance has already
// collected it and is running other callbacks first; false if the callback
// has started or the timer was already stopped. Stop does not wait for a
// running callback. The timer is unlinked at once and the hierarchy keeps
// no reference to it.
func (t *Timer) Stop() bool {
	h := t.hierarchy("Stop")
	h.mu.Lock()
	if t.filed.Load() == unarmed {
		h.mu.Unlock()
		return false
	}
	h.unlinkLocked(t)
	t.filed.Store(unarmed)
	h.count--
	if h.count == 0 && h.driverTimer != nil {
		// Nothing is armed: the driver need not wake at all.
		h.driverTimer.Stop()
		h.sleepUntil = math.MaxInt64
	}
	h.mu.Unlock()
	return true
}

// Reset re-arms the timer to fire d from now (rounded up to the next tick),
// with the same callback. It reports whether the timer was armed: true means
// this call also cancelled the pending firing, exactly as [Timer.Stop] would
// have; false means the timer had fired (its callback started) or been
// stopped, and is now armed again. A callback may Reset its own timer. A
// d <= 0 fires on the next [Hierarchy.Advance], never inside Reset.
//
// Reset never allocates. Moving an armed timer's deadline later takes no
// lock unless the timer is within level 0's span of firing (1s by default):
// it keeps its slot and is re-filed when the slot comes up.
func (t *Timer) Reset(d time.Duration) bool {
	h := t.hierarchy("Reset")
	return t.resetTo(h, h.after(d))
}

// ResetAt is like [Timer.Reset] with an absolute deadline; a deadline in the
// past fires on the next [Hierarchy.Advance]. It lets a caller that re-arms
// many timers read the clock once for all of them, which is much cheaper
// than a clock read per timer.
func (t *Timer) ResetAt(deadline time.Time) bool {
	h := t.hierarchy("ResetAt")
	return t.resetTo(h, h.offset(deadline))
}

// Deadline returns the deadline the timer was last armed with. After the
// timer fires or is stopped it still returns that deadline. A deadline more
// than about 292 years from the hierarchy's origin is held at that limit.
func (t *Timer) Deadline() time.Time {
	h := t.hierarchy("Deadline")
	return h.origin.Add(time.Duration(t.when.Load()))
}

func (t *Timer) hierarchy(method string) *Hierarchy {
	if t.h == nil {
		panic("timingwheel: " + method + " called on a Timer not created by AfterFunc or AtFunc")
	}
	return t.h
}

// resetTo re-arms t with deadline w (ns since origin).
func (t *Timer) resetTo(h *Hierarchy, w int64) bool {
	// Fast path: an armed timer that sits beyond level 0 and moves later
	// only needs its new deadline stored. Its slot comes up no later than
	// before, and Advance then re-files it by the deadline it finds. Timers
	// at level 0 take the lock, so Next stays exact for them.
	if old := t.when.Load(); w >= old {
		f, now := t.filed.Load(), h.now.Load()
		if f > now && f-now >= h.lazyTicks && t.when.CompareAndSwap(old, w) {
			// If Advance claimed t or Stop took it meanwhile, only the lock
			// can tell whether this Reset came first; otherwise it is done.
			if f = t.filed.Load(); f != claimed && f != unarmed {
				return true
			}
		}
	}
	d := h.dueTick(w)
	h.mu.Lock()
	f := t.filed.Load()
	if f == d && f > h.now.Load() {
		// Re-armed for the tick it is filed under, in a wheel slot: only
		// the deadline changes, the timer stays where it is.
		t.when.Store(w)
		h.mu.Unlock()
		return true
	}
	armed := f != unarmed
	if armed {
		h.unlinkLocked(t)
	} else {
		h.count++
	}
	t.when.Store(w)
	h.armLocked(t, d)
	h.mu.Unlock()
	return armed
}

// Init binds t, a zero or unarmed Timer held by value (a field of the
// caller's own struct), to h with callback f, and returns t, unarmed. Then
// [Timer.Reset] and [Timer.ResetAt] arm it (returning false the first
// time) and [Timer.Stop] disarms it, exactly as for a timer returned by
// [Hierarchy.AfterFunc] and then stopped. Neither Init nor any later Reset,
// ResetAt or Stop allocates. f may refer to t itself: t exists before it is
// first armed.
//
// Init panics if h or f is nil, or if t is armed. A Timer must not be
// copied once initialized.
func (t *Timer) Init(h *Hierarchy, f func()) *Timer {
	if h == nil {
		panic("timingwheel: Timer.Init called with a nil Hierarchy")
	}
	if f == nil {
		panic("timingwheel: Timer.Init called with a nil func")
	}
	if t.h != nil {
		t.h.mu.Lock()
		armed := t.filed.Load() != unarmed
		t.h.mu.Unlock()
		if armed {
			panic("timingwheel: Timer.Init called on an armed Timer")
		}
	}
	t.h, t.f = h, f
	t.filed.Store(unarmed)
	return t
}
