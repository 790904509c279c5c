package wheeltest_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/wheeltest"
)

// newHierarchy returns a hierarchy on a fresh Clock reading t0.
func newHierarchy(t *testing.T, opts ...timingwheel.Option) (*timingwheel.Hierarchy, *wheeltest.Clock) {
	t.Helper()
	c := wheeltest.NewClock(t0)
	h, err := timingwheel.New(append([]timingwheel.Option{timingwheel.WithClock(c)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return h, c
}

// firing is one callback run: which timer, and the clock when it ran.
type firing struct {
	id int
	at time.Time
}

// TestAdvanceTo_FiresEveryTimerAtItsDueTickInOrder arms timers with seeded
// random deadlines — within a tick, a second, an hour and days, on several
// layouts — and walks to past the last: each callback runs once, with the
// clock at its deadline's due tick, in non-decreasing due ticks, and the
// returned count is the number of callbacks.
func TestAdvanceTo_FiresEveryTimerAtItsDueTickInOrder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []timingwheel.Option
		timers int
		span   time.Duration
	}{
		{"default/within 2s", nil, 2000, 2 * time.Second},
		{"default/within 3 days", nil, 2000, 72 * time.Hour},
		{"tick=10ms,levels=8,8/within an hour", []timingwheel.Option{timingwheel.WithTick(10 * time.Millisecond), timingwheel.WithLevels(8, 8)}, 1000, time.Hour},
		{"shards=4/within a minute", []timingwheel.Option{timingwheel.WithShards(4)}, 1000, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, c := newHierarchy(t, tc.opts...)
			rng := rand.New(rand.NewPCG(1, uint64(tc.timers)))
			deadlines := make([]time.Time, tc.timers)
			var fired []firing
			last := t0
			for i := range deadlines {
				deadlines[i] = t0.Add(time.Duration(rng.Int64N(int64(tc.span))))
				last = maxTime(last, deadlines[i])
				h.AtFunc(deadlines[i], func() { fired = append(fired, firing{i, c.Now()}) })
			}
			end := last.Add(time.Second)
			n := wheeltest.AdvanceTo(h, c, end)
			if n != tc.timers || len(fired) != tc.timers {
				t.Fatalf("AdvanceTo returned %d, %d callbacks ran; want %d", n, len(fired), tc.timers)
			}
			if !c.Now().Equal(end) || h.Len() != 0 {
				t.Errorf("after AdvanceTo: the clock reads %v, %d timers armed; want %v, 0", c.Now(), h.Len(), end)
			}
			seen := make([]bool, tc.timers)
			for k, f := range fired {
				if seen[f.id] {
					t.Fatalf("timer %d ran twice", f.id)
				}
				seen[f.id] = true
				if due := h.Due(deadlines[f.id]); !f.at.Equal(due) {
					t.Errorf("timer %d (deadline %v) ran with the clock at %v, want its due tick %v", f.id, deadlines[f.id].Sub(t0), f.at.Sub(t0), due.Sub(t0))
				}
				if k > 0 && f.at.Before(fired[k-1].at) {
					t.Errorf("run %d at %v after run %d at %v: not in order of due ticks", k, f.at.Sub(t0), k-1, fired[k-1].at.Sub(t0))
				}
			}
		})
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// TestAdvanceTo_RunsPeriodicTimersEveryPeriod: one walk of 30 seconds runs
// each Every(p) timer once per period, at A+k·p rounded up to its tick,
// where one Advance after moving the clock 30 seconds would run it once.
func TestAdvanceTo_RunsPeriodicTimersEveryPeriod(t *testing.T) {
	h, c := newHierarchy(t)
	periods := []time.Duration{time.Millisecond, 7 * time.Millisecond, 1500 * time.Microsecond, time.Second, 7 * time.Second}
	const span = 30 * time.Second
	runs := make([][]time.Time, len(periods))
	for i, p := range periods {
		h.Every(p, func() { runs[i] = append(runs[i], c.Now()) })
	}
	n := wheeltest.AdvanceTo(h, c, t0.Add(span))
	total := 0
	for i, p := range periods {
		want := int(span / p)
		if len(runs[i]) != want {
			t.Errorf("Every(%v): %d runs in %v, want %d", p, len(runs[i]), span, want)
			continue
		}
		for k, at := range runs[i] {
			if due := h.Due(t0.Add(time.Duration(k+1) * p)); !at.Equal(due) {
				t.Errorf("Every(%v): run %d at %v, want %v", p, k+1, at.Sub(t0), due.Sub(t0))
				break
			}
		}
		total += len(runs[i])
	}
	if n != total {
		t.Errorf("AdvanceTo returned %d, want the %d runs", n, total)
	}
}

// TestAdvanceTo_FiresTimersArmedByCallbacksDuringTheWalk: a retransmit
// timer that re-arms itself with a doubling backoff, a callback that arms
// a new timer, and one that arms a timer for a deadline already reached:
// each fires at its own tick within the one walk.
func TestAdvanceTo_FiresTimersArmedByCallbacksDuringTheWalk(t *testing.T) {
	h, c := newHierarchy(t)
	var trace []string
	log := func(what string) { trace = append(trace, fmt.Sprintf("%v %s", c.Now().Sub(t0), what)) }

	var rto timingwheel.Timer
	backoff := 100 * time.Millisecond
	rto.Init(h, func() {
		log("retransmit")
		if backoff *= 2; backoff <= time.Second {
			rto.Reset(backoff)
		}
	})
	rto.Reset(backoff)
	h.AfterFunc(150*time.Millisecond, func() {
		log("arm +50ms and a past deadline")
		h.AfterFunc(50*time.Millisecond, func() { log("armed by a callback") })
		h.AtFunc(t0, func() { log("past deadline, armed by a callback") })
	})

	n := wheeltest.AdvanceTo(h, c, t0.Add(5*time.Second))
	want := []string{
		"100ms retransmit",
		"150ms arm +50ms and a past deadline",
		"150ms past deadline, armed by a callback",
		"200ms armed by a callback",
		"300ms retransmit", // +200ms
		"700ms retransmit", // +400ms
		"1.5s retransmit",  // +800ms; the next would be 1.6s, over the cap
	}
	if !slices.Equal(trace, want) || n != len(want) {
		t.Errorf("AdvanceTo returned %d; trace:\n%s\nwant:\n%s", n, strings.Join(trace, "\n"), strings.Join(want, "\n"))
	}
}

// TestAdvanceTo_MatchesTheDriver runs one seeded schedule twice: walked by
// AdvanceTo on a Clock, and by the real driver in a testing/synctest
// bubble, whose clock jumps to each wake-up. Both run the same callbacks
// at the same instants (since the origin): one-shot, periodic and
// callback-armed timers, past deadlines, stops and re-arms.
func TestAdvanceTo_MatchesTheDriver(t *testing.T) {
	schedule := func(h *timingwheel.Hierarchy, elapsed func() time.Duration) *[]string {
		var trace []string
		rec := func(what string) func() {
			return func() { trace = append(trace, fmt.Sprintf("%v %s", elapsed(), what)) }
		}
		rng := rand.New(rand.NewPCG(7, 47))
		var stops []*timingwheel.Timer
		for i := range 300 {
			d := time.Duration(rng.Int64N(int64(3 * time.Second)))
			switch i % 5 {
			case 0:
				stops = append(stops, h.AfterFunc(d, rec(fmt.Sprint("stopped ", i))))
			case 1:
				h.AfterFunc(d, func() {
					rec(fmt.Sprint("one-shot ", i))()
					h.AfterFunc(d/3, rec(fmt.Sprint("armed by ", i)))
				})
			case 2:
				p := time.Duration(1+rng.Int64N(400)) * time.Millisecond
				var every timingwheel.Timer
				k := 0
				every.Init(h, func() {
					rec(fmt.Sprint("periodic ", i))()
					if k++; k == 5 {
						every.Stop()
					}
				})
				every.ResetEvery(p)
			case 3:
				h.AfterFunc(d, func() {
					rec(fmt.Sprint("one-shot ", i))()
					h.AfterFunc(-time.Second, rec(fmt.Sprint("past, armed by ", i)))
				})
			default:
				tm := h.AfterFunc(time.Hour, rec(fmt.Sprint("re-armed ", i)))
				tm.Reset(d)
			}
		}
		for _, s := range stops[:len(stops)/2] {
			s.Stop()
		}
		return &trace
	}
	// Callbacks of one tick in any order: compare each tick's as a set.
	sorted := func(trace []string) []string {
		s := slices.Clone(trace)
		slices.SortStableFunc(s, func(a, b string) int {
			da, _ := time.ParseDuration(strings.Fields(a)[0])
			db, _ := time.ParseDuration(strings.Fields(b)[0])
			if da != db {
				return int(da - db)
			}
			return strings.Compare(a, b)
		})
		return s
	}

	h, c := newHierarchy(t)
	walked := schedule(h, func() time.Duration { return c.Now().Sub(t0) })
	wheeltest.AdvanceTo(h, c, t0.Add(10*time.Second))

	var driven []string
	synctest.Test(t, func(t *testing.T) {
		h, err := timingwheel.New()
		if err != nil {
			t.Fatal(err)
		}
		h.Start()
		defer h.Stop()
		trace := schedule(h, h.Elapsed)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		driven = *trace
	})
	if len(*walked) < 300 {
		t.Fatalf("the walk ran %d callbacks, want more than 300", len(*walked))
	}
	if a, b := sorted(*walked), sorted(driven); !slices.Equal(a, b) {
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				t.Fatalf("AdvanceTo and the driver differ at callback %d of %d/%d: %q, driver %q", i, len(a), len(b), a[i], b[i])
			}
		}
		t.Fatalf("AdvanceTo ran %d callbacks, the driver %d", len(a), len(b))
	}
}

