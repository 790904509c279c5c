package timingwheel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
)

// The periodic model checks periodic timers (docs/guarantees.md,
// "Periodic timers") against a naive
// ticker: each timer's instants A+k·p are stepped through one at a time,
// and at an Advance of tick T a timer runs once if its next instant is due
// by T, its next run then being the first instant whose due tick is after
// T. The schedules are random: the clock (a clock.Mock) moves by less than
// a tick, to a tick exactly, to a little after it (a driver that wakes
// late), by several ticks, by jumps across coarse levels, and backwards;
// timers are stopped and re-armed (Stop, Reset, ResetAt, ResetEvery) from
// outside and from inside the callbacks. Every firing is checked: the run
// is the instant the ticker expects (never early, never one skipped that
// was not due), in order of due ticks, at most one per Advance; after each
// Advance, every timer due has run; Advance's count, Len, Next and every
// Deadline match. The script's choices come from a seeded PCG in
// TestPeriodicModel and from the fuzzer's bytes in FuzzPeriodicModel, with
// the layouts, sources and reference rounding of simulation_test.go.
//
// The Mock sleeps a millisecond of real time on every move (to let other
// goroutines run); the model runs in a synctest bubble, where that sleep
// is on the bubble's clock and costs nothing.

// pmTimer is the model's view of one timer.
type pmTimer struct {
	t      *Timer
	armed  bool
	period int64 // ns; 0: one-shot
	start  int64 // periodic: A, the clock when it was armed (ns since the origin)
	k      int64 // periodic: the next run is instant start+k·period
	when   int64 // the next run's instant, or the one-shot deadline: what Deadline returns
	// flex is the number of the Advance during which a callback armed the
	// timer for a tick already reached: it may fire in that Advance or the
	// next (docs/guarantees.md, "Callbacks may call back").
	flex int
}

type pmodel struct {
	tb     testing.TB
	desc   string
	src    source
	mock   *clock.Mock
	h      *Hierarchy
	ref    *sim // the reference rounding (modelDue, modelFloor): only its tick is set
	tick   int64
	widths []int64 // ticks per slot of each level, and the top level's span
	timers []*pmTimer
	ops    int
	stats  map[string]int
	// progress is ops, for the watchdog, which reads it from another
	// goroutine.
	progress *atomic.Int64

	// During an Advance.
	inAdvance bool
	advances  int
	target    int64 // the Advance's tick
	clockNs   int64 // its clock reading, ns since the origin
	lastDue   int64
	ran       int
	wheelNow  int64 // the latest tick an Advance reached before this one (see sim.wheelNow)
}

// pmMaxTimers bounds the timers of a script; beyond it, arming turns into
// re-arming.
const pmMaxTimers = 12

// pmMaxSteps bounds how many instants a move of the clock may cross for
// the timer of the shortest period, so that the naive ticker stays cheap.
const pmMaxSteps = 1000

func newPModel(tb testing.TB, l layout, desc string, src source, progress *atomic.Int64) *pmodel {
	mock := clock.NewMock()
	mock.Set(simStart) // off the tick of every layout
	h, widths := l.newHierarchy(tb, mock)
	return &pmodel{
		tb: tb, desc: desc, src: src, mock: mock, h: h,
		ref: &sim{tick: int64(l.tick)}, tick: int64(l.tick),
		stats: map[string]int{}, progress: progress, widths: widths,
	}
}

func (m *pmodel) fatalf(format string, args ...any) {
	m.tb.Helper()
	m.tb.Fatalf("%s op %d: %s", m.desc, m.ops, fmt.Sprintf(format, args...))
}

func (m *pmodel) due(w int64) int64    { return m.ref.modelDue(w) }
func (m *pmodel) elapsed() int64       { return int64(m.mock.Now().Sub(m.h.origin)) }
func (m *pmodel) at(w int64) time.Time { return m.h.origin.Add(time.Duration(w)) }

// randPeriod returns a period in ns: less than a tick, a tick exactly, a
// few ticks (on the tick or off it), or about a slot of a coarse level.
func (m *pmodel) randPeriod() int64 {
	switch m.src.intn(6) {
	case 0: // a tick or less, down to a sixteenth (the naive ticker steps each instant)
		low := max(1, m.tick/16)
		return low + m.src.intn(m.tick-low+1)
	case 1:
		return m.tick
	case 2:
		return (1 + m.src.intn(5)) * m.tick
	case 3:
		return (1+m.src.intn(5))*m.tick + 1 + m.src.intn(m.tick)
	}
	w := m.widths[m.src.intn(int64(len(m.widths)))]
	return mulSat(1+m.src.intn(min(2*w, 1<<40)), m.tick) + m.src.intn(m.tick)
}

