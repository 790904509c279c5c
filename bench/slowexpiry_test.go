package bench

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/benbjohnson/clock"

	"github.com/timingwheel/timingwheel"
)

// Mass expiry with a slow callback. A real expiry does work: it closes a
// socket, logs, frees a session. timingwheel runs callbacks one after the
// other on the goroutine that advances it; the runtime starts a goroutine
// per expired timer, so its callbacks spread over every core.

// slowCallback is how long each callback keeps its CPU busy: about the cost
// of closing a TCP connection.
const slowCallback = 2 * time.Microsecond

// newParallelWheel returns a hierarchy driven by c whose Advance runs
// callbacks on several goroutines, or is nil while the library has no such
// option; BenchmarkSlowExpiry then leaves impl=wheel-parallel out. It is set
// by parallelcb_test.go, which builds only with -tags parallelcallbacks.
var newParallelWheel func(c clock.Clock) (*timingwheel.Hierarchy, error)

// burnIters is how many rounds of burn take slowCallback of CPU, measured
// once per process with the thread's CPU clock (the median of five), so
// that a busy machine stealing the CPU does not change the callback.
var burnIters = sync.OnceValue(func() int {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n := 1 << 12
	for {
		t0 := threadCPU()
		burn(n)
		if threadCPU()-t0 >= 5*time.Millisecond {
			break
		}
		n *= 2
	}
	var took [5]time.Duration
	for i := range took {
		t0 := threadCPU()
		burn(n)
		took[i] = threadCPU() - t0
	}
	slices.Sort(took[:])
	return max(1, int(float64(n)*float64(slowCallback)/float64(took[len(took)/2])))
})

// callbackCPU is the CPU time one burn(iters) takes, averaged over 1000.
func callbackCPU(iters int) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := threadCPU()
	for range 1000 {
		burn(iters)
	}
	return (threadCPU() - t0) / 1000
}

// threadCPU is the CPU time the calling thread has used
// (CLOCK_THREAD_CPUTIME_ID, nanosecond resolution).
func threadCPU() time.Duration {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		panic(e)
	}
	return time.Duration(ts.Nano())
}

var burnSink atomic.Uint64

// burn keeps a CPU busy for n rounds of a multiply-add chain that the
// compiler cannot drop (its result is published).
func burn(n int) {
	x := uint64(n)
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
	}
	burnSink.Add(x)
}

