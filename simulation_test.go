package timingwheel

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The simulation runs random scripts of arm/stop/reset/advance against the
// hierarchy and against a naive model (a flat table of timers, scanned in
// full), and checks after every step that they agree: which timers fired,
// in what order, Len, Next, Deadline, and the wheel's internal invariants
// (Hierarchy.check). Scripts come from a seeded PCG in the normal test run
// and from the fuzzer's bytes in FuzzSimulation; the body is the same.

// simClock is a manual clock. It implements only what the hierarchy reads
// (Now and Since); the driver is not used here.
type simClock struct {
	clock.Clock // nil: any other method panics
	now         time.Time
}

func (c *simClock) Now() time.Time                  { return c.now }
func (c *simClock) Since(t time.Time) time.Duration { return c.now.Sub(t) }

// source yields the script's random choices.
type source interface {
	// intn returns a value in [0, n), n > 0.
	intn(n int64) int64
	// done reports whether the script is exhausted.
	done() bool
}

type rngSource struct {
	r    *rand.Rand
	left int
}

func (s *rngSource) intn(n int64) int64 { return s.r.Int64N(n) }
func (s *rngSource) done() bool         { s.left--; return s.left < 0 }

// byteSource decodes the fuzzer's input; it ends when the bytes do.
type byteSource struct{ b []byte }

// encodedSize is how many bytes a choice in [0, n) takes in a script: as
// few as the range needs.
func encodedSize(n int64) int {
	switch {
	case n <= 1<<8:
		return 1
	case n <= 1<<16:
		return 2
	case n <= 1<<32:
		return 4
	}
	return 8
}

func (s *byteSource) intn(n int64) int64 {
	var buf [8]byte
	k := copy(buf[:encodedSize(n)], s.b)
	s.b = s.b[k:]
	return int64(binary.LittleEndian.Uint64(buf[:]) % uint64(n))
}
func (s *byteSource) done() bool { return len(s.b) == 0 }

// layout is one configuration under test.
type layout struct {
	name   string
	tick   time.Duration
	slots  []int // nil: default
	shards int   // 0: one
}

var simLayouts = []layout{
	{"default", time.Millisecond, nil, 0},
	{"tiny-2x3", time.Millisecond, []int{2, 2, 2}, 0},
	{"single-3", time.Millisecond, []int{3}, 0},
	{"odd-7-5-3", 10 * time.Millisecond, []int{7, 5, 3}, 0},
	{"pow2-64x3", time.Millisecond, []int{64, 64, 64}, 0},
	{"ns-tick-2x2", time.Nanosecond, []int{2, 2}, 0},
	{"wide-100-1000", time.Microsecond, []int{100, 1000}, 0},
	{"sharded-default", time.Millisecond, nil, 3},
	{"sharded-tiny-2x3", time.Millisecond, []int{2, 2, 2}, 2},
	{"sharded-4-4-4", time.Millisecond, []int{4, 4, 4}, 4},
}

// maxLive bounds the timers armed at once in a simulation; beyond it, arming
// turns into stopping.
const maxLive = 100

// simTimer is the model's view of one timer.
type simTimer struct {
	t     *Timer
	armed bool  // in the wheels: due to fire at when
	when  int64 // ns since origin, as armed
	// flex is set for a timer armed by a callback with a deadline already
	// reached: it may fire in that Advance or the next (docs/guarantees.md,
	// "Callbacks may call back").
	flex   int
	period int64 // ns, for a periodic timer; 0: one-shot
	exec   bool  // bound by InitOn: its firing hands a run to the executor
	// For an executor timer: hop is set from a one-shot firing until the
	// run starts or the timer is stopped or re-armed (it is armed then, in
	// no wheel); pending likewise for a periodic one, which stays armed.
	hop, pending bool
}

// live reports whether Stop and Reset find st armed.
func (st *simTimer) live() bool { return st.armed || st.hop }

// cancel is what Stop and every re-arm do to a run handed to the executor:
// it will not call f.
func (st *simTimer) cancel() { st.hop, st.pending = false, false }