// minPeriod returns the shortest period of the armed periodic timers.
func (m *pmodel) minPeriod() int64 {
	p := int64(math.MaxInt64)
	for _, pt := range m.timers {
		if pt.armed && pt.period > 0 {
			p = min(p, pt.period)
		}
	}
	return p
}

// pick returns a random timer of the script, or nil.
func (m *pmodel) pick() *pmTimer {
	if len(m.timers) == 0 {
		return nil
	}
	return m.timers[m.src.intn(int64(len(m.timers)))]
}

// everyFrom records that pt was armed periodic with period p by a call
// that read the clock at now.
// resetEvery calls ResetEvery on pt with a random period, checks what it
// returns against the model, and moves the model's pt to the new grid,
// from the clock now; call names the call in a failure.
func (m *pmodel) resetEvery(pt *pmTimer, call string) {
	m.tb.Helper()
	p := m.randPeriod()
	now := m.elapsed()
	if got := pt.t.ResetEvery(time.Duration(p)); got != pt.armed {
		m.fatalf("%s = %v, model armed = %v", call, got, pt.armed)
	}
	pt.everyFrom(now, p)
}

func (pt *pmTimer) everyFrom(now, p int64) {
	pt.armed, pt.period, pt.start, pt.k = true, p, now, 1
	pt.when = clampNs(satAdd(now, p))
}

// oneShot records that pt was armed once, for deadline w.
func (pt *pmTimer) oneShot(w int64) {
	pt.armed, pt.period, pt.when = true, 0, clampNs(w)
}

// callback is pt's f: the firing checked against the ticker, then a body
// that may call back into the hierarchy.
func (m *pmodel) callback(pt *pmTimer) func() {
	return func() {
		m.fire(pt)
		m.body(pt)
	}
}

// fire checks a run against the model and applies it.
func (m *pmodel) fire(pt *pmTimer) {
	if !m.inAdvance {
		m.fatalf("a callback ran outside Advance")
	}
	if !pt.armed {
		m.fatalf("a timer ran while not armed (stopped, or its run taken already)")
	}
	d := m.due(pt.when)
	if d > m.target {
		m.fatalf("early: a run of instant %d (due at tick %d) at the Advance of tick %d (clock %d)", pt.when, d, m.target, m.clockNs)
	}
	switch { // see sim.checkOrder
	case d > m.wheelNow && d < m.lastDue:
		m.fatalf("out of order: due tick %d after %d", d, m.lastDue)
	case d > m.wheelNow:
		m.lastDue = d
	case m.lastDue > m.wheelNow:
		m.fatalf("out of order: due tick %d, a tick already come when armed, after %d", d, m.lastDue)
	}
	m.ran++
	if pt.period == 0 {
		pt.armed = false
		m.stats["one-shot-run"]++
		return
	}
	m.stats["periodic-run"]++
	// The naive ticker: step instant by instant past those due by this
	// Advance's tick. Those are the runs skipped; the first not due is
	// the next run, also if it lies before the clock.
	for {
		pt.k++
		pt.when = clampNs(satAdd(pt.start, mulSat(pt.k, pt.period)))
		if pt.when == math.MaxInt64 || m.due(pt.when) > m.target {
			break
		}
		m.stats["skipped-run-that-was-due"]++
	}
	if pt.when <= m.clockNs {
		m.stats["next-run-before-the-clock"]++ // an instant before the clock whose tick has not come: not missed
	}
	if want := modelNextInstant(pt.start, pt.period, mulSat(m.target, m.tick)); pt.when != want && pt.when != math.MaxInt64 {
		m.fatalf("the model disagrees with itself: ticker %d, formula %d", pt.when, want)
	}
	if got := pt.t.Deadline(); !got.Equal(m.at(pt.when)) {
		m.fatalf("Deadline in a run = %v (%d), want the ticker's next instant %v (%d): period %d, Advance tick %d, clock %d",
			got, got.Sub(m.h.origin), m.at(pt.when), pt.when, pt.period, m.target, m.clockNs)
	}
}

// armedInCallback records pt's deadline set from a callback: if it is due
// by this Advance's tick, it may fire now or on the next Advance.
func (m *pmodel) armedInCallback(pt *pmTimer) {
	if m.due(pt.when) <= m.target {
		pt.flex = m.advances
		m.stats["armed-in-callback-for-a-reached-tick"]++
	}
}

