package bench

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/wheelctx"
)

// Request deadlines: wheelctx.WithTimeout against context.WithTimeout,
// each created and cancelled once per operation (a request that completes
// before its deadline), next to ctxPending contexts of the same kind that
// are still waiting for theirs.
//
//	impl=wheel    wheelctx.WithTimeout(h, parent, d), h's driver running
//	impl=context  context.WithTimeout(parent, d)
//	parent=background  context.Background(): nothing to register with
//	parent=cancel      one context.WithCancel parent shared by every
//	                   goroutine: the new context registers with it
//	                   (context.AfterFunc for the wheel, the parent's
//	                   children map for package context)
//	parent=own         a context.WithCancel parent of its own per
//	                   request, made before and cancelled after it (a
//	                   server's request context): its WithCancel and
//	                   cancel are in both implementations' times
//	done=false  cancel right away; done=true  call Done first, as a
//	            select on ctx.Done() does
//
// BenchmarkWithTimeout runs on one goroutine (b.Loop);
// BenchmarkWithTimeoutParallel from parallelism*GOMAXPROCS goroutines.
// Both implementations' pending contexts are live for the whole benchmark,
// and the implementations alternate innermost, so that on a shared machine
// both see the same load. Besides sec/op (wall clock), each reports
// cpu-ns/op: the process's CPU time (all threads, garbage collection
// included) per operation, which other processes on the machine disturb
// much less.
//
// BenchmarkWithTimeoutFire is create + fire: contexts of 1 ms, a batch of
// fireBatch at a time, each batch waited for (with Done, or by polling Err
// after a sleep when done=false) and then cancelled; its cpu-ns/op is the
// measure (the wall clock mostly waits).
//
// BenchmarkWithTimeoutLive and BenchmarkWithTimeoutLiveParallel are the
// same next to 10^6 more live timers of each implementation (idle
// connections' timers: time.AfterFunc for package context, whose runtime
// timer heap then holds 1.1*10^6 timers, and h.AfterFunc for the wheel),
// live for the whole benchmark as the pending contexts are.

const ctxPending = 100_000

// ctxImpl makes a context with a timeout, the way one implementation does.
type ctxImpl struct {
	name string
	with func(context.Context, int) (context.Context, context.CancelFunc)
	// withD makes one with a timeout of d.
	withD func(context.Context, time.Duration) (context.Context, context.CancelFunc)
}

// ctxLoads holds both implementations and their pending contexts.
type ctxLoads struct {
	h       *timingwheel.Hierarchy
	impls   []ctxImpl
	cancels []context.CancelFunc
	stops   []func() bool // of the live timers
}

func newCtxLoads(tb testing.TB, live int) *ctxLoads {
	h := startedWheel(tb)
	l := &ctxLoads{h: h, impls: []ctxImpl{
		{"wheel", func(p context.Context, i int) (context.Context, context.CancelFunc) {
			return wheelctx.WithTimeout(h, p, farDuration(i))
		}, func(p context.Context, d time.Duration) (context.Context, context.CancelFunc) {
			return wheelctx.WithTimeout(h, p, d)
		}},
		{"context", func(p context.Context, i int) (context.Context, context.CancelFunc) {
			return context.WithTimeout(p, farDuration(i))
		}, context.WithTimeout},
	}}
	for _, extra := range extraCtxImpls {
		l.impls = append(l.impls, extra(h))
	}
	bg := context.Background()
	for _, im := range l.impls {
		for i := range ctxPending {
			_, cancel := im.withD(bg, loadDuration(i))
			l.cancels = append(l.cancels, cancel)
		}
	}
	for i := range live {
		l.stops = append(l.stops, time.AfterFunc(loadDuration(i), noop).Stop, h.AfterFunc(loadDuration(i), noop).Stop)
	}
	settle()
	return l
}

func (l *ctxLoads) close() {
	for _, c := range l.cancels {
		c()
	}
	for _, stop := range l.stops {
		stop()
	}
	l.h.Stop()
	settle()
}