type sim struct {
	tb     testing.TB
	desc   string // layout and seed, in every failure
	src    source
	clk    *simClock
	h      *Hierarchy
	tick   int64
	widths []int64 // ticks per slot of each configured level, and the top span
	timers []*simTimer
	live   int // armed timers, as of the last verify
	ops    int
	// progress is ops, for the watchdog (see watchedRun), which reads it
	// from another goroutine.
	progress atomic.Int64

	// stats counts the situations a script reached, to pick a seed corpus
	// that covers them (see TestWriteFuzzCorpus).
	stats map[string]int

	// During Advance: the log of what callbacks saw and did.
	inAdvance bool
	advances  int   // Advance calls so far; the current one's number during it
	target    int64 // the Advance's tick
	clockNs   int64 // the Advance's clock reading, ns since origin
	lastDue   int64
	fired     int
	// wheelNow is the latest tick an Advance has reached before this one:
	// a timer due by it was armed for a tick already come (or left by a
	// callback that panicked), and fires ahead of later ticks in the order
	// armed, not in order of due ticks (docs/guarantees.md, "Order").
	wheelNow int64

	// runs are the runs executor timers handed over, not yet called (some
	// are called twice: they stay).
	runs []func()
}

func (s *sim) fatalf(format string, args ...any) {
	s.tb.Helper()
	s.tb.Fatalf("%s op %d: %s", s.desc, s.ops, fmt.Sprintf(format, args...))
}

// modelDue and modelFloor are the reference rounding, written independently
// of ceilDiv/floorDiv: unsigned arithmetic, no saturation needed.
func (s *sim) modelDue(w int64) int64 {
	t := uint64(s.tick)
	if w >= 0 {
		return int64((uint64(w) + t - 1) / t)
	}
	return -int64(uint64(-w) / t)
}

func (s *sim) modelFloor(e int64) int64 {
	t := uint64(s.tick)
	if e >= 0 {
		return int64(uint64(e) / t)
	}
	return -int64((uint64(-e) + t - 1) / t)
}

// never reports whether a deadline can never fire: one at the largest
// Duration from the origin (where deadlines saturate), or due after the
// last tick the saturating clock can reach.
func (s *sim) never(w int64) bool {
	return w == math.MaxInt64 || s.modelDue(w) > s.modelFloor(math.MaxInt64)
}

// clamp mirrors the documented representation: deadlines are nanoseconds
// since the origin, saturated, and no earlier than minDeadline.
func clampNs(ns int64) int64 { return max(ns, math.MinInt64+2) }

func (s *sim) elapsed() int64 { return int64(s.clk.now.Sub(s.h.origin)) }

// options returns the options that make l's hierarchy on clock c, and
// the slots of its levels.
func (l layout) options(c clock.Clock) ([]Option, []int) {
	opts := []Option{WithClock(c), WithTick(l.tick), WithShards(max(l.shards, 1))}
	if l.slots == nil {
		return opts, []int{1000, 60, 60, 24}
	}
	return append(opts, WithLevels(l.slots...)), l.slots
}

// simStart is where the models' clocks start: an instant that is not a
// multiple of any tick.
var simStart = time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.UTC)

// newHierarchy makes l's hierarchy on clock c, with opts. With more than
// one shard, the timers are dealt to the shards in turn and an unarmed
// timer re-armed moves to the next (as with every clock given by
// WithClock), so that Advance merges them and every operation meets timers
// of other shards. widths are the ticks per slot of
// each level, and the top level's span (saturated where it overflows).
func (l layout) newHierarchy(tb testing.TB, c clock.Clock, more ...Option) (h *Hierarchy, widths []int64) {
	tb.Helper()
	opts, slots := l.options(c)
	h, err := New(append(opts, more...)...)
	if err != nil {
		tb.Fatal(err)
	}
	w := int64(1)
	for _, n := range slots {
		widths = append(widths, w)
		if w > math.MaxInt64/int64(n) {
			break
		}
		w *= int64(n)
	}
	return h, append(widths, w)
}

func newSim(tb testing.TB, l layout, desc string, src source) *sim {
	clk := &simClock{now: simStart}
	// Cascade in batches of a few timers.
	h, widths := l.newHierarchy(tb, clk, withBatch(1+int(src.intn(4))))
	return &sim{tb: tb, desc: desc, src: src, clk: clk, h: h, tick: int64(l.tick), stats: map[string]int{}, widths: widths}
}

// randTicks returns a tick count on a scale picked at random: within one
// slot of some level, up to a few revolutions of it, beyond the top, huge.
func (s *sim) randTicks() int64 {
	switch s.src.intn(8) {
	case 0:
		return s.src.intn(3)
	case 1:
		return math.MaxInt64 / s.tick // the far end
	case 2:
		return s.src.intn(math.MaxInt64/s.tick/2 + 1) // anywhere
	}
	w := s.widths[s.src.intn(int64(len(s.widths)))]
	if w > math.MaxInt64/4 {
		return s.src.intn(w)
	}
	return s.src.intn(4*w + 1)
}

