package bench

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel"
)

// Timers held by value: a timingwheel.Timer can be a field of the caller's
// own struct (a connection, a request), bound once with Init and then armed
// with Reset and disarmed with Stop, none of which allocates.

// heldTimer stands for such a struct. The padding keeps the timers of
// different goroutines off each other's cache lines.
type heldTimer struct {
	t timingwheel.Timer
	_ [128]byte
}

// BenchmarkByValue: arm a timer 30–60 s out and stop it, next to 10^6 live
// timers, once per operation; mode=loop on one goroutine (b.Loop),
// mode=parallel from parallelism*GOMAXPROCS goroutines, each with its own
// timer.
//
//	impl=wheel           a timingwheel.Timer held by value, Init once:
//	                     t.Reset(d); t.Stop()
//	impl=runtime         time.AfterFunc(d, f).Stop(), a new timer each time
//	impl=runtime-reused  one *time.Timer per goroutine, made once:
//	                     t.Reset(d); t.Stop()
//
// impl=runtime-reused is the runtime's closest equivalent of a timer held
// by value: the timer is allocated once, up front.
func BenchmarkByValue(b *testing.B) {
	for _, impl := range []string{"wheel", "runtime", "runtime-reused"} {
		live := "runtime"
		if impl == "wheel" {
			live = "wheel"
		}
		b.Run("impl="+impl, func(b *testing.B) {
			var s subject
			load := func(b *testing.B) subject {
				if s == nil {
					s = implNamed(live)(b, million)
					s.load()
					settle()
				}
				return s
			}
			b.Run("live=1000000/mode=loop", func(b *testing.B) {
				s := load(b)
				b.ReportAllocs()
				switch impl {
				case "wheel":
					c := new(heldTimer)
					c.t.Init(s.(*wheelSubject).h, noop)
					i := 0
					for b.Loop() {
						c.t.Reset(farDurations[i&durMask])
						c.t.Stop()
						i++
					}
				case "runtime":
					s.churnLoop(b)
				case "runtime-reused":
					t := time.AfterFunc(time.Hour, noop)
					t.Stop()
					i := 0
					for b.Loop() {
						t.Reset(farDurations[i&durMask])
						t.Stop()
						i++
					}
				}
			})
			b.Run("live=1000000/mode=parallel", func(b *testing.B) {
				s := load(b)
				g := parallelism * runtime.GOMAXPROCS(0)
				held := make([]heldTimer, g)
				reused := make([]*time.Timer, g)
				for i := range g {
					if impl == "wheel" {
						held[i].t.Init(s.(*wheelSubject).h, noop)
					}
					reused[i] = time.AfterFunc(time.Hour, noop)
					reused[i].Stop()
				}
				var next atomic.Int64
				b.ReportAllocs()
				b.SetParallelism(parallelism)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					me := int(next.Add(1)-1) % g
					i := me * 4099
					switch impl {
					case "wheel":
						t := &held[me].t
						for pb.Next() {
							t.Reset(farDurations[i&durMask])
							t.Stop()
							i++
						}
					case "runtime":
						s.(parallelChurner).churnParallel(pb, i)
					case "runtime-reused":
						t := reused[me]
						for pb.Next() {
							t.Reset(farDurations[i&durMask])
							t.Stop()
							i++
						}
					}
				})
			})
			if s != nil {
				s.close()
				settle()
			}
		})
	}
}

// BenchmarkHeapByValue reports heap bytes per timer held by value
// (B/timer): HeapAlloc after a GC, before and after making a
// []struct{ t timingwheel.Timer } of 10^6 and arming each 30–60 s out,
// divided by 10^6. The slice is counted: it is where the timers live. In a
// real program the Timer is a field of a struct the program has anyway, so
// this is what holding a timer adds to it. Compare BenchmarkHeap, where each
// timer is allocated by AfterFunc.
func BenchmarkHeapByValue(b *testing.B) {
	b.Run("impl=wheel", func(b *testing.B) {
		b.Run("live=1000000", func(b *testing.B) {
			reportHeapPer(b, "B/timer", million, func(measure func(arm func())) {
				h := startedWheel(b)
				var ts []struct{ t timingwheel.Timer }
				measure(func() {
					ts = make([]struct{ t timingwheel.Timer }, million)
					for i := range ts {
						ts[i].t.Init(h, noop).Reset(farDuration(i))
					}
				})
				h.Stop()
				for i := range ts {
					ts[i].t.Stop()
				}
			})
		})
	})
}