// TestAdvanceTo_Edges: an empty hierarchy (the clock moves to t, nothing
// runs), t equal to the clock's reading (what is due runs, the clock stays),
// a past deadline (fires at the first Advance, at the reading), a clock
// not on a tick (the walk stops at tick boundaries after it).
func TestAdvanceTo_Edges(t *testing.T) {
	t.Run("empty", func(t *testing.T) {
		h, c := newHierarchy(t)
		if n := wheeltest.AdvanceTo(h, c, t0.Add(time.Hour)); n != 0 || !c.Now().Equal(t0.Add(time.Hour)) {
			t.Errorf("AdvanceTo of an empty hierarchy: %d, clock at %v; want 0, 1h", n, c.Now().Sub(t0))
		}
	})
	t.Run("t is now, a past deadline", func(t *testing.T) {
		h, c := newHierarchy(t)
		c.Add(time.Minute)
		var at time.Time
		h.AtFunc(t0, func() { at = c.Now() })
		if n := wheeltest.AdvanceTo(h, c, c.Now()); n != 1 || !at.Equal(t0.Add(time.Minute)) {
			t.Errorf("AdvanceTo(now) with a past deadline: %d ran, at %v; want 1 at 1m", n, at.Sub(t0))
		}
		if n := wheeltest.AdvanceTo(h, c, c.Now()); n != 0 {
			t.Errorf("AdvanceTo(now) again: %d ran, want 0", n)
		}
	})
	t.Run("clock between ticks", func(t *testing.T) {
		h, c := newHierarchy(t, timingwheel.WithTick(10*time.Millisecond))
		c.Add(3 * time.Millisecond)
		var at []time.Duration
		for _, d := range []time.Duration{time.Millisecond, 8 * time.Millisecond, 21 * time.Millisecond} {
			h.AfterFunc(d, func() { at = append(at, c.Now().Sub(t0)) })
		}
		wheeltest.AdvanceTo(h, c, t0.Add(25*time.Millisecond))
		if want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond}; !slices.Equal(at[:2], want[:2]) || len(at) != 2 {
			t.Errorf("fired at %v, want %v (the third is due at 30ms, after the walk's end)", at, want[:2])
		}
		if n := wheeltest.AdvanceTo(h, c, t0.Add(30*time.Millisecond)); n != 1 || at[2] != 30*time.Millisecond {
			t.Errorf("the third: %d ran, at %v; want 1 at 30ms", n, at)
		}
	})
	t.Run("after the clock went back", func(t *testing.T) {
		h, c := newHierarchy(t)
		c.Add(time.Minute)
		var at []time.Duration
		h.AfterFunc(time.Second, func() { at = append(at, c.Now().Sub(t0)) }) // due at 1m1s
		c.Set(t0)                                                             // back a minute
		wheeltest.AdvanceTo(h, c, t0.Add(time.Minute))
		if len(at) != 0 {
			t.Errorf("fired at %v before its deadline, after the clock went back", at)
		}
		wheeltest.AdvanceTo(h, c, t0.Add(2*time.Minute))
		if !slices.Equal(at, []time.Duration{time.Minute + time.Second}) {
			t.Errorf("fired at %v, want [1m1s]", at)
		}
	})
}