// body is what a callback does after its run is checked.
func (m *pmodel) body(pt *pmTimer) {
	switch m.src.intn(16) {
	case 0: // stop itself: the next run is armed, so Stop finds it
		if got := pt.t.Stop(); got != pt.armed {
			m.fatalf("Stop in own callback = %v, model armed = %v", got, pt.armed)
		}
		if pt.period > 0 {
			m.stats["periodic-stopped-in-own-callback"]++
		}
		pt.armed = false
	case 1: // stop another
		if o := m.pick(); o != nil {
			if got := o.t.Stop(); got != o.armed {
				m.fatalf("Stop of another in a callback = %v, model armed = %v", got, o.armed)
			}
			o.armed = false
		}
	case 2: // Reset itself: one-shot from now on; maybe for a tick reached
		now := m.elapsed()
		d := m.src.intn(3*m.tick) - m.tick
		if got := pt.t.Reset(time.Duration(d)); got != pt.armed {
			m.fatalf("Reset in own callback = %v, model armed = %v", got, pt.armed)
		}
		pt.oneShot(satAdd(now, d))
		m.armedInCallback(pt)
	case 3: // ResetEvery itself: a new grid from the clock now
		m.resetEvery(pt, "ResetEvery in own callback")
		m.stats["reset-every-in-own-callback"]++
	case 4: // ResetEvery another
		if o := m.pick(); o != nil {
			m.resetEvery(o, "ResetEvery of another in a callback")
		}
	case 5: // ResetAt another, maybe for a tick reached
		if o := m.pick(); o != nil {
			w := satAdd(mulSat(m.target, m.tick), m.src.intn(4*m.tick)-2*m.tick)
			if got := o.t.ResetAt(m.at(w)); got != o.armed {
				m.fatalf("ResetAt of another in a callback = %v, model armed = %v", got, o.armed)
			}
			o.oneShot(w)
			m.armedInCallback(o)
		}
	case 6: // a new periodic timer
		if len(m.timers) < pmMaxTimers {
			m.armNew(true)
		}
	}
}

// armNew arms a new timer, periodic (by Every, or Init and ResetEvery)
// or one-shot.
func (m *pmodel) armNew(periodic bool) {
	pt := &pmTimer{}
	now := m.elapsed()
	if periodic {
		p := m.randPeriod()
		if m.src.intn(2) == 0 {
			pt.t = m.h.Every(time.Duration(p), m.callback(pt))
			m.stats["by-Every"]++
		} else {
			pt.t = new(Timer).Init(m.h, m.callback(pt))
			if pt.t.ResetEvery(time.Duration(p)) {
				m.fatalf("the first ResetEvery of an initialized timer returned true")
			}
			m.stats["by-ResetEvery"]++
		}
		pt.everyFrom(now, p)
	} else {
		d := m.src.intn(20*m.tick) - m.tick
		pt.t = m.h.AfterFunc(time.Duration(d), m.callback(pt))
		pt.oneShot(satAdd(now, d))
	}
	m.timers = append(m.timers, pt)
}

// move moves the clock for the next Advance, forward by no more than the
// naive ticker affords: pmMaxSteps instants of the shortest period.
func (m *pmodel) move() {
	now := m.mock.Now()
	defer func() {
		if limit := mulSat(pmMaxSteps, m.minPeriod()); m.mock.Now().Sub(now) > time.Duration(limit) {
			m.mock.Set(now.Add(time.Duration(limit)))
		}
	}()
	switch m.src.intn(10) {
	case 0, 1, 2: // to when Next says there is work, on the tick or a little late
		next, ok := m.h.Next()
		if !ok || !next.After(now) {
			m.mock.Add(time.Duration(1 + m.src.intn(m.tick)))
			return
		}
		var late int64
		switch m.src.intn(3) {
		case 1: // a driver waking late within the tick
			if m.tick > 1 {
				late = 1 + m.src.intn(m.tick-1)
				m.stats["late-within-the-tick"]++
			}
		case 2: // late by a tick or two
			late = m.tick + m.src.intn(2*m.tick)
		}
		m.mock.Set(next.Add(time.Duration(late)))
	case 3: // less than a tick
		m.mock.Add(time.Duration(1 + m.src.intn(m.tick)))
	case 4: // not at all
	case 5: // backwards
		back := 1 + m.src.intn(50*m.tick)
		if m.src.intn(4) == 0 {
			back = 1 + m.src.intn(mulSat(min(m.widths[len(m.widths)-1], 1<<40), m.tick))
		}
		m.mock.Set(now.Add(-time.Duration(back)))
		m.stats["clock-backwards"]++
	case 6, 7: // a few ticks, off the tick
		m.mock.Add(time.Duration(m.src.intn(20)*m.tick + m.src.intn(m.tick)))
	default: // a jump across coarse levels, as far as the naive ticker affords
		w := m.widths[1+m.src.intn(int64(len(m.widths)-1))]
		limit := min(mulSat(4*w, m.tick), int64(24*time.Hour*365))
		m.mock.Add(time.Duration(1 + m.src.intn(limit)))
		m.stats["jump"]++
	}
}