// randDeadline returns a deadline in ns since the origin.
func (s *sim) randDeadline() int64 {
	now := s.elapsed()
	switch s.src.intn(6) {
	case 0: // in the past, maybe before the origin
		return now - s.src.intn(int64(time.Hour))
	case 1: // a level boundary, exactly or one ns either side
		w := s.widths[s.src.intn(int64(len(s.widths)))]
		k := s.modelFloor(now)/w + s.src.intn(4)
		if k > math.MaxInt64/w/s.tick-1 {
			return math.MaxInt64
		}
		return k*w*s.tick + s.src.intn(3) - 1
	case 2: // the largest deadline
		return math.MaxInt64
	}
	ticks := s.randTicks()
	return satAdd(now, satAdd(mulSat(ticks, s.tick), s.src.intn(s.tick)))
}

// mulSat returns a*b for b > 0, saturated.
func mulSat(a, b int64) int64 {
	switch {
	case a > 0 && a > math.MaxInt64/b:
		return math.MaxInt64
	case a < 0 && a < math.MinInt64/b:
		return math.MinInt64
	}
	return a * b
}

// pick returns a random model timer, or nil.
func (s *sim) pick() *simTimer {
	if len(s.timers) == 0 {
		return nil
	}
	return s.timers[s.src.intn(int64(len(s.timers)))]
}

// callback returns the callback of a timer that is not bound by InitOn:
// the wheel's firing and f's body in one.
func (s *sim) callback(st *simTimer) func() {
	return func() {
		s.fire(st)
		s.body(st)
	}
}

// exec returns the executor of a timer bound by InitOn, and f its callback:
// the firing queues the run, which the script calls at random later on,
// perhaps more than once.
func (s *sim) exec(st *simTimer) (exec func(func()), f func()) {
	exec = func(run func()) {
		s.fire(st)
		s.runs = append(s.runs, run)
	}
	f = func() {
		if !st.hop && !st.pending {
			s.fatalf("a run called f for an arming that was stopped or re-armed after it fired, or twice")
		}
		if st.hop {
			s.stats["exec-run"]++
		}
		st.cancel()
		s.body(st)
	}
	return exec, f
}

// runSome calls a few of the runs handed over, in any order, and leaves
// some for later.
func (s *sim) runSome() {
	for range s.src.intn(3) {
		if len(s.runs) == 0 {
			return
		}
		k := s.src.intn(int64(len(s.runs)))
		run := s.runs[k]
		if s.src.intn(4) != 0 { // else it stays, to be called again
			s.runs = slices.Delete(s.runs, int(k), int(k)+1)
		} else {
			s.stats["exec-run-twice"]++
		}
		run()
	}
	if len(s.runs) > 4*maxLive {
		s.runs = s.runs[len(s.runs)-maxLive:] // never called: as an executor that drops them
	}
}

// checkOrder checks that a timer due at tick due fires in order: due
// after the wheel's now, in order of due ticks; due by it (armed for a tick
// already come), ahead of those.
func (s *sim) checkOrder(due int64) {
	switch {
	case due > s.wheelNow && due < s.lastDue:
		s.fatalf("out of order: due tick %d after %d", due, s.lastDue)
	case due > s.wheelNow:
		s.lastDue = due
	case s.lastDue > s.wheelNow:
		s.fatalf("out of order: due tick %d, a tick already come when armed, after %d", due, s.lastDue)
	}
}

