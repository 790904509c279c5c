package bench

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel"
)

// Request deadlines: h.WithTimeout against context.WithTimeout, each
// created and cancelled once per operation (a request that completes
// before its deadline), next to ctxPending contexts of the same kind that
// are still waiting for theirs.
//
//	impl=wheel    h.WithTimeout(parent, d), the hierarchy's driver running
//	impl=context  context.WithTimeout(parent, d)
//	parent=background  context.Background(): nothing to register with
//	parent=cancel      a context.WithCancel parent, as a server's request
//	                   context is: the new context registers with it
//	                   (context.AfterFunc for the wheel, the parent's
//	                   children map for package context)
//	done=false  cancel right away; done=true  call Done first, as a
//	            select on ctx.Done() does
//
// BenchmarkWithTimeout runs on one goroutine (b.Loop);
// BenchmarkWithTimeoutParallel from parallelism*GOMAXPROCS goroutines,
// each with a parent of its own. Both implementations' pending contexts
// are live for the whole benchmark, and the implementations alternate
// innermost, so that on a shared machine both see the same load. Besides
// sec/op (wall clock), each reports cpu-ns/op: the process's CPU time
// (all threads, garbage collection included) per operation, which other
// processes on the machine disturb much less.
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
			return h.WithTimeout(p, farDuration(i))
		}},
		{"context", func(p context.Context, i int) (context.Context, context.CancelFunc) {
			return context.WithTimeout(p, farDuration(i))
		}},
	}}
	bg := context.Background()
	for _, im := range l.impls {
		for i := range ctxPending {
			_, cancel := im.with(bg, i)
			l.cancels = append(l.cancels, cancel)
		}
	}
	for i := range live {
		l.stops = append(l.stops, time.AfterFunc(farDuration(i), noop).Stop, h.AfterFunc(farDuration(i), noop).Stop)
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

// parents names the parent kinds and makes one of each.
var parents = []struct {
	name string
	make func() (context.Context, context.CancelFunc)
}{
	{"background", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
	{"cancel", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
}

// forEachCtxCase runs body as parent=<p>/done=<d>/impl=<i>/pending=100000,
// with /live=<live> after it if live > 0.
func forEachCtxCase(b *testing.B, live int, body func(b *testing.B, im ctxImpl, makeParent func() (context.Context, context.CancelFunc), done bool)) {
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
				b.Run(name, func(b *testing.B) { body(b, im, pa.make, done) })
			}
		}
	}
}

func BenchmarkWithTimeout(b *testing.B)     { benchWithTimeout(b, 0) }
func BenchmarkWithTimeoutLive(b *testing.B) { benchWithTimeout(b, million) }

func BenchmarkWithTimeoutParallel(b *testing.B)     { benchWithTimeoutParallel(b, 0) }
func BenchmarkWithTimeoutLiveParallel(b *testing.B) { benchWithTimeoutParallel(b, million) }

func benchWithTimeout(b *testing.B, live int) {
	forEachCtxCase(b, live, func(b *testing.B, im ctxImpl, makeParent func() (context.Context, context.CancelFunc), done bool) {
		parent, stop := makeParent()
		defer stop()
		with, i := im.with, 0
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			ctx, cancel := with(parent, i)
			if done {
				peekDone(ctx)
			}
			cancel()
			i++
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	})
}

func benchWithTimeoutParallel(b *testing.B, live int) {
	forEachCtxCase(b, live, func(b *testing.B, im ctxImpl, makeParent func() (context.Context, context.CancelFunc), done bool) {
		var next atomic.Int64
		with := im.with
		b.ReportAllocs()
		b.SetParallelism(parallelism)
		b.ResetTimer()
		cpu := cpuTime()
		b.RunParallel(func(pb *testing.PB) {
			parent, stop := makeParent()
			defer stop()
			i := int(next.Add(1)) * 4099
			for pb.Next() {
				ctx, cancel := with(parent, i)
				if done {
					peekDone(ctx)
				}
				cancel()
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

// BenchmarkWithTimeoutFreshParent: a request with a single deadline, under
// a context.WithCancel parent of its own that is cancelled after it (the
// request's context, as net/http's), Done called: the parent's
// WithCancel and cancel are in both implementations' times.
func BenchmarkWithTimeoutFreshParent(b *testing.B) {
	l := newCtxLoads(b, 0)
	defer l.close()
	for _, im := range l.impls {
		b.Run("impl="+im.name+"/pending=100000", func(b *testing.B) {
			with, i := im.with, 0
			bg := context.Background()
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				parent, stop := context.WithCancel(bg)
				ctx, cancel := with(parent, i)
				peekDone(ctx)
				cancel()
				stop()
				i++
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