// advance runs one Advance and checks that it ran exactly the runs due.
func (m *pmodel) advance() {
	m.move()
	m.advanceNow()
}

// advanceNow calls Advance at the clock's reading and checks what it ran.
func (m *pmodel) advanceNow() {
	m.advances++
	m.clockNs = m.elapsed()
	m.target = m.ref.modelFloor(m.clockNs)
	m.lastDue = math.MinInt64
	m.ran = 0
	m.inAdvance = true
	n := m.h.Advance()
	m.inAdvance = false
	m.wheelNow = max(m.wheelNow, m.target)
	if n != m.ran {
		m.fatalf("Advance returned %d, %d callbacks ran", n, m.ran)
	}
	for i, pt := range m.timers {
		if pt.armed && m.due(pt.when) <= m.target && pt.flex != m.advances && pt.when != math.MaxInt64 {
			m.fatalf("timer %d (period %d) due at tick %d (instant %d) did not run at the Advance of tick %d (clock %d)",
				i, pt.period, m.due(pt.when), pt.when, m.target, m.clockNs)
		}
	}
}

func (m *pmodel) step() {
	switch op := m.src.intn(16); {
	case op < 2:
		if len(m.timers) < pmMaxTimers {
			m.armNew(op == 0 || m.src.intn(3) != 0)
			break
		}
		fallthrough
	case op < 4: // ResetEvery from outside
		if pt := m.pick(); pt != nil {
			m.resetEvery(pt, "ResetEvery")
		}
	case op < 5: // Stop from outside
		if pt := m.pick(); pt != nil {
			if got := pt.t.Stop(); got != pt.armed {
				m.fatalf("Stop = %v, model armed = %v", got, pt.armed)
			}
			pt.armed = false
		}
	case op < 6: // Reset or ResetAt from outside: one-shot
		if pt := m.pick(); pt != nil {
			now := m.elapsed()
			w := satAdd(now, m.src.intn(30*m.tick)-m.tick)
			var got bool
			if m.src.intn(2) == 0 {
				got = pt.t.Reset(time.Duration(w - now))
			} else {
				got = pt.t.ResetAt(m.at(w))
			}
			if got != pt.armed {
				m.fatalf("Reset = %v, model armed = %v", got, pt.armed)
			}
			pt.oneShot(w)
		}
	default:
		m.advance()
	}
	m.verify()
}

// verify compares Len, Next and every Deadline with the model, and checks
// the wheels' invariants.
func (m *pmodel) verify() {
	if err := m.h.check(); err != nil {
		m.fatalf("invariant: %v", err)
	}
	for i, pt := range m.timers {
		if got := pt.t.Deadline(); !got.Equal(m.at(pt.when)) {
			m.fatalf("timer %d: Deadline = %v, model %v", i, got, m.at(pt.when))
		}
	}
	armed, minDue := m.armed()
	if got := m.h.Len(); got != armed {
		m.fatalf("Len = %d, model has %d armed", got, armed)
	}
	// Next is false exactly when nothing armed can fire; it may be early (a
	// cascade, a timer moved later), never late; and not before the tick
	// the wheels are at (the latest an Advance reached) unless a timer is
	// due by it.
	next, ok := m.h.Next()
	if ok != (minDue != math.MaxInt64) || ok && next.After(m.h.tickTime(minDue)) {
		m.fatalf("Next = %v, %v; want no later than the tick of %d", next, ok, minDue)
	}
	if ok && next.Before(m.h.tickTime(m.wheelNow)) && minDue > m.wheelNow {
		m.fatalf("Next = %v, before the wheels' tick %d with nothing due by it", next, m.wheelNow)
	}
}