// fire checks a firing by the wheel against the model and applies it: a
// one-shot timer is disarmed (or its run handed over), a periodic one is
// re-armed for the first instant on its grid not yet due at the Advance
// (due after the Advance's tick).
func (s *sim) fire(st *simTimer) {
	if !s.inAdvance {
		s.fatalf("callback ran outside Advance")
	}
	if !st.armed {
		s.fatalf("timer fired while not armed (stopped, or fired before)")
	}
	due := s.modelDue(st.when)
	if due > s.target || s.never(st.when) {
		s.fatalf("timer fired early: due tick %d, Advance at tick %d", due, s.target)
	}
	s.checkOrder(due)
	s.fired++
	for i, w := range s.widths[1:] {
		if due > 0 && due%w == 0 {
			s.stats[fmt.Sprintf("fired-at-level-%d-boundary", i+1)]++
		}
	}
	switch {
	case st.period > 0:
		// The first instant not yet due at this Advance: after its tick's
		// start (one before the clock whose tick is later is not missed).
		next := modelNextInstant(st.when, st.period, mulSat(s.target, s.tick))
		if next > st.when+st.period && st.when+st.period > st.when {
			s.stats["periodic-skipped-runs"]++
		}
		st.when = next
		st.pending = st.exec
		s.stats["periodic-run"]++
		if got, want := st.t.Deadline(), s.h.origin.Add(time.Duration(next)); !got.Equal(want) {
			s.fatalf("Deadline in a periodic run = %v, want the next instant %v", got, want)
		}
	case st.exec:
		st.armed, st.hop = false, true
	default:
		st.armed = false
	}
}

// modelNextInstant is the first instant when+k*period, k >= 1, after clock,
// saturated at the largest int64: computed with big integers, independently
// of nextInstant.
func modelNextInstant(when, period, clock int64) int64 {
	w, p, c := big.NewInt(when), big.NewInt(period), big.NewInt(clock)
	k := big.NewInt(1)
	if clock >= when {
		k.Sub(c, w)
		k.Quo(k, p)
		k.Add(k, big.NewInt(1))
	}
	k.Mul(k, p)
	k.Add(k, w)
	if !k.IsInt64() {
		return math.MaxInt64
	}
	return k.Int64()
}

// body is what a callback does: call back into the hierarchy.
func (s *sim) body(st *simTimer) {
	switch s.src.intn(10) {
	case 0: // the retransmit pattern: re-arm itself, after this Advance
		d, w := s.relative(s.futureDeadline())
		if got := st.t.Reset(d); got != st.live() {
			s.fatalf("Reset in own callback = %v, model armed = %v", got, st.live())
		}
		s.rearmed(st, w, 0)
	case 1: // stop another timer
		if o := s.pick(); o != nil {
			if got := o.t.Stop(); got != o.live() {
				s.fatalf("Stop in callback = %v, model armed = %v", got, o.live())
			}
			o.armed = false
			o.cancel()
		}
	case 2: // arm a new timer, after this Advance
		s.arm(s.futureDeadline())
		s.armedInCallback(s.timers[len(s.timers)-1], s.timers[len(s.timers)-1].when)
	case 3: // move another timer to after this Advance
		if o := s.pick(); o != nil {
			w := s.futureDeadline()
			if got := o.t.ResetAt(s.h.origin.Add(time.Duration(w))); got != o.live() {
				s.fatalf("ResetAt in callback = %v, model armed = %v", got, o.live())
			}
			s.rearmed(o, w, 0)
		}
	case 4: // re-arm itself for a time already reached: fires now or next Advance
		w := s.reachedDeadline()
		if got := st.t.ResetAt(s.h.origin.Add(time.Duration(w))); got != st.live() {
			s.fatalf("ResetAt in own callback = %v, model armed = %v", got, st.live())
		}
		s.rearmed(st, w, 0)
	case 5: // arm a new timer for a time already reached
		s.arm(s.reachedDeadline())
		s.armedInCallback(s.timers[len(s.timers)-1], s.timers[len(s.timers)-1].when)
	case 6: // stop itself: a periodic timer is armed while f runs, so this wins
		if got := st.t.Stop(); got != st.live() {
			s.fatalf("Stop in own callback = %v, model armed = %v", got, st.live())
		}
		if st.period > 0 {
			s.stats["periodic-stopped-by-own-callback"]++
		}
		st.armed = false
		st.cancel()
	case 7: // make itself periodic, or change its period
		p := s.randPeriod()
		if got := st.t.ResetEvery(time.Duration(p)); got != st.live() {
			s.fatalf("ResetEvery in own callback = %v, model armed = %v", got, st.live())
		}
		_, w := s.relative(satAdd(s.elapsed(), p))
		s.rearmed(st, w, p)
	}
}

// rearmed records that a callback re-armed st with deadline w and period p.
func (s *sim) rearmed(st *simTimer, w, p int64) {
	st.cancel()
	st.period = p
	s.armedInCallback(st, w)
}

