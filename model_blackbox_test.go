package timingwheel_test

// A second model of the wheel, independent of simulation_test.go: written
// against docs/guarantees.md alone, through the public API. It checks
// every Advance against a naive reference of its sections "Never early, at
// most one tick late", "Order" and "Exactly once" (exactly the timers with
// due(D) <= T, in order, exactly once), Next against the earliest due tick, and exactly-once
// under concurrent Reset, ResetAt and Stop from several goroutines, over
// random schedules that put the clock between ticks and arm deadlines
// already past.

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"net"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/timingwheel/timingwheel"
)

var (
	_ = errors.Is
	_ = io.EOF
	_ = net.Dial
	_ = os.ErrDeadlineExceeded
	_ = sort.Ints
	_ atomic.Int64
)

// rotateShard makes the next arming on this processor go to another shard:
// two garbage collections drop the processor's hint from the pool, and the
// next is dealt round robin.
func rotateShard() {
	runtime.GC()
	runtime.GC()
}

// ---------------------------------------------------------------------------
// Model-based test: random operations on a Mock-like clock, compared with a
// reference model of "Never early, at most one tick late", "Order",
// "Exactly once" (docs/guarantees.md) and the Len/Next/Stats contract.

type rvCfg struct {
	name     string
	tick     time.Duration
	levels   []int
	shards   int
	parallel bool
}