// TestAdvanceTo_PanicsSayingWhy: AdvanceTo never stops early; what it
// cannot do it refuses with a message.
func TestAdvanceTo_PanicsSayingWhy(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(t *testing.T)
		want string
	}{
		{"nil hierarchy", func(t *testing.T) {
			wheeltest.AdvanceTo(nil, wheeltest.NewClock(t0), t0)
		}, "wheeltest: AdvanceTo called with a nil Hierarchy"},
		{"nil clock", func(t *testing.T) {
			h, _ := newHierarchy(t)
			wheeltest.AdvanceTo(h, nil, t0)
		}, "wheeltest: AdvanceTo called with a nil Clock"},
		{"t before the clock", func(t *testing.T) {
			h, c := newHierarchy(t)
			c.Add(time.Second)
			wheeltest.AdvanceTo(h, c, t0)
		}, "AdvanceTo does not move a clock back"},
		{"a hierarchy on another clock", func(t *testing.T) {
			h, err := timingwheel.New(timingwheel.WithClock(wheeltest.NewClock(t0.Add(time.Hour))))
			if err != nil {
				t.Fatal(err)
			}
			h.Stop()
			wheeltest.AdvanceTo(h, wheeltest.NewClock(t0), t0.Add(time.Second))
		}, "the hierarchy does not read this Clock"},
		{"a callback moves the clock", func(t *testing.T) {
			h, c := newHierarchy(t)
			h.AfterFunc(time.Second, func() { c.Add(time.Millisecond) })
			h.AfterFunc(2*time.Second, func() {})
			wheeltest.AdvanceTo(h, c, t0.Add(time.Minute))
		}, "the Clock was moved to"},
		{"a callback re-arms its timer for now forever", func(t *testing.T) {
			defer wheeltest.SetMaxAdvancesAtOneInstant(1000)()
			h, c := newHierarchy(t)
			var loop timingwheel.Timer
			loop.Init(h, func() { loop.Reset(0) })
			loop.Reset(time.Second)
			wheeltest.AdvanceTo(h, c, t0.Add(time.Minute))
		}, "1000 Advances in a row at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := func() (msg string) {
				defer func() { msg, _ = recover().(string) }()
				tc.call(t)
				return ""
			}()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("panicked with %q, want a message containing %q", msg, tc.want)
			}
		})
	}
}
