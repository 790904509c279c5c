package lincheck

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/timingwheel/timingwheel"
)

// mode is how a history's hierarchy is advanced while the workers run.
type mode int

const (
	mockSolo   mode = iota // one goroutine moves a clock.Mock and calls Advance
	mockMover              // one goroutine moves the Mock, another calls Advance
	realLoop               // the real clock, and a goroutine calling Advance
	realDriver             // the real clock and the driver (Start)
)

var modeNames = [...]string{"mock", "mockMover", "realLoop", "driver"}

func (m mode) String() string { return modeNames[m] }

func (m mode) mock() bool { return m == mockSolo || m == mockMover }

// wheels are the level layouts a history picks from: small ones cascade
// (and hold deadlines beyond the top level) every few ticks.
var wheels = [][]int{{4, 4}, {2, 3, 2}, {8, 4}, {16, 8, 4}, {1000, 60, 60, 24}}

// driverSlack is how late the driver may wake, on a loaded machine under
// -race, before a timer that is still armed counts as never fired.
const driverSlack = 250 * time.Millisecond

// subject is what a history exercises: the timers, or the keys of one
// Timeouts set, of a hierarchy.
type subject interface {
	// bind creates keys timers (or the set for keys keys) on h; their
	// callbacks record their start with h.fired on the advancing
	// goroutine's log *adv, and may re-arm with cbRng.
	bind(h *hist, keys int)
	// op does one random operation on key k.
	op(h *hist, l *log, rng *rand.Rand, k int)
	// name for messages.
	String() string
}

// hist is one history being recorded.
type hist struct {
	recorder
	t     *testing.T
	seed  uint64
	mode  mode
	wheel wheel
	tw    *timingwheel.Hierarchy
	mock  *clock.Mock
	ref   time.Time
	maxD  int64 // the largest duration a script arms with

	adv      *log       // the advancing goroutine's log: callbacks record here
	cbRng    *rand.Rand // the callbacks' randomness, used by the advancing goroutine
	draining atomic.Bool

	resets sync.Map // key -> int64: the duration of the last Reset of the key (see lastReset)
}

// shared returns a deadline for ResetAt from one of a few readings shared
// by every worker: now rounded down to 4 ticks, plus one of 4 offsets, so
// that re-arms for the same deadline are common.
func (h *hist) shared(rng *rand.Rand) int64 {
	q := 4 * h.wheel.tick
	return floorDiv(h.recorder.now(), q)*q + (1+rng.Int64N(4))*h.maxD/4
}

// lastReset returns the duration of the last Reset of key k, if any.
func (h *hist) lastReset(k int) (int64, bool) {
	d, ok := h.resets.Load(k)
	if !ok {
		return 0, false
	}
	return d.(int64), true
}

// rearm reports whether a callback re-arms its timer (or key) this time.
func (h *hist) rearm() bool { return !h.draining.Load() && h.cbRng.IntN(4) == 0 }

// dur returns a random duration for Reset, Add or ResetAt's offset from
// now: a few ticks in the past up to beyond a small wheel's span, not on a
// tick boundary.
func (h *hist) dur(rng *rand.Rand) int64 {
	tick := h.wheel.tick
	return rng.Int64N(h.maxD+4*tick) - 4*tick
}

// at returns the instant x ns after ref.
func (h *hist) at(x int64) time.Time { return h.ref.Add(time.Duration(x)) }

// since returns t in ns since ref.
func (h *hist) since(t time.Time) int64 { return int64(t.Sub(h.ref)) }

// pause paces a worker: mostly back to back (so that operations overlap),
// sometimes a yield or a short sleep (so that the clock moves between
// them).
func pause(rng *rand.Rand) {
	switch rng.IntN(8) {
	case 4, 5:
		runtime.Gosched()
	case 6, 7:
		time.Sleep(time.Duration(rng.IntN(400)) * time.Microsecond)
	}
}

// scale is the size of the run: seeds per configuration, and operations
// per worker.
func scale() (seeds, opsPerWorker int) {
	if long {
		return 16, 200
	}
	return 8, 100
}

// runMatrix runs histories of a new subject each in every configuration: GOMAXPROCS 1
// and 2, each mode, 1, 2, 7 and 64 shards.
func runMatrix(t *testing.T, newSub func() subject) {
	base, replay := baseSeed()
	seeds, _ := scale()
	if replay {
		seeds = 1
	}
	n := 0
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			prev := runtime.GOMAXPROCS(procs)
			t.Cleanup(func() { runtime.GOMAXPROCS(prev) }) // after the parallel subtests
			for _, m := range []mode{mockSolo, mockMover, realLoop, realDriver} {
				for _, shards := range []int{1, 2, 7, 64} {
					first := base
					if !replay {
						first = base + uint64(n)*1_000_003
					}
					n++
					t.Run(fmt.Sprintf("%v/shards=%d", m, shards), func(t *testing.T) {
						t.Parallel()
						for i := range seeds {
							runHistory(t, newSub(), m, shards, first+uint64(i))
						}
					})
				}
			}
		})
	}
}

