package bench

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/timingwheel/timingwheel"
)

// liveCounts are the numbers of idle live timers a benchmark runs next to.
var liveCounts = []int{0, 1_000, 100_000, 1_000_000}

const million = 1_000_000

// A benchCase is one sub-benchmark run against every implementation, with a
// fresh subject holding room for n timers.
type benchCase struct {
	name string
	n    int
	body func(b *testing.B, s subject)
}

// forEachImpl runs each case as BenchmarkX/impl=<name>/<case name>.
func forEachImpl(b *testing.B, cases ...benchCase) {
	for _, im := range impls {
		b.Run("impl="+im.name, func(b *testing.B) {
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) {
					s := im.new(b, c.n)
					defer settle()
					defer s.close()
					c.body(b, s)
				})
			}
		})
	}
}

// settle collects the garbage the previous benchmark left behind, so that one
// implementation's teardown is not billed to the next one's loop.
func settle() { runtime.GC() }

// BenchmarkChurn: arm a timer 30–60 s out and stop it, next to live idle timers.
// This is the connection that is opened and closed before its timeout.
func BenchmarkChurn(b *testing.B) {
	var cases []benchCase
	for _, live := range liveCounts {
		cases = append(cases, benchCase{"live=" + strconv.Itoa(live), live, func(b *testing.B, s subject) {
			s.load()
			settle()
			b.ReportAllocs()
			s.churnLoop(b)
		}})
	}
	forEachImpl(b, cases...)
}

// BenchmarkReset: re-arm one of 10^6 live timers to a later deadline (the
// heartbeat). order=random is what many connections' heartbeats look like;
// order=sequential is the cache-friendly best case, reported for honesty.
func BenchmarkReset(b *testing.B) {
	var cases []benchCase
	for _, random := range []bool{true, false} {
		name := "live=1000000/order=sequential"
		if random {
			name = "live=1000000/order=random"
		}
		ord := order(million, random)
		cases = append(cases, benchCase{name, million, func(b *testing.B, s subject) {
			s.load()
			settle()
			b.ReportAllocs()
			s.resetLoop(b, ord)
		}})
	}
	forEachImpl(b, cases...)
}

// BenchmarkResetAt is BenchmarkReset (random order, 10^6 live) through the
// wheel's ResetAt, which takes an absolute deadline so that an event loop can
// read the clock once for a batch of re-arms: here once per resetBatch. The
// runtime has no such call; compare with BenchmarkReset's runtime row.
func BenchmarkResetAt(b *testing.B) {
	ord := order(million, true)
	b.Run("impl=wheel", func(b *testing.B) {
		b.Run("live=1000000/order=random/batch="+strconv.Itoa(resetBatch), func(b *testing.B) {
			s := newWheel(b, million).(*wheelSubject)
			defer settle()
			defer s.close()
			s.load()
			settle()
			b.ReportAllocs()
			ts, i := s.timers, 0
			var deadline time.Time
			for b.Loop() {
				if i%resetBatch == 0 {
					deadline = time.Now().Add(heartbeat)
				}
				ts[ord[i]].ResetAt(deadline)
				if i++; i == len(ord) {
					i = 0
				}
			}
		})
	})
}

const resetBatch = 64

// parallelism is how many goroutines per GOMAXPROCS the b.RunParallel
// benchmarks run (b.SetParallelism): 8 at GOMAXPROCS=1, 16 at 2. A server
// with a goroutine per connection has many more goroutines than cores.
const parallelism = 8