// randPeriod returns a period in ns: a tick or less, a few slots of some
// level, or enormous.
func (s *sim) randPeriod() int64 {
	switch s.src.intn(6) {
	case 0:
		return 1 + s.src.intn(s.tick)
	case 1:
		return math.MaxInt64 - s.src.intn(3)
	}
	return satAdd(satAdd(1, mulSat(s.randTicks()%(4*s.widths[1]+1), s.tick)), s.src.intn(s.tick))
}

// armedInCallback records that a callback armed st with deadline w. If w
// is due by the running Advance's tick (at the end of time even a "future"
// deadline is), it may fire in this Advance or the next.
func (s *sim) armedInCallback(st *simTimer, w int64) {
	st.armed, st.when = true, w
	if s.modelDue(w) <= s.target {
		st.flex = s.advances
	}
}

// reachedDeadline returns a deadline due by the running Advance's tick: at
// it, or up to a few ticks before.
func (s *sim) reachedDeadline() int64 {
	return satAdd(mulSat(s.target, s.tick), -s.src.intn(3*s.tick+1))
}

// futureDeadline returns a deadline due after the running Advance's tick,
// or the last representable one.
func (s *sim) futureDeadline() int64 {
	min := mulSat(satAdd(s.target, 1), s.tick)
	return satAdd(min, mulSat(s.src.intn(3*s.widths[1]+1), s.tick))
}

// relative returns the duration from now to deadline w, and the deadline
// that a relative arming with it gets: now+d, saturated.
func (s *sim) relative(w int64) (time.Duration, int64) {
	now := s.elapsed()
	d := satAdd(w, -now)
	return time.Duration(d), clampNs(satAdd(now, d))
}

func (s *sim) arm(w int64) {
	st := &simTimer{armed: true, when: clampNs(w)}
	switch k := s.src.intn(12); {
	case k < 2: // periodic, by Every or by ResetEvery of a held timer
		p := s.randPeriod()
		st.period = p
		_, st.when = s.relative(satAdd(s.elapsed(), p))
		if k == 0 {
			st.t = s.h.Every(time.Duration(p), s.callback(st))
		} else {
			st.t = new(Timer).Init(s.h, s.callback(st))
			if st.t.ResetEvery(time.Duration(p)) {
				s.fatalf("first ResetEvery of an initialized timer returned true")
			}
		}
		s.stats["periodic"]++
	case k < 4: // bound by InitOn; periodic now and then
		st.exec = true
		exec, f := s.exec(st)
		st.t = new(Timer).InitOn(s.h, exec, f)
		var was bool
		if s.src.intn(3) == 0 {
			p := s.randPeriod()
			st.period = p
			_, st.when = s.relative(satAdd(s.elapsed(), p))
			was = st.t.ResetEvery(time.Duration(p))
		} else {
			was = st.t.ResetAt(s.h.origin.Add(time.Duration(w)))
		}
		if was {
			s.fatalf("first re-arm of a timer bound by InitOn returned true")
		}
		s.stats["exec"]++
	case k < 8:
		// A timer held by value: Init, then its first Reset or ResetAt
		// arms it and returns false.
		st.t = new(Timer).Init(s.h, s.callback(st))
		var was bool
		if s.src.intn(2) == 0 {
			was = st.t.ResetAt(s.h.origin.Add(time.Duration(w)))
		} else {
			var d time.Duration
			d, st.when = s.relative(w)
			was = st.t.Reset(d)
		}
		if was {
			s.fatalf("first Reset of an initialized timer returned true")
		}
		s.stats["by-value"]++
	case k < 10:
		st.t = s.h.AtFunc(s.h.origin.Add(time.Duration(w)), s.callback(st))
	default:
		var d time.Duration
		d, st.when = s.relative(w)
		st.t = s.h.AfterFunc(d, s.callback(st))
	}
	s.timers = append(s.timers, st)
}

func (s *sim) advance() {
	now := s.elapsed()
	switch s.src.intn(8) {
	case 0:
		s.clk.now = s.clk.now.Add(time.Duration(1 + s.src.intn(s.tick)))
	case 1, 2: // to exactly when Next says there is work
		if next, ok := s.h.Next(); ok && next.After(s.clk.now) {
			s.clk.now = next
		}
	case 3: // backwards, maybe before the origin
		s.clk.now = s.clk.now.Add(-time.Duration(s.src.intn(int64(time.Hour)) + 1))
		s.stats["clock-backwards"]++
	default:
		ticks := s.randTicks()
		if ticks > (math.MaxInt64-now)/s.tick/2 {
			ticks = s.src.intn(1000) // stay clear of the end of time
		}
		s.clk.now = s.clk.now.Add(time.Duration(ticks*s.tick + s.src.intn(s.tick)))
		if ticks > s.widths[len(s.widths)-1] {
			s.stats["jump-beyond-top-level"]++
		}
	}
	s.advanceNow()
}

