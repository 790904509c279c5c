package bench

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/zeromicro/go-zero/core/collection"

	"github.com/timingwheel/timingwheel"
)

// The shape of the load every benchmark shares.
const (
	// Live timers are armed farMin..farMin+farSpread out, far enough that none
	// fires while a benchmark runs: they are the idle connections.
	farMin    = 30 * time.Second
	farSpread = 30 * time.Second

	// heartbeat is what Reset re-arms a live timer to. It is later than every
	// live deadline, so each Reset moves a deadline later, as a heartbeat does.
	heartbeat = 90 * time.Second

	// go-zero's TimingWheel is a single wheel turned by its own ticker. A 1 ms
	// interval matches the resolution of our wheel's default tick; 60,000
	// slots cover the 30–60 s live range in one turn, so live timers need no
	// "circle" counting and each tick scans only the timers due in it.
	gozeroInterval = time.Millisecond
	gozeroSlots    = 60_000
)

// farDurations holds 30–60 s durations in random order; index with durMask.
var farDurations = func() []time.Duration {
	r := rand.New(rand.NewPCG(1, 2))
	ds := make([]time.Duration, durMask+1)
	for i := range ds {
		ds[i] = farMin + time.Duration(r.Int64N(int64(farSpread)))
	}
	return ds
}()

const durMask = 1<<16 - 1

func farDuration(i int) time.Duration { return farDurations[i&durMask] }

// noop is the callback every live timer shares, so that no benchmark counts
// the cost of allocating a closure per timer.
func noop() {}

// order returns the indexes 0..n-1, shuffled with a fixed seed when random is
// set. Benchmarks walk it to pick which live timer to Reset: a random walk is
// what heartbeats from many connections look like, a sequential walk is the
// cache-friendly best case.
func order(n int, random bool) []int32 {
	o := make([]int32, n)
	for i := range o {
		o[i] = int32(i)
	}
	if random {
		r := rand.New(rand.NewPCG(3, 4))
		r.Shuffle(n, func(i, j int) { o[i], o[j] = o[j], o[i] })
	}
	return o
}

// goroutineOrders returns g random orders of 0..n-1, each shuffled with its
// own seed, for b.RunParallel goroutines that share n timers: each goroutine
// touches them in an order unrelated to the others', as the goroutines of
// different connections do. They are built once per process and shared by
// every benchmark that asks for the same n (4 bytes per index: 64 MB for 16
// orders of 10^6).
func goroutineOrders(n, g int) [][]int32 {
	ordersMu.Lock()
	defer ordersMu.Unlock()
	os := ordersByN[n]
	for i := len(os); i < g; i++ {
		o := make([]int32, n)
		for j := range o {
			o[j] = int32(j)
		}
		r := rand.New(rand.NewPCG(7, uint64(i)))
		r.Shuffle(n, func(a, b int) { o[a], o[b] = o[b], o[a] })
		os = append(os, o)
	}
	ordersByN[n] = os
	return os[:g]
}

var (
	ordersMu  sync.Mutex
	ordersByN = map[int][][]int32{}
)

// A subject is one timer implementation with room for n live timers.
// The loop methods contain the b.Loop / pb.Next loop themselves so that the
// measured code calls each implementation directly, not through an interface.
type subject interface {
	// load arms the n live timers farMin..farMin+farSpread out, sharing noop.
	load()
	// churnLoop measures arming one more timer 30–60 s out and stopping it.
	churnLoop(b *testing.B)
	// resetLoop measures re-arming live timer order[i] to heartbeat from now.
	resetLoop(b *testing.B, order []int32)
	// resetParallel is resetLoop for one b.RunParallel goroutine, which
	// walks its own order.
	resetParallel(pb *testing.PB, order []int32)
	// armAt arms timer i at deadlines[i] with callback f, for every i < n.
	armAt(deadlines []time.Time, f func())
	// close stops every timer and the implementation's goroutines.
	close()
}

// A parallelChurner is a subject whose churn can run from many goroutines
// (go-zero's wheel is one goroutine behind a channel; it is not measured so).
type parallelChurner interface {
	subject
	// churnParallel is churnLoop for one b.RunParallel goroutine; i varies
	// the durations between goroutines.
	churnParallel(pb *testing.PB, i int)
}

var impls = []struct {
	name string
	new  func(tb testing.TB, n int) subject
}{
	{"wheel", newWheel},
	{"runtime", newRuntime},
	{"gozero", newGozero},
}

// wheel: this library, with its driver goroutine running (h.Start), as a
// server would run it.

type wheelSubject struct {
	h      *timingwheel.Hierarchy
	timers []*timingwheel.Timer
}

func newWheel(tb testing.TB, n int) subject {
	h := startedWheel(tb)
	return &wheelSubject{h: h, timers: make([]*timingwheel.Timer, n)}
}

func (s *wheelSubject) load() {
	for i := range s.timers {
		s.timers[i] = s.h.AfterFunc(farDuration(i), noop)
	}
}

func (s *wheelSubject) churnLoop(b *testing.B) {
	h, i := s.h, 0
	for b.Loop() {
		h.AfterFunc(farDurations[i&durMask], noop).Stop()
		i++
	}
}

func (s *wheelSubject) resetLoop(b *testing.B, order []int32) {
	ts, i := s.timers, 0
	for b.Loop() {
		ts[order[i]].Reset(heartbeat)
		if i++; i == len(order) {
			i = 0
		}
	}
}

func (s *wheelSubject) resetParallel(pb *testing.PB, order []int32) {
	ts, i := s.timers, 0
	for pb.Next() {
		ts[order[i]].Reset(heartbeat)
		if i++; i == len(order) {
			i = 0
		}
	}
}