// forEachLoaded runs body as BenchmarkX/impl=<name>/<caseName> for each
// named implementation, against a subject whose n live timers are loaded
// once for all the rounds of that sub-benchmark. Unlike a b.Loop benchmark,
// a b.RunParallel one has its function called once per round (b.N = 1, 100,
// 10^4, ...), and reloading 10^6 timers every round would take longer than
// the measurement.
func forEachLoaded(b *testing.B, names []string, caseName string, n int, body func(b *testing.B, s subject)) {
	for _, name := range names {
		newSubject := implNamed(name)
		b.Run("impl="+name, func(b *testing.B) {
			var s subject
			b.Run(caseName, func(b *testing.B) {
				if s == nil {
					s = newSubject(b, n)
					s.load()
					settle()
				}
				body(b, s)
			})
			if s != nil {
				s.close()
				settle()
			}
		})
	}
}

func implNamed(name string) func(testing.TB, int) subject {
	for _, im := range impls {
		if im.name == name {
			return im.new
		}
	}
	panic("no implementation " + name)
}

// BenchmarkResetParallel: BenchmarkReset (random order, 10^6 live) from
// parallelism*GOMAXPROCS goroutines at once, each walking the shared timers
// in its own random order.
func BenchmarkResetParallel(b *testing.B) {
	forEachLoaded(b, []string{"wheel", "runtime", "gozero"}, "live=1000000", million, func(b *testing.B, s subject) {
		orders := goroutineOrders(million, parallelism*runtime.GOMAXPROCS(0))
		var next atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(parallelism)
		b.ResetTimer() // RunParallel, unlike b.Loop, does not leave the setup out
		b.RunParallel(func(pb *testing.PB) {
			s.resetParallel(pb, orders[int(next.Add(1)-1)%len(orders)])
		})
	})
}

// BenchmarkArmStopParallel: BenchmarkChurn next to 10^6 live timers from
// parallelism*GOMAXPROCS goroutines at once: short-lived timeouts (a request
// that completes before its deadline) armed and stopped on many goroutines.
// Run with -cpu 1,2 to see how each implementation scales with cores.
func BenchmarkArmStopParallel(b *testing.B) {
	forEachLoaded(b, []string{"wheel", "runtime"}, "live=1000000", million, func(b *testing.B, s subject) {
		var next atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(parallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			s.(parallelChurner).churnParallel(pb, int(next.Add(1))*4099)
		})
	})
}

// BenchmarkHeap reports heap bytes per live timer (B/timer): HeapAlloc after
// arming 10^6 timers with a shared callback, minus HeapAlloc before, after a
// GC each time. The handle each caller keeps (a pointer, or go-zero's key) is
// allocated before the first reading, so it is not counted for anyone.
// Its ns/op is the time to arm 10^6 timers plus two GCs; ignore it.
//
// Only the first iteration in a process sees everything the runtime
// allocates: its per-P timer heaps keep their capacity once 10^6 timers have
// been in them, so later iterations miss those 16+ bytes per timer.
// cmd/report runs it with -count=1 -benchtime=1x in a fresh process per sample.
func BenchmarkHeap(b *testing.B) {
	for _, im := range impls {
		b.Run("impl="+im.name, func(b *testing.B) {
			b.Run("live=1000000", func(b *testing.B) {
				reportHeapPer(b, "B/timer", million, func(measure func(arm func())) {
					s := im.new(b, million)
					measure(s.load)
					s.close()
				})
			})
		})
	}
}

// reportHeapPer reports unit: the heap bytes that each of count things
// adds, averaged over the b.Loop rounds. Each round calls round, which sets
// up what is not counted, calls measure once with what is (arm, between two
// readings of heapAlloc), and then tears both down.
func reportHeapPer(b *testing.B, unit string, count float64, round func(measure func(arm func()))) {
	b.ReportAllocs()
	var per float64
	for b.Loop() {
		round(func(arm func()) {
			before := heapAlloc()
			arm()
			after := heapAlloc()
			per += (float64(after) - float64(before)) / count
		})
	}
	b.ReportMetric(per/float64(b.N), unit)
	settle()
}

// A countdown counts the callbacks of n timers and closes done when the
// last has run.
type countdown struct {
	n     int64
	fired atomic.Int64
	done  chan struct{}
}