// armed counts the model's armed timers and returns the earliest tick one
// that can fire is due at (math.MaxInt64 if none can).
func (m *pmodel) armed() (armed int, minDue int64) {
	minDue = math.MaxInt64
	for _, pt := range m.timers {
		if pt.armed {
			armed++
			if pt.when != math.MaxInt64 && m.due(pt.when) <= m.h.lastTick {
				minDue = min(minDue, m.due(pt.when))
			}
		}
	}
	return armed, minDue
}

// walkByNext drives the hierarchy as a loop of the caller's own would, for
// firings Advances that run callbacks: the clock to each Next, an Advance
// there. Next reaches the earliest due tick in at most levels+1 answers,
// plus one for each timer moved later in place (see sim.walkByNext); the
// levels are those the wheels have at each answer (a timer moved later
// past the wheels' span adds one when its old tick files it again).
func (m *pmodel) walkByNext(firings int) {
	for range firings {
		next, ok := m.h.Next()
		if !ok {
			return
		}
		_, minDue := m.armed()
		moved, levels := 0, 0
		for _, pt := range m.timers {
			if pt.armed && pt.when != math.MaxInt64 && atomic.LoadInt64(&pt.t.filed) < m.due(pt.when) {
				moved++
			}
		}
		for answers := 1; ; answers++ {
			for _, sh := range m.h.shards {
				sh.lock()
				levels = max(levels, len(sh.levels))
				sh.mu.Unlock()
			}
			if answers > levels+1+moved {
				m.fatalf("walk by Next: %d answers and not at the earliest due tick %d (levels %d, %d timers moved later)", answers, minDue, levels, moved)
			}
			if next.After(m.mock.Now()) {
				m.mock.Set(next)
			}
			m.advanceNow()
			m.verify()
			if m.ran > 0 || !next.Before(m.h.tickTime(minDue)) {
				break
			}
			if next, ok = m.h.Next(); !ok {
				m.fatalf("walk by Next: Next false with a timer due at tick %d", minDue)
			}
		}
	}
}

func (m *pmodel) run() {
	for !m.src.done() {
		m.ops++
		m.progress.Store(int64(m.ops))
		m.step()
	}
	m.walkByNext(50)
}

// runPModel runs a script in a synctest bubble, under a watchdog that
// fails the test, naming the operation, if one does not return.
func runPModel(t *testing.T, l layout, desc string, src source) map[string]int {
	t.Helper()
	var progress atomic.Int64
	var stats map[string]int
	mustProgress(t, 20*time.Second, "the periodic script "+desc, &progress, func() {
		synctest.Test(t, func(t *testing.T) {
			m := newPModel(t, l, desc, src, &progress)
			m.run()
			stats = m.stats
		})
	})
	return stats
}

// TestPeriodicModel runs seeded scripts on every layout of the simulation.
// TIMINGWHEEL_LONG=1 runs five times the seeds (about 15s under the race
// detector on 2 cores; the default run takes about 3s).
func TestPeriodicModel(t *testing.T) {
	seeds, ops := volume(4, 20), 1500
	total := map[string]int{}
	for _, l := range simLayouts {
		for seed := range uint64(seeds) {
			desc := fmt.Sprintf("layout=%s seed=%d", l.name, seed)
			src := &rngSource{r: rand.New(rand.NewPCG(seed, 0x7065_7269_6f64)), left: ops}
			for k, v := range runPModel(t, l, desc, src) {
				total[k] += v
			}
		}
	}
	// The situations the scripts must reach, or the model checks little.
	for _, k := range []string{
		"periodic-run", "one-shot-run", "skipped-run-that-was-due", "next-run-before-the-clock",
		"late-within-the-tick", "clock-backwards", "jump", "by-Every", "by-ResetEvery",
		"periodic-stopped-in-own-callback", "reset-every-in-own-callback", "armed-in-callback-for-a-reached-tick",
	} {
		if total[k] == 0 {
			t.Errorf("no script reached %s", k)
		}
	}
	t.Logf("%d layouts x %d seeds x %d operations: %v", len(simLayouts), seeds, ops, total)
}

// FuzzPeriodicModel decodes a script (and its layout) from the fuzzer's
// bytes and checks it against the naive ticker, like TestPeriodicModel.
func FuzzPeriodicModel(f *testing.F) {
	for i := range simLayouts {
		f.Add(uint8(i), randomScript(1024, uint64(i), 2))
	}
	f.Fuzz(func(t *testing.T, layoutIndex uint8, script []byte) {
		l := fuzzLayout(layoutIndex)
		runPModel(t, l, fmt.Sprintf("layout=%s script of %d bytes", l.name, len(script)), &byteSource{b: script})
	})
}