// advanceNow calls Advance at the clock's reading and checks what it fired.
func (s *sim) advanceNow() {
	s.advances++
	s.clockNs = s.elapsed()
	s.target = s.modelFloor(s.clockNs)
	s.lastDue = math.MinInt64
	s.fired = 0
	s.inAdvance = true
	levels := s.levels()
	n := s.h.Advance()
	s.inAdvance = false
	s.wheelNow = max(s.wheelNow, s.target)
	if s.levels() > len(s.widths)-1 || levels > len(s.widths)-1 {
		s.stats["overflow-levels"]++
	}
	if n != s.fired {
		s.fatalf("Advance returned %d, %d callbacks ran", n, s.fired)
	}
	for i, st := range s.timers {
		if st.armed && s.modelDue(st.when) <= s.target && st.flex != s.advances && !s.never(st.when) {
			s.fatalf("timer %d due at tick %d not fired by Advance at tick %d", i, s.modelDue(st.when), s.target)
		}
	}
}

// levels returns the most levels any shard has.
func (s *sim) levels() int {
	n := 0
	for _, sh := range s.h.shards {
		n = max(n, len(sh.levels))
	}
	return n
}

func (s *sim) step() {
	op := s.src.intn(20)
	if op < 6 && s.live > maxLive {
		op = 6 // keep the number of live timers (and the cost of verify) bounded
	}
	switch {
	case op < 6:
		s.arm(s.randDeadline())
	case op < 8:
		if st := s.pick(); st != nil {
			if got := st.t.Stop(); got != st.live() {
				s.fatalf("Stop = %v, model armed = %v", got, st.live())
			}
			if st.hop {
				s.stats["exec-stopped-before-run"]++
			}
			st.armed = false
			st.cancel()
		}
	case op < 9:
		s.runSome()
	case op < 10:
		st := s.pick()
		if st == nil {
			break
		}
		p := s.randPeriod()
		if got := st.t.ResetEvery(time.Duration(p)); got != st.live() {
			s.fatalf("ResetEvery = %v, model armed = %v", got, st.live())
		}
		st.cancel()
		st.armed, st.period = true, p
		_, st.when = s.relative(satAdd(s.elapsed(), p))
	case op < 13:
		st := s.pick()
		if st == nil {
			break
		}
		w := s.randDeadline()
		if st.armed && s.src.intn(2) == 0 {
			w = satAdd(st.when, s.src.intn(2*s.widths[1]*s.tick)) // later: the lazy path
		}
		if st.armed {
			if w >= st.when && st.t.home().inWheel(st.t.filed) {
				s.stats["lazy-reset"]++
			}
			if s.modelDue(clampNs(w)) == s.modelDue(st.when) {
				s.stats["same-slot-rearm"]++
			}
		}
		var got bool
		if s.src.intn(2) == 0 {
			got = st.t.ResetAt(s.h.origin.Add(time.Duration(w)))
			w = clampNs(w)
		} else {
			var d time.Duration
			d, w = s.relative(w)
			got = st.t.Reset(d)
		}
		if got != st.live() {
			s.fatalf("Reset = %v, model armed = %v", got, st.live())
		}
		if st.hop {
			s.stats["exec-rearmed-before-run"]++
		}
		st.cancel()
		st.armed, st.when, st.period = true, w, 0
	default:
		s.advance()
	}
	// Drop some timers that can no longer change, to keep the table small.
	if len(s.timers) > 2*maxLive {
		s.timers = slices.DeleteFunc(s.timers, func(st *simTimer) bool { return !st.live() })
	}
	s.verify()
}