func newCountdown(n int64) *countdown { return &countdown{n: n, done: make(chan struct{})} }

// fire is the timers' callback, or is called by it.
func (c *countdown) fire() {
	if c.fired.Add(1) == c.n {
		close(c.done)
	}
}

// wait waits until all n have fired, and fails b, saying how many did
// (what: "timers fired"), if they have not within a minute.
func (c *countdown) wait(b *testing.B, what string) {
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		b.Fatalf("%d of %d %s within a minute", c.fired.Load(), c.n, what)
	}
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC() // a second cycle frees what the first one's finalizers released
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// expiryLead is how far after the start of arming the first of the
// BenchmarkExpiry deadlines lies: long enough that arming 10^6 timers
// finishes before any is due, so firing and arming are measured apart.
// go-zero arms through a channel to its one goroutine, several times
// slower: it gets gozeroExpiryLead, so that on a busy machine its arming
// does not run into its firing.
const (
	expiryLead       = 2 * time.Second
	gozeroExpiryLead = 6 * time.Second
)

// BenchmarkExpiry: 10^6 timers due within one second on the real clock, the
// wheel's driver running. Deadlines are uniform in [lead, lead+1s) after the
// start, armed in random order. Per run it reports
//
//	fire-cpu-sec/op  process CPU (user+sys, all threads, GC included) from
//	                 the end of arming until the last callback has run
//	cpu-sec/op       the same from the start of arming
//	wall-sec/op      wall time from the first deadline to the last callback
//	max-goroutines   the most goroutines seen (sampled every 5 ms)
//
// The callback is shared: it counts firings and signals when all have run.
//
// state=cold is the first mass expiry of the process, state=warm the one
// after it. They differ for the runtime: its first one creates up to a
// million goroutines from scratch, later ones reuse the goroutine structures
// (and, until a GC frees them, the stacks) that the first left behind, and
// cost several times less CPU. cmd/report therefore runs this benchmark with
// -count=1 -benchtime=1x in a fresh process per sample; with -count=N in one
// process, only the first state=cold sample is cold.
func BenchmarkExpiry(b *testing.B) {
	const n = million
	r := rand.New(rand.NewPCG(5, 6))
	offsets := make([]time.Duration, n)
	for i := range offsets {
		offsets[i] = time.Duration(r.Int64N(int64(time.Second)))
	}
	deadlines := make([]time.Time, n)
	for _, im := range impls {
		b.Run("impl="+im.name, func(b *testing.B) {
			for _, state := range []string{"cold", "warm"} {
				b.Run("timers=1000000/state="+state, func(b *testing.B) {
					b.ReportAllocs()
					var fireCPU, cpu, wall time.Duration
					var maxG atomic.Int64
					for b.Loop() {
						s := im.new(b, n)
						all := newCountdown(n)
						f := all.fire
						settle()
						stopSampling := sampleGoroutines(&maxG)
						cpu0, t0 := cpuTime(), time.Now()
						lead := expiryLead
						if im.name == "gozero" {
							lead = gozeroExpiryLead
						}
						first := t0.Add(lead)
						for i, off := range offsets {
							deadlines[i] = first.Add(off)
						}
						s.armAt(deadlines, f)
						cpu1, armed := cpuTime(), time.Now()
						if armed.After(first) {
							b.Logf("arming took %v, longer than the %v lead: firing overlapped it", armed.Sub(t0), lead)
						}
						all.wait(b, "timers fired")
						cpu2, end := cpuTime(), time.Now()
						stopSampling()
						s.close()
						fireCPU += cpu2 - cpu1
						cpu += cpu2 - cpu0
						wall += end.Sub(first)
					}
					per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
					b.ReportMetric(per(fireCPU), "fire-cpu-sec/op")
					b.ReportMetric(per(cpu), "cpu-sec/op")
					b.ReportMetric(per(wall), "wall-sec/op")
					b.ReportMetric(float64(maxG.Load()), "max-goroutines")
					settle()
				})
			}
		})
	}
}