// runHistory records one history of sub in mode m and checks it.
func runHistory(t *testing.T, sub subject, m mode, shards int, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	_, perWorker := scale()
	workers := 2 + rng.IntN(2)
	keys := 1 + rng.IntN(3)
	levels := wheels[rng.IntN(len(wheels))]
	tick := time.Millisecond

	h := &hist{t: t, seed: seed, mode: m, cbRng: rand.New(rand.NewPCG(rng.Uint64(), 1))}
	opts := []timingwheel.Option{timingwheel.WithShards(shards), timingwheel.WithTick(tick), timingwheel.WithLevels(levels...)}
	if m.mock() {
		h.mock = clock.NewMock()
		h.mock.Set(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
		h.ref = h.mock.Now()
		opts = append(opts, timingwheel.WithClock(h.mock))
		// The Mock stands still while New reads it: the origin is ref.
		h.wheel = wheel{tick: int64(tick), exact: true}
		h.maxD = 40 * int64(tick)
	} else {
		h.wheel = wheel{tick: int64(tick)}
		h.maxD = 12 * int64(tick)
	}
	// The modes below drive tw themselves, or Start its driver once the
	// history is marked: no driver may start by itself on the first arming.
	opts = append(opts, timingwheel.WithManualAdvance())
	tw, err := timingwheel.New(opts...)
	if err != nil {
		t.Fatalf("seed %d: New: %v", seed, err)
	}
	h.tw = tw
	if !m.mock() {
		h.ref = tw.Now()
	}
	h.recorder.now = func() int64 { return h.since(tw.Now()) }
	about := fmt.Sprintf("%v, %v, %d workers, %d keys, levels %v", sub, m, workers, keys, levels)

	logs := make([]*log, workers)
	for i := range logs {
		logs[i] = &log{client: i, name: fmt.Sprintf("worker %d", i)}
	}
	h.adv = &log{client: workers, name: "advancing goroutine"}
	final := &log{client: workers + 1, name: "test goroutine"}
	all := append(append([]*log{}, logs...), h.adv, final)
	sub.bind(h, keys)

	// The workers, and whatever advances the hierarchy until they are done.
	stop := make(chan struct{})
	var bg sync.WaitGroup
	// untilStop runs f over and over on a goroutine of bg until stop is
	// closed.
	untilStop := func(f func()) {
		bg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				f()
			}
		})
	}
	switch m {
	case mockSolo:
		mv := rand.New(rand.NewPCG(seed, 2))
		untilStop(func() {
			h.adv.set("mock.Add")
			h.mock.Add(mockStep(mv, tick)) // sleeps 1ms: the workers run meanwhile
			h.advance(h.adv, func() { tw.Advance() })
		})
	case mockMover:
		mv := rand.New(rand.NewPCG(seed, 2))
		untilStop(func() { h.mock.Add(mockStep(mv, tick)) })
		fallthrough
	case realLoop:
		untilStop(func() {
			h.advance(h.adv, func() { tw.Advance() })
			time.Sleep(200 * time.Microsecond)
		})
	case realDriver:
		h.mark(h.adv) // nothing fires before the driver starts
		tw.Start()
	}
	var wg sync.WaitGroup
	for i, l := range logs {
		wrng := rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))
		wg.Go(func() {
			for range perWorker {
				sub.op(h, l, wrng, wrng.IntN(keys))
				pause(wrng)
			}
			l.set("done")
		})
	}
	watch := 30 * time.Second
	if long {
		watch = 90 * time.Second
	}
	within(t, watch, seed, about+": the workers' operations", wg.Wait, all...)
	close(stop)
	within(t, watch, seed, about+": stopping the goroutine that advances", bg.Wait, all...)

	// Let every deadline armed pass, then check that nothing due is left.
	// The test goroutine advances from here on (but for the driver).
	within(t, watch, seed, about+": the final Advances", func() {
		switch m {
		case mockSolo, mockMover:
			for range 2 {
				h.mock.Add(time.Duration(h.maxD + 2*int64(tick)))
				h.advance(h.adv, func() { tw.Advance() })
			}
		case realLoop:
			time.Sleep(time.Duration(h.maxD + 2*int64(tick)))
			h.advance(h.adv, func() { tw.Advance() })
		case realDriver:
			// No callback re-arms from here on. Once every deadline has
			// passed, the driver must run an Advance within driverSlack,
			// and that Advance must fire what is still armed.
			h.draining.Store(true)
			time.Sleep(time.Duration(h.maxD + 2*int64(tick)))
			T := h.recorder.now()
			start := h.stamp.Add(1)
			time.Sleep(driverSlack)
			final.ops = append(final.ops,
				opAt(final.client, input{kind: opAdvStart, key: -1, b: T, a: T}, start, start),
				opAt(final.client, input{kind: opAdvEnd, key: -1}, h.stamp.Add(1), h.stamp.Add(1)))
			tw.Stop()
		}
	}, all...)
	check(t, h.wheel, seed, about, all...)
}

// mockStep is how far the Mock moves at a time: up to three ticks, rarely
// not at all, seldom on a tick boundary.
func mockStep(rng *rand.Rand, tick time.Duration) time.Duration {
	return time.Duration(rng.Int64N(3 * int64(tick)))
}