// verify compares the hierarchy's observable state with the model's.
func (s *sim) verify() {
	s.tb.Helper()
	if err := s.h.check(); err != nil {
		s.fatalf("invariant: %v", err)
	}
	armed, firable, minDue := s.armed()
	for range 4 { // Deadline, of a sample: it is plain bookkeeping
		if st := s.pick(); st != nil {
			if got, want := st.t.Deadline(), s.h.origin.Add(time.Duration(st.when)); !got.Equal(want) {
				s.fatalf("Deadline = %v, want %v", got, want)
			}
		}
	}
	s.live = armed
	if got := s.h.Len(); got != armed {
		s.fatalf("Len = %d, model has %d armed", got, armed)
	}
	next, ok := s.h.Next()
	if ok != (firable > 0) {
		s.fatalf("Next ok = %v with %d armed, %d of them able to fire", ok, armed, firable)
	}
	if !ok {
		return
	}
	// Next may be early (a cascade, a timer moved later), never late; and
	// not before the tick the wheels are at (the latest an Advance reached)
	// unless a timer is due by it.
	if due := s.h.tickTime(minDue); next.After(due) {
		s.fatalf("Next = %v, after the earliest due time %v", next, due)
	}
	if next.Before(s.h.tickTime(s.wheelNow)) && minDue > s.wheelNow {
		s.fatalf("Next = %v, before the wheels' tick %d with nothing due by it", next, s.wheelNow)
	}
}

// armed counts the model's armed timers, those of them that can fire, and
// returns the earliest tick one of those is due at.
func (s *sim) armed() (armed, firable int, minDue int64) {
	minDue = math.MaxInt64
	for _, st := range s.timers {
		if st.hop {
			armed++ // armed until its run starts, though in no wheel
		}
		if st.armed {
			armed++
			if !s.never(st.when) {
				firable++
				minDue = min(minDue, s.modelDue(st.when))
			}
		}
	}
	return armed, firable, minDue
}

// walkByNext drives the hierarchy as a loop of the caller's own would, for
// up to firings Advances that fire: the clock to each Next, an Advance
// there. Next reaches the earliest due tick in at most levels+1 answers (a
// cascade per level above 0, a late list's bound, the tick itself), plus
// one for each timer moved later in place, whose old slot is an event too.
// The levels are those the wheels have at each answer: a timer moved later
// past the wheels' span adds one when its old tick files it again.
func (s *sim) walkByNext(firings int) {
	s.tb.Helper()
	for range firings {
		next, ok := s.h.Next()
		if !ok {
			return
		}
		_, _, minDue := s.armed()
		moved := 0
		for _, st := range s.timers {
			if st.armed && !s.never(st.when) && atomic.LoadInt64(&st.t.filed) < s.modelDue(st.when) {
				moved++
			}
		}
		for answers := 1; ; answers++ {
			if answers > s.levels()+1+moved {
				s.fatalf("walk by Next: %d answers and not at the earliest due tick %d (levels %d, %d timers moved later)", answers, minDue, s.levels(), moved)
			}
			if next.After(s.clk.now) {
				s.clk.now = next
			}
			s.advanceNow()
			s.verify()
			if s.fired > 0 || !next.Before(s.h.tickTime(minDue)) {
				break
			}
			if next, ok = s.h.Next(); !ok {
				s.fatalf("walk by Next: Next false with a timer due at tick %d", minDue)
			}
		}
	}
}

func (s *sim) run() {
	for !s.src.done() {
		s.ops++
		s.progress.Store(int64(s.ops))
		s.step()
	}
	// The periodic timers stop, so that the walk reaches the others.
	for _, st := range s.timers {
		if st.armed && st.period > 0 {
			if !st.t.Stop() {
				s.fatalf("Stop of an armed periodic timer = false")
			}
			st.armed = false
			st.cancel()
		}
	}
	s.walkByNext(2 * maxLive)
}

// watchedRun runs the script on a goroutine of its own and fails the test,
// saying at which operation, if an operation (an Advance, a Reset, Next...)
// does not return within 20s.
func (s *sim) watchedRun(t *testing.T) {
	t.Helper()
	mustProgress(t, 20*time.Second, "the script "+s.desc, &s.progress, s.run)
}

// simOps is the number of seeds per layout and of operations per (layout,
// seed) run. The default run keeps the scripts' length, so they reach as
// deep, and runs fewer seeds; TIMINGWHEEL_LONG=1 runs all 15 (5 times as
// many: minutes under the race detector on 2 cores).
func simOps() (seeds, ops int) {
	if testing.Short() {
		return 4, 3000
	}
	return volume(3, 15), 6000
}