func (s *wheelSubject) churnParallel(pb *testing.PB, i int) {
	h := s.h
	for pb.Next() {
		h.AfterFunc(farDurations[i&durMask], noop).Stop()
		i++
	}
}

func (s *wheelSubject) armAt(deadlines []time.Time, f func()) {
	for i, d := range deadlines {
		s.timers[i] = s.h.AtFunc(d, f)
	}
}

func (s *wheelSubject) close() {
	s.h.Stop()
	for _, t := range s.timers {
		if t != nil {
			t.Stop()
		}
	}
}

// runtime: one time.AfterFunc timer per item, the alternative our users have.

type runtimeSubject struct {
	timers []*time.Timer
}

func newRuntime(_ testing.TB, n int) subject {
	return &runtimeSubject{timers: make([]*time.Timer, n)}
}

func (s *runtimeSubject) load() {
	for i := range s.timers {
		s.timers[i] = time.AfterFunc(farDuration(i), noop)
	}
}

func (s *runtimeSubject) churnLoop(b *testing.B) {
	i := 0
	for b.Loop() {
		time.AfterFunc(farDurations[i&durMask], noop).Stop()
		i++
	}
}

func (s *runtimeSubject) resetLoop(b *testing.B, order []int32) {
	ts, i := s.timers, 0
	for b.Loop() {
		ts[order[i]].Reset(heartbeat)
		if i++; i == len(order) {
			i = 0
		}
	}
}

func (s *runtimeSubject) resetParallel(pb *testing.PB, order []int32) {
	ts, i := s.timers, 0
	for pb.Next() {
		ts[order[i]].Reset(heartbeat)
		if i++; i == len(order) {
			i = 0
		}
	}
}

func (s *runtimeSubject) churnParallel(pb *testing.PB, i int) {
	for pb.Next() {
		time.AfterFunc(farDurations[i&durMask], noop).Stop()
		i++
	}
}

// armAt has to turn each deadline into a duration: time.AfterFunc has no
// absolute-deadline form. That costs one clock read per timer while arming.
func (s *runtimeSubject) armAt(deadlines []time.Time, f func()) {
	for i, d := range deadlines {
		s.timers[i] = time.AfterFunc(time.Until(d), f)
	}
}

func (s *runtimeSubject) close() {
	for _, t := range s.timers {
		if t != nil {
			t.Stop()
		}
	}
}

// gozero: github.com/zeromicro/go-zero/core/collection.TimingWheel.
//
// How its API maps onto ours, and where the mapping is not one to one:
//   - It is keyed: SetTimer(key, value, d) arms, RemoveTimer(key) stops,
//     MoveTimer(key, d) re-arms. A timer is its key; the keys here are ints
//     boxed into interfaces ahead of time, so boxing is not measured.
//   - One callback for the whole wheel, func(key, value any); per-timer
//     callbacks are not possible, which matches the shared callback used here.
//   - Every call is a send on an unbuffered channel to the wheel's own
//     goroutine, which does the work; the call returns once the goroutine has
//     received it, so a loop of calls measures the hand-off plus the work.
//   - RemoveTimer only marks the entry; it stays in its slot until the wheel
//     turns to it. Churn therefore accumulates entries for 30–60 s.
//   - Its ticker fires every interval whether or not anything is armed.
//   - Due entries run in one new goroutine per tick, sequentially.

type gozeroSubject struct {
	tw   *collection.TimingWheel
	keys []any
	fire func()
}

// churnKey is the key churn arms and removes; distinct from the live keys,
// and boxing a zero-size value does not allocate.
type churnKey struct{}

func newGozero(tb testing.TB, n int) subject {
	s := &gozeroSubject{keys: make([]any, n), fire: noop}
	for i := range s.keys {
		s.keys[i] = i
	}
	tw, err := collection.NewTimingWheel(gozeroInterval, gozeroSlots, func(_, _ any) { s.fire() })
	if err != nil {
		tb.Fatal(err)
	}
	s.tw = tw
	return s
}

func (s *gozeroSubject) load() {
	for i, k := range s.keys {
		s.tw.SetTimer(k, nil, farDuration(i))
	}
}

func (s *gozeroSubject) churnLoop(b *testing.B) {
	tw, k, i := s.tw, any(churnKey{}), 0
	for b.Loop() {
		tw.SetTimer(k, nil, farDurations[i&durMask])
		tw.RemoveTimer(k)
		i++
	}
}

func (s *gozeroSubject) resetLoop(b *testing.B, order []int32) {
	tw, keys, i := s.tw, s.keys, 0
	for b.Loop() {
		tw.MoveTimer(keys[order[i]], heartbeat)
		if i++; i == len(order) {
			i = 0
		}
	}
}

func (s *gozeroSubject) resetParallel(pb *testing.PB, order []int32) {
	tw, keys, i := s.tw, s.keys, 0
	for pb.Next() {
		tw.MoveTimer(keys[order[i]], heartbeat)
		if i++; i == len(order) {
			i = 0
		}
	}
}

// armAt: like the runtime, SetTimer takes a duration, and it rejects
// durations <= 0, so a deadline already passed is armed one interval out.
func (s *gozeroSubject) armAt(deadlines []time.Time, f func()) {
	s.fire = f // published to the wheel's goroutine by the SetTimer sends
	for i, d := range deadlines {
		s.tw.SetTimer(s.keys[i], nil, max(time.Until(d), gozeroInterval))
	}
}

func (s *gozeroSubject) close() { s.tw.Stop() }

// startedWheel returns a hierarchy with the default options and its driver
// started; the caller stops it.
func startedWheel(tb testing.TB) *timingwheel.Hierarchy {
	tb.Helper()
	h, err := timingwheel.New()
	if err != nil {
		tb.Fatal(err)
	}
	h.Start()
	return h
}