// loadDuration is the timeout of the i-th pending context or live timer
// of the load: an hour and 30–60 s, so that none fires while the
// benchmarks run (farDuration's 30–60 s alone did, in benchmarks of
// minutes, which then ran next to no load at all after their first 30 s).
func loadDuration(i int) time.Duration { return time.Hour + farDuration(i) }

// extraCtxImpls, if set by a file of a local run, add implementations
// to compare (an earlier version of the library's, say).
var extraCtxImpls []func(h *timingwheel.Hierarchy) ctxImpl

// A ctxParent is a kind of parent: make returns the parent the benchmark's
// goroutine shares, or, if perOp, nil, and each operation makes its own
// with context.WithCancel and cancels it after.
type ctxParent struct {
	name  string
	perOp bool
	make  func() (context.Context, context.CancelFunc)
}

// parents names the parent kinds.
var parents = []ctxParent{
	{"background", false, func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
	{"cancel", false, func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
	{"own", true, func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
}

// ctxOp is one operation: a context made under parent (or under a parent
// of its own), Done called if done, then cancelled.
func ctxOp(with func(context.Context, int) (context.Context, context.CancelFunc), pa ctxParent, parent context.Context, done bool, i int) {
	var stop context.CancelFunc
	if pa.perOp {
		parent, stop = pa.make()
	}
	ctx, cancel := with(parent, i)
	if done {
		peekDone(ctx)
	}
	cancel()
	if stop != nil {
		stop()
	}
}

// forEachCtxCase runs body as parent=<p>/done=<d>/impl=<i>/pending=100000,
// with /live=<live> after it if live > 0.
func forEachCtxCase(b *testing.B, live int, body func(b *testing.B, im ctxImpl, pa ctxParent, done bool)) {
	l := newCtxLoads(b, live)
	defer l.close()
	suffix := ""
	if live > 0 {
		suffix = "/live=" + strconv.Itoa(live)
	}
	for _, pa := range parents {
		for _, done := range []bool{false, true} {
			for _, im := range l.impls {
				name := "parent=" + pa.name + "/done=" + strconv.FormatBool(done) + "/impl=" + im.name + "/pending=100000" + suffix
				b.Run(name, func(b *testing.B) { body(b, im, pa, done) })
			}
		}
	}
}

func BenchmarkWithTimeout(b *testing.B)     { benchWithTimeout(b, 0) }
func BenchmarkWithTimeoutLive(b *testing.B) { benchWithTimeout(b, million) }

func BenchmarkWithTimeoutParallel(b *testing.B)     { benchWithTimeoutParallel(b, 0) }
func BenchmarkWithTimeoutLiveParallel(b *testing.B) { benchWithTimeoutParallel(b, million) }

func benchWithTimeout(b *testing.B, live int) {
	forEachCtxCase(b, live, func(b *testing.B, im ctxImpl, pa ctxParent, done bool) {
		parent, stop := pa.make()
		defer stop()
		with, i := im.with, 0
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			ctxOp(with, pa, parent, done, i)
			i++
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	})
}

func benchWithTimeoutParallel(b *testing.B, live int) {
	forEachCtxCase(b, live, func(b *testing.B, im ctxImpl, pa ctxParent, done bool) {
		shared, stopShared := pa.make()
		defer stopShared()
		var next atomic.Int64
		with := im.with
		b.ReportAllocs()
		b.SetParallelism(parallelism)
		b.ResetTimer()
		cpu := cpuTime()
		b.RunParallel(func(pb *testing.PB) {
			i := int(next.Add(1)) * 4099
			for pb.Next() {
				ctxOp(with, pa, shared, done, i)
				i++
			}
		})
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	})
}

// peekDone calls ctx.Done and looks at the channel without waiting, as a
// select on it does while the work goes on.
func peekDone(ctx context.Context) {
	select {
	case <-ctx.Done():
		panic("context done before its deadline")
	default:
	}
}

// fireBatch is how many contexts BenchmarkWithTimeoutFire makes before it
// waits for them to fire.
const fireBatch = 1000

func BenchmarkWithTimeoutFire(b *testing.B)     { benchWithTimeoutFire(b, 0, 1) }
func BenchmarkWithTimeoutFireLive(b *testing.B) { benchWithTimeoutFire(b, million, 1) }

func BenchmarkWithTimeoutFireParallel(b *testing.B) {
	benchWithTimeoutFire(b, 0, parallelism*runtime.GOMAXPROCS(0))
}

func BenchmarkWithTimeoutFireLiveParallel(b *testing.B) {
	benchWithTimeoutFire(b, million, parallelism*runtime.GOMAXPROCS(0))
}

// benchWithTimeoutFire: create + fire, from goroutines goroutines, each
// making contexts of 1 ms in batches and waiting for each batch to fire.
func benchWithTimeoutFire(b *testing.B, live, goroutines int) {
	forEachCtxCase(b, live, func(b *testing.B, im ctxImpl, pa ctxParent, done bool) {
		shared, stopShared := pa.make()
		defer stopShared()
		b.ReportAllocs()
		var left atomic.Int64
		left.Store(int64(b.N))
		cpu := cpuTime()
		b.ResetTimer()
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				ctxs := make([]context.Context, 0, fireBatch)
				cancels := make([]context.CancelFunc, 0, 2*fireBatch)
				for {
					n := min(left.Add(-fireBatch)+fireBatch, fireBatch)
					if n <= 0 {
						return
					}
					for range n {
						parent := shared
						if pa.perOp {
							var stop context.CancelFunc
							parent, stop = pa.make()
							cancels = append(cancels, stop)
						}
						ctx, cancel := im.withD(parent, time.Millisecond)
						if done {
							ctx.Done()
						}
						ctxs, cancels = append(ctxs, ctx), append(cancels, cancel)
					}
					waitFired(ctxs, done)
					for _, c := range cancels {
						c()
					}
					ctxs, cancels = ctxs[:0], cancels[:0]
				}
			})
		}
		wg.Wait()
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	})
}