// TestSimulation runs seeded random scripts on every layout. With
// TIMINGWHEEL_LONG=1 it checks 10 layouts x 15 seeds x 6000 operations
// (9 x 10^5); by default 3 seeds a layout.
func TestSimulation(t *testing.T) {
	seeds, ops := simOps()
	total := 0
	for _, l := range simLayouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			for seed := range uint64(seeds) {
				desc := fmt.Sprintf("layout=%s seed=%d", l.name, seed)
				src := &rngSource{r: rand.New(rand.NewPCG(seed, 0x7469_6d69_6e67)), left: ops}
				s := newSim(t, l, desc, src)
				s.watchedRun(t)
			}
		})
		total += seeds * ops
	}
	t.Logf("simulated %d operations", total)
}

// recordingSource draws from a PCG and records its choices in the encoding
// byteSource reads, so that a seeded script can be replayed by the fuzzer.
type recordingSource struct {
	rngSource
	bytes []byte
}

func (s *recordingSource) intn(n int64) int64 {
	v := s.rngSource.intn(n)
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], uint64(v))
	s.bytes = append(s.bytes, buf[:encodedSize(n)]...)
	return v
}

// corpusWanted lists the situations the committed seed corpus must reach.
var corpusWanted = []string{
	"fired-at-level-1-boundary", "fired-at-level-2-boundary", "fired-at-level-3-boundary",
	"overflow-levels", "same-slot-rearm", "lazy-reset", "clock-backwards", "jump-beyond-top-level",
	"by-value", "cascade-interrupted",
	"periodic-run", "periodic-skipped-runs", "periodic-stopped-by-own-callback",
	"exec-run", "exec-run-twice", "exec-stopped-before-run", "exec-rearmed-before-run",
}

// TestWriteFuzzCorpus regenerates testdata/fuzz/FuzzSimulation: for each
// layout, recorded scripts from the seeds that reach the most of
// corpusWanted. It runs only when TIMINGWHEEL_WRITE_CORPUS is set.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("TIMINGWHEEL_WRITE_CORPUS") == "" {
		t.Skip("set TIMINGWHEEL_WRITE_CORPUS=1 to regenerate the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzSimulation")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	covered := map[string]bool{}
	for li, l := range simLayouts {
		for _, ops := range []int{60, 400} {
			bestSeed, bestScore := uint64(0), -1
			var best []byte
			for seed := range uint64(200) {
				src := &recordingSource{rngSource: rngSource{r: rand.New(rand.NewPCG(seed, 99)), left: ops}}
				s := newSim(t, l, "corpus", src)
				s.run()
				score := 0
				for _, k := range corpusWanted {
					if s.stats[k] > 0 {
						score++
						if !covered[k] {
							score += 10 // prefer what no file covers yet
						}
					}
				}
				if score > bestScore {
					bestSeed, bestScore, best = seed, score, slices.Clone(src.bytes)
				}
			}
			s := newSim(t, l, "corpus", &byteSource{b: best})
			s.run()
			var reached []string
			for _, k := range corpusWanted {
				if s.stats[k] > 0 {
					covered[k] = true
					reached = append(reached, k)
				}
			}
			name := fmt.Sprintf("%s-%dops-seed%d", l.name, ops, bestSeed)
			body := fmt.Sprintf("go test fuzz v1\nbyte(%q)\n[]byte(%q)\n", byte(li), best)
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
			t.Logf("%s: %v", name, reached)
		}
	}
	for _, k := range corpusWanted {
		assert.True(t, covered[k], "no corpus file reaches %s", k)
	}
}

// randomScript returns n bytes from a PCG seeded with seed and stream: a
// seed script for a fuzzer's corpus.
func randomScript(n int, seed, stream uint64) []byte {
	script := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, stream))
	for j := range script {
		script[j] = byte(r.Uint32())
	}
	return script
}

// fuzzLayout is the layout a fuzzer's layout byte picks.
func fuzzLayout(i uint8) layout { return simLayouts[int(i)%len(simLayouts)] }

// FuzzSimulation decodes an operation script (and its layout) from the
// fuzzer's bytes and checks it against the model, like TestSimulation.
func FuzzSimulation(f *testing.F) {
	for i := range simLayouts {
		f.Add(uint8(i), []byte{})
		f.Add(uint8(i), randomScript(512, uint64(i), 1))
	}
	f.Fuzz(func(t *testing.T, layoutIndex uint8, script []byte) {
		l := fuzzLayout(layoutIndex)
		desc := fmt.Sprintf("layout=%s script=%x", l.name, script)
		s := newSim(t, l, desc, &byteSource{b: script})
		s.watchedRun(t)
	})
}