// newHierarchy makes the hierarchy cfg describes, on clk.
func (cfg rvCfg) newHierarchy(t *testing.T, clk clock.Clock) *timingwheel.Hierarchy {
	t.Helper()
	opts := []timingwheel.Option{timingwheel.WithClock(clk), timingwheel.WithTick(cfg.tick), timingwheel.WithShards(cfg.shards)}
	if cfg.levels != nil {
		opts = append(opts, timingwheel.WithLevels(cfg.levels...))
	}
	if cfg.parallel {
		opts = append(opts, timingwheel.WithParallelCallbacks())
	}
	h, err := timingwheel.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

type rvMT struct {
	t      *timingwheel.Timer
	val    *timingwheel.Timer // non-nil for a by-value timer (t == val)
	armed  bool
	inited bool // by-value: Init called
	dl     time.Time
	fires  int
}

func rvCeilDiv(ns, tick int64) int64 {
	q := ns / tick
	if ns%tick > 0 {
		q++
	}
	return q
}

// rvDue returns due(D) of docs/guarantees.md: D rounded up to a tick after origin.
func rvDue(origin time.Time, tick int64) func(time.Time) int64 {
	return func(dl time.Time) int64 { return rvCeilDiv(int64(dl.Sub(origin)), tick) }
}

// rvArmedEarliest returns how many of the model's timers are armed and the
// earliest due tick among them (has is false if none); state says whether
// a timer is armed and with which deadline.
func rvArmedEarliest[T any](timers []T, due func(time.Time) int64, state func(T) (bool, time.Time)) (armed int, minDue int64, has bool) {
	for _, m := range timers {
		if on, dl := state(m); on {
			armed++
			if d := due(dl); !has || d < minDue {
				minDue, has = d, true
			}
		}
	}
	return armed, minDue, has
}

func rvFloorDiv(ns, tick int64) int64 {
	q := ns / tick
	if ns%tick < 0 {
		q--
	}
	return q
}

func rvModelRun(t *testing.T, cfg rvCfg, seed int64, steps int) {
	rng := rand.New(rand.NewSource(seed))
	clk := timingwheel.NewFakeClock()
	h := cfg.newHierarchy(t, clk)
	origin := clk.Now()
	tick := int64(cfg.tick)
	span := int64(cfg.tick)
	for _, n := range cfg.levels {
		if span < math.MaxInt64/int64(n) {
			span *= int64(n)
		}
	}
	if cfg.levels == nil {
		span = int64(24*time.Hour/time.Millisecond) * tick
	}
	due := rvDue(origin, tick)

	var timers []*rvMT
	var firedMu sync.Mutex
	var wheelNow int64 // the latest tick an Advance reached before this one
	var fired []int
	var started, stopped, firedN uint64

	randD := func() time.Duration {
		switch rng.Intn(10) {
		case 0:
			return -time.Duration(rng.Int63n(5 * int64(span)))
		case 1:
			return 0
		case 2, 3:
			return time.Duration(rng.Int63n(5 * tick))
		case 4, 5:
			return time.Duration(rng.Int63n(span/8 + 1))
		case 6, 7:
			return time.Duration(rng.Int63n(3 * span))
		case 8:
			return time.Duration(rng.Int63n(50 * span))
		default:
			return time.Duration(rng.Int63n(int64(100 * 365 * 24 * time.Hour)))
		}
	}
	mkcb := func(id int) func() {
		return func() {
			firedMu.Lock()
			fired = append(fired, id)
			firedMu.Unlock()
		}
	}
	pick := func() *rvMT {
		if len(timers) == 0 {
			return nil
		}
		return timers[rng.Intn(len(timers))]
	}
	for step := 0; step < steps; step++ {
		if rng.Intn(6) == 0 {
			rotateShard()
		}
		switch op := rng.Intn(100); {
		case op < 20: // AfterFunc
			d := randD()
			id := len(timers)
			now := clk.Now()
			tm := h.AfterFunc(d, mkcb(id))
			timers = append(timers, &rvMT{t: tm, armed: true, dl: now.Add(d)})
			started++
		case op < 28: // AtFunc
			dl := clk.Now().Add(randD())
			id := len(timers)
			tm := h.AtFunc(dl, mkcb(id))
			timers = append(timers, &rvMT{t: tm, armed: true, dl: dl})
			started++
		case op < 34: // by-value timer
			id := len(timers)
			v := new(timingwheel.Timer)
			v.Init(h, mkcb(id))
			m := &rvMT{t: v, val: v, inited: true}
			timers = append(timers, m)
			if !v.Deadline().IsZero() {
				t.Fatalf("seed %d step %d: Deadline of a fresh Init'ed timer = %v, want zero", seed, step, v.Deadline())
			}
		case op < 46: // Stop
			m := pick()
			if m == nil {
				continue
			}
			got := m.t.Stop()
			if got != m.armed {
				t.Fatalf("seed %d step %d: Stop = %v, model armed = %v", seed, step, got, m.armed)
			}
			if got {
				stopped++
			}
			m.armed = false
		case op < 62: // Reset
			m := pick()
			if m == nil {
				continue
			}
			d := randD()
			now := clk.Now()
			got := m.t.Reset(d)
			if got != m.armed {
				t.Fatalf("seed %d step %d: Reset = %v, model armed = %v", seed, step, got, m.armed)
			}
			if !m.armed {
				started++
			}
			m.armed, m.dl = true, now.Add(d)
		case op < 68: // ResetAt
			m := pick()
			if m == nil {
				continue
			}
			dl := clk.Now().Add(randD())
			got := m.t.ResetAt(dl)
			if got != m.armed {
				t.Fatalf("seed %d step %d: ResetAt = %v, model armed = %v", seed, step, got, m.armed)
			}
			if !m.armed {
				started++
			}
			m.armed, m.dl = true, dl
		case op < 70: // re-Init an unarmed by-value timer
			m := pick()
			if m == nil || m.val == nil || m.armed {
				continue
			}
			id := -1
			for i, x := range timers {
				if x == m {
					id = i
				}
			}
			m.val.Init(h, mkcb(id))
			m.dl = time.Time{} // re-initialized: never armed since
		case op < 85: // move the clock
			switch rng.Intn(10) {
			case 0:
				clk.Add(-time.Duration(rng.Int63n(2 * span))) // backwards
			case 1:
				clk.Add(time.Duration(rng.Int63n(40 * span)))
			case 2:
				if clk.Now().Sub(origin) < 100*365*24*time.Hour {
					clk.Add(time.Duration(rng.Int63n(int64(50 * 365 * 24 * time.Hour))))
				}
			default:
				clk.Add(time.Duration(rng.Int63n(span/4 + 1)))
			}
		default: // Advance
			now := clk.Now()
			T := rvFloorDiv(int64(now.Sub(origin)), tick)
			firedMu.Lock()
			fired = fired[:0]
			firedMu.Unlock()
			n := h.Advance()
			firedMu.Lock()
			got := append([]int(nil), fired...)
			firedMu.Unlock()
			if n != len(got) {
				t.Fatalf("seed %d step %d: Advance returned %d, %d callbacks ran", seed, step, n, len(got))
			}
			var want []int
			for i, m := range timers {
				if m.armed && due(m.dl) <= T {
					want = append(want, i)
				}
			}
			gotSet := map[int]int{}
			for _, id := range got {
				gotSet[id]++
			}
			for _, id := range got {
				m := timers[id]
				if gotSet[id] > 1 {
					t.Fatalf("seed %d step %d: timer %d fired %d times in one Advance", seed, step, id, gotSet[id])
				}
				if !m.armed {
					t.Fatalf("seed %d step %d: timer %d fired but was not armed (stopped or fired before)", seed, step, id)
				}
				if due(m.dl) > T {
					t.Fatalf("seed %d step %d: timer %d fired early: due tick %d, clock tick %d (deadline %v, now %v)", seed, step, id, due(m.dl), T, m.dl.Sub(origin), now.Sub(origin))
				}
			}
			if len(got) != len(want) {
				var missing []string
				for _, id := range want {
					if gotSet[id] == 0 {
						missing = append(missing, fmt.Sprintf("%d(due %d)", id, due(timers[id].dl)))
					}
				}
				t.Fatalf("seed %d step %d: Advance at tick %d ran %d callbacks, want %d; missing %v", seed, step, T, len(got), len(want), missing)
			}
			prevNow := wheelNow
			wheelNow = max(wheelNow, T)
			if !cfg.parallel {
				// Due after the latest tick an Advance reached before: in
				// order of due ticks. Due by it (armed for a tick already
				// come): in the order armed, ahead of those.
				last := int64(math.MinInt64)
				for i := 0; i < len(got); i++ {
					d := due(timers[got[i]].dl)
					switch {
					case d > prevNow && d < last:
						t.Fatalf("seed %d step %d: order: timer %d (due %d) ran after a timer due %d", seed, step, got[i], d, last)
					case d > prevNow:
						last = d
					case last > prevNow:
						t.Fatalf("seed %d step %d: order: timer %d (due %d, a tick already come) ran after a timer due %d", seed, step, got[i], d, last)
					}
				}
			}
			for _, id := range got {
				timers[id].armed = false
				timers[id].fires++
				firedN++
			}
		}
		// Invariants after every step.
		armed, minDue, has := rvArmedEarliest(timers, due, func(m *rvMT) (bool, time.Time) { return m.armed, m.dl })
		if l := h.Len(); l != armed {
			t.Fatalf("seed %d step %d: Len = %d, model %d", seed, step, l, armed)
		}
		nt, ok := h.Next()
		if ok != has {
			t.Fatalf("seed %d step %d: Next ok = %v, model has armed = %v", seed, step, ok, has)
		}
		// Next may be early (a cascade, a timer moved later), never late;
		// and not before the tick the wheels are at (the latest an Advance
		// reached) unless a timer is due by it.
		if ok {
			if want := origin.Add(time.Duration(minDue * tick)); nt.After(want) {
				t.Fatalf("seed %d step %d: Next = origin%+v, after origin%+v (earliest due tick %d, %d armed)", seed, step, nt.Sub(origin), want.Sub(origin), minDue, armed)
			}
			if nt.Before(origin.Add(time.Duration(wheelNow*tick))) && minDue > wheelNow {
				t.Fatalf("seed %d step %d: Next = origin%+v, before the wheels' tick %d with nothing due by it (earliest due tick %d)", seed, step, nt.Sub(origin), wheelNow, minDue)
			}
		}
		st := h.Stats()
		if st.Armed != armed || st.Started != started || st.Stopped != stopped || st.Fired != firedN {
			t.Fatalf("seed %d step %d: Stats = {Armed %d Started %d Stopped %d Fired %d}, model {%d %d %d %d}", seed, step, st.Armed, st.Started, st.Stopped, st.Fired, armed, started, stopped, firedN)
		}
		for i, m := range timers {
			if m.armed || m.fires > 0 || !m.dl.IsZero() {
				if !m.dl.IsZero() && !m.t.Deadline().Equal(m.dl) {
					t.Fatalf("seed %d step %d: timer %d Deadline = %v, want %v", seed, step, i, m.t.Deadline(), m.dl)
				}
			}
		}
	}
}

func TestBlackbox_Model(t *testing.T) {
	cfgs := []rvCfg{
		{name: "default-1shard", tick: time.Millisecond, shards: 1},
		{name: "default-3shards", tick: time.Millisecond, shards: 3},
		{name: "tiny-2x2", tick: time.Millisecond, levels: []int{2, 2}, shards: 2},
		{name: "tiny-3-5-2", tick: 7 * time.Nanosecond, levels: []int{3, 5, 2}, shards: 3},
		{name: "odd-7-3", tick: time.Microsecond, levels: []int{7, 3}, shards: 4},
		{name: "one-level-2", tick: time.Second, levels: []int{2}, shards: 2},
		{name: "parallel-3", tick: time.Millisecond, levels: []int{4, 3}, shards: 3, parallel: true},
	}
	for _, cfg := range cfgs {
		t.Run(cfg.name, func(t *testing.T) {
			timingwheel.MustReturn(t, 60*time.Second, "model run "+cfg.name, func() {
				seeds := int64(1) // each configuration's first seed; all 4 with TIMINGWHEEL_LONG=1
				if timingwheel.Long() {
					seeds = 4
				}
				for seed := int64(1); seed <= seeds; seed++ {
					rvModelRun(t, cfg, seed, 1500)
				}
			})
		})
	}
}

// ---------------------------------------------------------------------------
// Model with callbacks that call back (docs/guarantees.md, "Callbacks may
// call back"): each callback stops,
// re-arms or arms timers, its own included, and checks Len and Next from
// inside the Advance. Ordered mode only (the model is updated on the
// advancing goroutine).

func rvCallbackModelRun(t *testing.T, cfg rvCfg, seed int64, steps int) {
	rng := rand.New(rand.NewSource(seed))
	crng := rand.New(rand.NewSource(seed * 7919))
	clk := timingwheel.NewFakeClock()
	h := cfg.newHierarchy(t, clk) // the configurations of this model have no parallel callbacks
	origin := clk.Now()
	tick := int64(cfg.tick)
	span := int64(cfg.tick)
	for _, n := range cfg.levels {
		span *= int64(n)
	}
	if cfg.levels == nil {
		span = int64(24*time.Hour/time.Millisecond) * tick
	}
	due := rvDue(origin, tick)

	type mt struct {
		t      *timingwheel.Timer
		armed  bool
		during bool // armed by a callback of the running Advance
		dl     time.Time
	}
	var timers []*mt
	var started, stopped, firedN uint64
	var inAdvance bool
	var T int64
	var lastDue int64
	var wheelNow int64 // the latest tick an Advance reached before this one
	var ran int
	var failure string
	fail := func(format string, a ...any) {
		if failure == "" {
			failure = fmt.Sprintf("seed %d: ", seed) + fmt.Sprintf(format, a...)
		}
	}
	randD := func(r *rand.Rand) time.Duration {
		switch r.Intn(8) {
		case 0:
			return -time.Duration(r.Int63n(3 * span))
		case 1:
			return 0
		case 2, 3:
			return time.Duration(r.Int63n(4 * tick))
		case 4, 5:
			return time.Duration(r.Int63n(span/4 + 1))
		default:
			return time.Duration(r.Int63n(3 * span))
		}
	}
	var mkcb func(id int) func()
	arm := func(d time.Duration, r *rand.Rand) {
		id := len(timers)
		m := &mt{armed: true, during: inAdvance, dl: clk.Now().Add(d)}
		timers = append(timers, m)
		if r.Intn(2) == 0 {
			m.t = h.AfterFunc(d, mkcb(id))
		} else {
			m.t = h.AtFunc(m.dl, mkcb(id))
		}
		started++
	}
	checkCounts := func(where string) {
		armed, minDue, has := rvArmedEarliest(timers, due, func(m *mt) (bool, time.Time) { return m.armed, m.dl })
		if l := h.Len(); l != armed {
			fail("%s: Len = %d, model %d", where, l, armed)
		}
		nt, ok := h.Next()
		// As in rvModelRun; but from a callback the ticks of the running
		// Advance count as come: the timers collected for the tick being
		// fired count as due at it (for a timer due by then, Next is no
		// later than that), and a timer a callback armed for one of them
		// is due by it (Next may then be a late list's bound, long past).
		wheels, latest := wheelNow, minDue
		if inAdvance {
			wheels = max(wheelNow, T)
			latest = max(minDue, wheels)
		}
		switch {
		case ok != has:
			fail("%s: Next ok = %v, model %v", where, ok, has)
		case ok && nt.After(origin.Add(time.Duration(latest*tick))):
			fail("%s: Next = tick %d, after tick %d (the earliest due tick %d)", where, int64(nt.Sub(origin))/tick, latest, minDue)
		case ok && nt.Before(origin.Add(time.Duration(wheelNow*tick))) && minDue > wheels:
			fail("%s: Next = tick %d, before the wheels' tick %d with nothing due by tick %d (earliest due tick %d)", where, int64(nt.Sub(origin))/tick, wheelNow, wheels, minDue)
		}
		st := h.Stats()
		if st.Armed != armed || st.Started != started || st.Stopped != stopped || st.Fired != firedN {
			fail("%s: Stats = {Armed %d Started %d Stopped %d Fired %d}, model {%d %d %d %d}", where, st.Armed, st.Started, st.Stopped, st.Fired, armed, started, stopped, firedN)
		}
	}
	mkcb = func(id int) func() {
		return func() {
			m := timers[id]
			if !inAdvance {
				fail("timer %d fired outside Advance", id)
			}
			if !m.armed {
				fail("timer %d fired but the model has it unarmed (stopped/re-armed/fired)", id)
			}
			d := due(m.dl)
			if d > T {
				fail("timer %d fired early: due %d > clock tick %d", id, d, T)
			}
			switch { // due by wheelNow: armed for a tick already come
			case d > wheelNow && d < lastDue:
				fail("order: timer %d (due %d) ran after a timer due %d", id, d, lastDue)
			case d > wheelNow:
				lastDue = d
			case lastDue > wheelNow:
				fail("order: timer %d (due %d, a tick already come) ran after a timer due %d", id, d, lastDue)
			}
			m.armed = false
			firedN++
			ran++
			checkCounts(fmt.Sprintf("in callback of timer %d", id))
			for k := crng.Intn(3); k > 0; k-- {
				x := timers[crng.Intn(len(timers))]
				if crng.Intn(4) == 0 {
					x = m // itself
				}
				switch crng.Intn(4) {
				case 0:
					got := x.t.Stop()
					if got != x.armed {
						fail("Stop in callback = %v, model armed %v", got, x.armed)
					}
					if got {
						stopped++
					}
					x.armed = false
				case 1, 2:
					d := randD(crng)
					now := clk.Now()
					got := x.t.Reset(d)
					if got != x.armed {
						fail("Reset in callback = %v, model armed %v", got, x.armed)
					}
					if !got {
						started++
					}
					x.armed, x.during, x.dl = true, true, now.Add(d)
				case 3:
					if len(timers) < 3000 {
						arm(randD(crng), crng)
					}
				}
			}
		}
	}
	for step := 0; step < steps && failure == ""; step++ {
		if rng.Intn(6) == 0 {
			rotateShard()
		}
		switch op := rng.Intn(100); {
		case op < 30:
			arm(randD(rng), rng)
		case op < 40:
			if len(timers) > 0 {
				x := timers[rng.Intn(len(timers))]
				got := x.t.Stop()
				if got != x.armed {
					fail("step %d: Stop = %v, model %v", step, got, x.armed)
				}
				if got {
					stopped++
				}
				x.armed = false
			}
		case op < 55:
			if len(timers) > 0 {
				x := timers[rng.Intn(len(timers))]
				d := randD(rng)
				now := clk.Now()
				got := x.t.Reset(d)
				if got != x.armed {
					fail("step %d: Reset = %v, model %v", step, got, x.armed)
				}
				if !got {
					started++
				}
				x.armed, x.dl = true, now.Add(d)
			}
		case op < 75:
			if rng.Intn(8) == 0 {
				clk.Add(-time.Duration(rng.Int63n(span)))
			} else {
				clk.Add(time.Duration(rng.Int63n(span/3 + 1)))
			}
		default:
			T = rvFloorDiv(int64(clk.Now().Sub(origin)), tick)
			for _, m := range timers {
				m.during = false
			}
			inAdvance, lastDue, ran = true, math.MinInt64, 0
			n := h.Advance()
			inAdvance = false
			wheelNow = max(wheelNow, T)
			if n != ran {
				fail("step %d: Advance returned %d, %d callbacks ran", step, n, ran)
			}
			for i, m := range timers {
				if m.armed && !m.during && due(m.dl) <= T {
					fail("step %d: timer %d due at tick %d not fired by Advance at tick %d", step, i, due(m.dl), T)
				}
			}
		}
		checkCounts(fmt.Sprintf("after step %d", step))
	}
	if failure != "" {
		t.Fatal(failure)
	}
	t.Logf("seed %d: %d timers, %d fired, %d stopped", seed, len(timers), firedN, stopped)
}

func TestBlackbox_CallbackModel(t *testing.T) {
	cfgs := []rvCfg{
		{name: "default-1shard", tick: time.Millisecond, shards: 1},
		{name: "default-3shards", tick: time.Millisecond, shards: 3},
		{name: "tiny-2x2-2shards", tick: time.Millisecond, levels: []int{2, 2}, shards: 2},
		{name: "tiny-3-5-4shards", tick: 3 * time.Nanosecond, levels: []int{3, 5}, shards: 4},
	}
	for _, cfg := range cfgs {
		t.Run(cfg.name, func(t *testing.T) {
			timingwheel.MustReturn(t, 60*time.Second, "callback model "+cfg.name, func() {
				seeds := int64(2) // all 5 with TIMINGWHEEL_LONG=1
				if timingwheel.Long() {
					seeds = 5
				}
				for seed := int64(1); seed <= seeds; seed++ {
					rvCallbackModelRun(t, cfg, seed, 1200)
				}
			})
		})
	}
}

// ---------------------------------------------------------------------------
// Exactly once and never early under concurrent Reset/Stop/Advance, across
// shards, with timers from AfterFunc and held by value.

type rvCT struct {
	mu      sync.Mutex
	t       *timingwheel.Timer
	armed   bool
	dl      time.Time
	claimed []time.Time // deadlines of armings whose callback started before the model learnt it
	armings int
	cancels int
	fires   int
	bad     string
}

func rvConcurrentRun(t *testing.T, shards int, parallel bool, dur time.Duration) {
	clk := timingwheel.NewFakeClock()
	opts := []timingwheel.Option{timingwheel.WithClock(clk), timingwheel.WithShards(shards)}
	if parallel {
		opts = append(opts, timingwheel.WithParallelCallbacks())
	}
	h, err := timingwheel.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	origin := clk.Now()
	const tick = int64(time.Millisecond)
	due := rvDue(origin, tick)

	const N = 64
	timers := make([]*rvCT, N)
	vals := make([]timingwheel.Timer, N)
	var running atomic.Int32
	for i := range timers {
		c := &rvCT{}
		timers[i] = c
		cb := func() {
			if running.Add(1) > 1 && !parallel {
				c.mu.Lock()
				c.bad = "two callbacks ran at once without WithParallelCallbacks"
				c.mu.Unlock()
			}
			defer running.Add(-1)
			nowTick := rvFloorDiv(int64(clk.Now().Sub(origin)), tick)
			c.mu.Lock()
			defer c.mu.Unlock()
			var dl time.Time
			switch {
			case len(c.claimed) > 0:
				dl, c.claimed = c.claimed[0], c.claimed[1:]
			case c.armed:
				dl, c.armed = c.dl, false
			default:
				if c.bad == "" {
					c.bad = fmt.Sprintf("callback ran for no live arming (fires %d, armings %d, cancels %d)", c.fires, c.armings, c.cancels)
				}
				c.fires++
				return
			}
			if due(dl) > nowTick && c.bad == "" {
				c.bad = fmt.Sprintf("fired early: due tick %d, clock tick %d", due(dl), nowTick)
			}
			c.fires++
		}
		c.mu.Lock()
		if i%2 == 0 {
			c.t = h.AfterFunc(time.Duration(i)*time.Millisecond, cb)
			c.armed, c.dl, c.armings = true, origin.Add(time.Duration(i)*time.Millisecond), 1
		} else {
			c.t = vals[i].Init(h, cb)
		}
		c.mu.Unlock()
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w) + 100))
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				if k%500 == 0 {
					rotateShard()
				}
				c := timers[rng.Intn(N)]
				var d time.Duration
				switch rng.Intn(6) {
				case 0:
					d = -time.Millisecond
				case 1:
					d = 0
				case 2, 3:
					d = time.Duration(rng.Int63n(int64(5 * time.Millisecond)))
				default:
					d = time.Duration(1+rng.Int63n(3000)) * time.Millisecond
				}
				c.mu.Lock()
				now := clk.Now()
				switch op := rng.Intn(4); op {
				case 0:
					got := c.t.Stop()
					if got {
						c.cancels++
						if !c.armed && c.bad == "" {
							c.bad = "Stop returned true for a timer the model had unarmed"
						}
					} else if c.armed {
						c.claimed = append(c.claimed, c.dl) // its callback started
					}
					c.armed = false
				default: // 1: ResetAt, else Reset
					dl, name, got := now.Add(d), "Reset", false
					if op == 1 {
						name, got = "ResetAt", c.t.ResetAt(dl)
					} else {
						got = c.t.Reset(d)
					}
					c.armings++
					if got {
						c.cancels++
						if !c.armed && c.bad == "" {
							c.bad = name + " returned true for a timer the model had unarmed"
						}
					} else if c.armed {
						c.claimed = append(c.claimed, c.dl)
					}
					c.armed, c.dl = true, dl
				}
				c.mu.Unlock()
			}
		}(w)
	}
	wg.Add(1)
	go func() { // observers
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			h.Len()
			h.Next()
			h.Stats()
			runtime.Gosched()
		}
	}()
	advDone := make(chan struct{})
	go func() {
		defer close(advDone)
		rng := rand.New(rand.NewSource(7))
		for {
			select {
			case <-stop:
				return
			default:
			}
			if rng.Intn(50) == 0 {
				clk.Add(time.Duration(rng.Int63n(int64(3 * time.Second))))
			} else {
				clk.Add(time.Duration(rng.Int63n(int64(3 * time.Millisecond))))
			}
			h.Advance()
		}
	}()
	time.Sleep(dur)
	close(stop)
	wg.Wait()
	<-advDone
	clk.Add(2 * time.Hour)
	h.Advance()
	h.Advance()
	total := 0
	for i, c := range timers {
		c.mu.Lock()
		if c.bad != "" {
			t.Errorf("timer %d: %s", i, c.bad)
		}
		if c.fires != c.armings-c.cancels {
			t.Errorf("timer %d: fired %d times; armings %d - cancelled %d = %d", i, c.fires, c.armings, c.cancels, c.armings-c.cancels)
		}
		if c.armed || len(c.claimed) > 0 {
			t.Errorf("timer %d: model still armed %v / claimed %d after everything was due", i, c.armed, len(c.claimed))
		}
		total += c.fires
		c.mu.Unlock()
	}
	if l := h.Len(); l != 0 {
		t.Errorf("Len = %d after everything fired", l)
	}
	if _, ok := h.Next(); ok {
		t.Errorf("Next ok after everything fired")
	}
	st := h.Stats()
	if st.Armed != 0 || st.Started != st.Fired+st.Stopped {
		t.Errorf("Stats inconsistent at rest: %+v", st)
	}
	if st.Fired != uint64(total) {
		t.Errorf("Stats.Fired = %d, callbacks ran %d", st.Fired, total)
	}
	t.Logf("%d callbacks, stats started %d fired %d stopped %d", total, st.Started, st.Fired, st.Stopped)
}

func TestBlackbox_ConcurrentExactlyOnce(t *testing.T) {
	for _, c := range []struct {
		shards   int
		parallel bool
	}{{1, false}, {4, false}, {4, true}, {0, true}} {
		t.Run(fmt.Sprintf("shards=%d,parallel=%v", c.shards, c.parallel), func(t *testing.T) {
			timingwheel.MustReturn(t, 60*time.Second, "concurrent exactly-once run", func() {
				run := 500 * time.Millisecond // of real time; 1.5s with TIMINGWHEEL_LONG=1
				if timingwheel.Long() {
					run = 1500 * time.Millisecond
				}
				rvConcurrentRun(t, c.shards, c.parallel, run)
			})
		})
	}
}