// BenchmarkSlowExpiry: 10^5 timers whose callback burns slowCallback of
// CPU; a fresh set per iteration. due=spread: deadlines spread uniformly
// over one second, on the real clock, each implementation firing as the
// deadlines come (what a server sees when connections idle out over a
// second). due=burst: all 10^5 due at once (a crowd that idled out at the
// same instant, or a driver that fell a second behind). Per iteration it
// reports
//
//	cpu-sec/op      process CPU (user + system, all threads) from the end of
//	                arming until the last callback returned
//	lag-sec/op      wall time from the last deadline until the last callback
//	                returned: how far behind expiry ran
//	wall-sec/op     wall time from the first deadline until the last callback
//	                returned (with due=spread at least the 1 s spread)
//	callback-us     the callback's CPU time, measured, for reference
//	max-goroutines  the most goroutines seen (sampled every 5 ms)
//
//	impl=wheel           due=spread: the real clock and the driver (h.Start);
//	                     callbacks run one after the other on the driver's
//	                     goroutine, tick by tick. due=burst: a clock.Mock
//	                     moved past every deadline, then one h.Advance(): all
//	                     10^5 callbacks run in it, one after the other (its
//	                     wall and lag are both the Advance)
//	impl=wheel-parallel  due=burst with parallel callbacks, once the library
//	                     has the option (see newParallelWheel)
//	impl=runtime         time.AfterFunc on the real clock; each expiry runs
//	                     its callback in a new goroutine
//
// Run it with -benchtime=1x in a fresh process, as BenchmarkExpiry: the
// runtime's first goroutine burst in a process costs more than later ones.
func BenchmarkSlowExpiry(b *testing.B) {
	const n = 100_000
	r := rand.New(rand.NewPCG(9, 10))
	offsets := make([]time.Duration, n)
	last := time.Duration(0)
	for i := range offsets {
		offsets[i] = time.Duration(r.Int64N(int64(time.Second)))
		last = max(last, offsets[i])
	}
	iters := burnIters()
	callbackCost := float64(callbackCPU(iters)) / float64(time.Microsecond)

	// report reports the totals of b.N iterations per iteration, and the
	// callback's measured cost, then collects the garbage left behind.
	report := func(b *testing.B, cpu, lag, wall time.Duration, maxG int64) {
		per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
		b.ReportMetric(per(cpu), "cpu-sec/op")
		b.ReportMetric(per(lag), "lag-sec/op")
		b.ReportMetric(per(wall), "wall-sec/op")
		b.ReportMetric(callbackCost, "callback-us")
		b.ReportMetric(float64(maxG), "max-goroutines")
		settle()
	}
	wheel := func(b *testing.B, newH func(clock.Clock) (*timingwheel.Hierarchy, error)) {
		var cpu, wall time.Duration
		var maxG atomic.Int64
		b.ReportAllocs()
		for b.Loop() {
			mock := clock.NewMock()
			h, err := newH(mock)
			if err != nil {
				b.Fatal(err)
			}
			var fired atomic.Int64
			f := func() { burn(iters); fired.Add(1) }
			// Armed from one goroutine per core, as a server's connections
			// are: each core's timers land in its own shard.
			var arming sync.WaitGroup
			procs := runtime.GOMAXPROCS(0)
			for p := range procs {
				arming.Go(func() {
					for i := p; i < len(offsets); i += procs {
						h.AfterFunc(farMin+offsets[i], f)
					}
				})
			}
			arming.Wait()
			mock.Add(farMin + time.Second)
			settle()
			stopSampling := sampleGoroutines(&maxG)
			cpu0, t0 := cpuTime(), time.Now()
			ran := h.Advance()
			cpu1, t1 := cpuTime(), time.Now()
			stopSampling()
			if ran != n || fired.Load() != n {
				b.Fatalf("Advance ran %d callbacks (%d completed), want %d", ran, fired.Load(), n)
			}
			cpu += cpu1 - cpu0
			wall += t1.Sub(t0)
		}
		report(b, cpu, wall, wall, maxG.Load()) // lag and wall are both the Advance
	}
	const name = "timers=100000/callback=2us"
	// onRealClock measures expiry on the real clock. setup makes what one
	// iteration arms its timers in, and returns arm, which arms one timer
	// at a deadline, and the teardown. The deadlines start lead from now,
	// spread over the offsets, or all at that instant with burst.
	onRealClock := func(b *testing.B, burst bool, setup func() (arm func(at time.Time, f func()), teardown func())) {
		const lead = 500 * time.Millisecond // arming 10^5 timers takes well under this
		spread := last
		if burst {
			spread = 0
		}
		var cpu, wall, lag time.Duration
		var maxG atomic.Int64
		b.ReportAllocs()
		for b.Loop() {
			arm, teardown := setup()
			all := newCountdown(n)
			f := func() {
				burn(iters)
				all.fire()
			}
			settle()
			stopSampling := sampleGoroutines(&maxG)
			first := time.Now().Add(lead)
			for _, off := range offsets {
				if burst {
					off = 0
				}
				arm(first.Add(off), f)
			}
			cpu0, armed := cpuTime(), time.Now()
			if armed.After(first) {
				b.Logf("arming took longer than the %v lead: firing overlapped it", lead)
			}
			all.wait(b, "callbacks ran")
			cpu1, end := cpuTime(), time.Now()
			stopSampling()
			teardown()
			cpu += cpu1 - cpu0
			wall += end.Sub(first)
			lag += end.Sub(first.Add(spread))
		}
		report(b, cpu, lag, wall, maxG.Load())
	}
	runtimeTimers := func() (func(time.Time, func()), func()) {
		return func(at time.Time, f func()) { time.AfterFunc(time.Until(at), f) }, func() {}
	}
	b.Run("impl=wheel", func(b *testing.B) {
		b.Run("due=spread/"+name, func(b *testing.B) {
			onRealClock(b, false, func() (func(time.Time, func()), func()) {
				h := startedWheel(b)
				return func(at time.Time, f func()) { h.AtFunc(at, f) }, h.Stop
			})
		})
		b.Run("due=burst/"+name, func(b *testing.B) {
			wheel(b, func(c clock.Clock) (*timingwheel.Hierarchy, error) { return timingwheel.New(timingwheel.WithClock(c)) })
		})
	})
	if newParallelWheel != nil {
		b.Run("impl=wheel-parallel", func(b *testing.B) {
			b.Run("due=burst/"+name, func(b *testing.B) { wheel(b, newParallelWheel) })
		})
	}
	b.Run("impl=runtime", func(b *testing.B) {
		b.Run("due=spread/"+name, func(b *testing.B) { onRealClock(b, false, runtimeTimers) })
		b.Run("due=burst/"+name, func(b *testing.B) { onRealClock(b, true, runtimeTimers) })
	})
}