// cpuTime is the CPU time (user + system) this process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sampleGoroutines records the largest runtime.NumGoroutine it sees in max
// until the returned function is called.
func sampleGoroutines(max *atomic.Int64) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if g := int64(runtime.NumGoroutine()); g > max.Load() {
				max.Store(g)
			}
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(quit); <-done }
}

// BenchmarkAdvance reports the wheel's cost per fired timer in Advance
// (ns/timer): timers are armed 30–60 s out, as the live timers are, then the
// clock moves past all of them and Advance fires them; only the Advance calls
// are timed (ns/op also counts the arming; ignore it).
//
//	drive=jump: one Advance after a single clock.Mock.Add past every deadline;
//	            the cascade from the seconds level runs inside it.
//	drive=next: the clock steps to each h.Next() in turn and Advance runs
//	            there, as the driver goroutine does: one Advance per due tick
//	            and per cascade, each firing a few timers.
//
// clock.Mock.Add and Set sleep 1 ms per call (to let other goroutines run),
// so drive=next uses stepClock, whose time is a plain field.
func BenchmarkAdvance(b *testing.B) {
	b.Run("impl=wheel", func(b *testing.B) {
		for _, n := range []int{1_000, million} {
			b.Run("drive=jump/timers="+strconv.Itoa(n), func(b *testing.B) {
				mock := clock.NewMock()
				h, err := timingwheel.New(timingwheel.WithClock(mock))
				if err != nil {
					b.Fatal(err)
				}
				benchAdvance(b, h, n, h.Advance, func(d time.Duration) { mock.Add(d) })
			})
			b.Run("drive=next/timers="+strconv.Itoa(n), func(b *testing.B) {
				sc := &stepClock{Clock: clock.NewMock(), now: time.Unix(0, 0)}
				h, err := timingwheel.New(timingwheel.WithClock(sc))
				if err != nil {
					b.Fatal(err)
				}
				benchAdvance(b, h, n, func() int {
					fired, idle := 0, 0
					for {
						next, ok := h.Next()
						if !ok {
							return fired
						}
						if next.After(sc.now) {
							sc.now = next
						}
						ran := h.Advance()
						if fired += ran; ran == 0 {
							if idle++; idle > 100 {
								b.Fatalf("Next keeps returning %v but Advance fires nothing", next)
							}
						} else {
							idle = 0
						}
					}
				}, nil)
			})
		}
	})
	settle()
}

// benchAdvance arms n timers per iteration 30–60 s from now, calls jump
// (untimed) if it is not nil, then times drive, which must fire them all.
func benchAdvance(b *testing.B, h *timingwheel.Hierarchy, n int, drive func() int, jump func(time.Duration)) {
	b.ReportAllocs()
	var spent time.Duration
	fired := 0
	for b.Loop() {
		for i := range n {
			h.AfterFunc(farDuration(i), noop)
		}
		if jump != nil {
			jump(farMin + farSpread + time.Second)
		}
		t0 := time.Now()
		got := drive()
		spent += time.Since(t0)
		if got != n || h.Len() != 0 {
			b.Fatalf("drive fired %d of %d timers; %d still armed", got, n, h.Len())
		}
		fired += got
	}
	b.ReportMetric(float64(spent.Nanoseconds())/float64(fired), "ns/timer")
}

// stepClock is a clock.Clock whose time moves only when now is set, at no
// cost: clock.Mock's Set and Add sleep 1 ms each. Only the methods that read
// the time are its own; not safe for concurrent use (no driver runs here).
type stepClock struct {
	clock.Clock
	now time.Time
}

func (c *stepClock) Now() time.Time                  { return c.now }
func (c *stepClock) Since(t time.Time) time.Duration { return c.now.Sub(t) }
func (c *stepClock) Until(t time.Time) time.Duration { return t.Sub(c.now) }