// waitFired waits for every context of ctxs to be done by its deadline:
// through Done if done, else by sleeping and polling Err.
func waitFired(ctxs []context.Context, done bool) {
	for _, ctx := range ctxs {
		if done {
			<-ctx.Done()
		} else {
			for ctx.Err() == nil {
				time.Sleep(200 * time.Microsecond)
			}
		}
		if ctx.Err() != context.DeadlineExceeded {
			panic("context fired with " + fmt.Sprint(ctx.Err()))
		}
	}
}

// BenchmarkWithTimeoutHeap: the heap a pending context takes (heap-B/ctx,
// after a collection, with ctxPending of them made under the parent), with
// the hierarchy's or the runtime's timer. Meant for -benchtime=1x.
func BenchmarkWithTimeoutHeap(b *testing.B) {
	h := startedWheel(b)
	defer h.Stop()
	impls := []ctxImpl{
		{"wheel", func(p context.Context, i int) (context.Context, context.CancelFunc) {
			return wheelctx.WithTimeout(h, p, farDuration(i))
		}, nil},
		{"context", func(p context.Context, i int) (context.Context, context.CancelFunc) {
			return context.WithTimeout(p, farDuration(i))
		}, nil},
	}
	for _, extra := range extraCtxImpls {
		impls = append(impls, extra(h))
	}
	for _, pa := range parents[:2] {
		for _, im := range impls {
			b.Run("parent="+pa.name+"/impl="+im.name, func(b *testing.B) {
				parent, stop := pa.make()
				defer stop()
				for b.Loop() {
					settle()
					before := heapInUse()
					cancels := make([]context.CancelFunc, ctxPending)
					for i := range cancels {
						_, cancels[i] = im.with(parent, i)
					}
					settle()
					b.ReportMetric(float64(heapInUse()-before)/ctxPending, "heap-B/ctx")
					for _, c := range cancels {
						c()
					}
				}
			})
		}
	}
}

// heapInUse returns the bytes of the heap's live objects.
func heapInUse() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
