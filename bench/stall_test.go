package bench

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/timingwheel/timingwheel"
)

// stallRecords is the most arm+Stop calls one BenchmarkStall iteration
// records (two int64 each): enough for a second of calls at 100 ns each.
const stallRecords = 1 << 23

// BenchmarkStall measures how long other goroutines wait while the wheel
// does a large piece of work in one call. N timers (10^4, 10^5, 10^6) are
// armed due within one second, 30 s out, so that one coarse slot (the
// seconds level's) holds them all; the clock is a clock.Mock.
//
//	op=cascade  the clock moves to 30 s, the start of the slot, and
//	            h.Advance() cascades the slot down to the finest level; it
//	            fires nothing (no deadline falls on that tick)
//	op=advance  the clock moves to 31 s and h.Advance() cascades the slot
//	            and fires every timer (a no-op callback): callbacks run
//	            without the lock, so others get in between them
//	op=next     h.Next() reports the slot's cascade, in O(levels): it does
//	            not look at the timers in the slot
//	op=late     the timers are armed instead with deadlines already past
//	            (the clock and the wheel at 32 s, each deadline within the
//	            second at 30 s, in random order) and h.Advance() fires them
//	            all (a no-op callback)
//
// Meanwhile another goroutine loops h.AfterFunc(time.Hour, f).Stop(),
// timing each call. Per large call it measures
//
//	call-ms         how long the Advance or Next call took
//	max-wait-us     the longest arm+Stop among those that overlapped it
//	p99.9-wait-us   the 99.9th percentile of those
//	max-wait/call   the longest wait as a share of the call (1: a caller
//	                waited for all of it)
//	calls-during    how many arm+Stop calls overlapped it
//	quiet-max-wait-us  the longest arm+Stop in the 20 ms before the call,
//	                for comparison (GC and scheduling show up there too)
//
// and reports each as the median over the iterations (run it with
// -benchtime=Nx for N large calls), so that one call that met a hiccup of
// the machine does not stand for all; worst-max-wait/call is the largest
// share of all iterations, so that it does not go unseen either.
//
// impl=control runs the same cascades, but the other goroutine allocates
// what AfterFunc allocates (48 bytes) and never calls the wheel: its waits
// are those the machine and the Go runtime impose while both goroutines
// run (the OS scheduling another thread on the CPU, page faults), the
// floor under the wheel's.
//
// At GOMAXPROCS=1 the two goroutines take turns on one CPU, so a wait also
// includes the time the other goroutine holds it.
func BenchmarkStall(b *testing.B) {
	starts, ends := make([]int64, stallRecords), make([]int64, stallRecords)
	for _, op := range []string{"cascade", "advance", "next", "late"} {
		for _, n := range []int{10_000, 100_000, million} {
			b.Run("impl=wheel/op="+op+"/timers="+strconv.Itoa(n), func(b *testing.B) {
				stall(b, op, n, false, starts, ends)
			})
		}
	}
	for _, n := range []int{10_000, 100_000, million} {
		b.Run("impl=control/op=cascade/timers="+strconv.Itoa(n), func(b *testing.B) {
			stall(b, "cascade", n, true, starts, ends)
		})
	}
}

// stallSink keeps the control loop's allocations from being optimized away.
var stallSink *[6]int64

func stall(b *testing.B, op string, n int, control bool, starts, ends []int64) {
	// Touch the record buffers first: page faults inside the timed loop
	// would show up as waits.
	for i := range starts {
		starts[i], ends[i] = -1, -1
	}
	r := rand.New(rand.NewPCG(11, 12))
	offsets := make([]time.Duration, n)
	for i := range offsets {
		offsets[i] = time.Duration(r.Int64N(int64(time.Second)))
	}
	var call, maxWait, p999, share, during, quiet []float64
	for b.Loop() {
		mock := clock.NewMock()
		h, err := timingwheel.New(timingwheel.WithClock(mock))
		if err != nil {
			b.Fatal(err)
		}
		if op == "late" {
			mock.Add(farMin + 2*time.Second)
			h.Advance()
		}
		for _, off := range offsets {
			if op == "late" {
				h.AtFunc(mock.Now().Add(-2*time.Second+off), noop)
			} else {
				h.AfterFunc(farMin+off, noop)
			}
		}
		settle()

		var stop atomic.Bool
		done := make(chan int)
		base := time.Now()
		go func() {
			k := 0
			for ; k < len(starts) && !stop.Load(); k++ {
				t0 := time.Since(base)
				if control {
					stallSink = new([6]int64)
				} else {
					h.AfterFunc(time.Hour, noop).Stop()
				}
				starts[k], ends[k] = int64(t0), int64(time.Since(base))
			}
			done <- k
		}()
		time.Sleep(20 * time.Millisecond)
		switch op {
		case "cascade":
			mock.Add(farMin)
		case "advance":
			mock.Add(farMin + time.Second)
		}
		a0 := int64(time.Since(base))
		switch op {
		case "cascade":
			// Len is n, or n+1 while the other goroutine holds its timer.
			if ran, l := h.Advance(), h.Len(); ran != 0 || l != n+1 && l != n {
				b.Fatalf("the cascade fired %d timers; %d armed, want %d", ran, l, n)
			}
		case "advance", "late":
			if ran := h.Advance(); ran != n {
				b.Fatalf("Advance ran %d callbacks, want %d", ran, n)
			}
		case "next":
			if _, ok := h.Next(); !ok {
				b.Fatal("Next found nothing armed")
			}
		}
		a1 := int64(time.Since(base))
		time.Sleep(20 * time.Millisecond)
		stop.Store(true)
		k := <-done
		if k == len(starts) {
			b.Logf("the arm+Stop loop filled its %d records before the end", k)
		}

		var waits []int64
		var quietMax int64
		for i := range k {
			w := ends[i] - starts[i]
			switch {
			case starts[i] < a1 && ends[i] > a0:
				waits = append(waits, w)
			case ends[i] <= a0 && starts[i] >= a0-int64(20*time.Millisecond):
				quietMax = max(quietMax, w)
			}
		}
		slices.Sort(waits)
		d := float64(a1 - a0)
		call = append(call, d/1e6)
		if len(waits) > 0 {
			longest := float64(waits[len(waits)-1])
			maxWait = append(maxWait, longest/1e3)
			p999 = append(p999, float64(waits[min(len(waits)-1, len(waits)*999/1000)])/1e3)
			share = append(share, longest/d)
		}
		during = append(during, float64(len(waits)))
		quiet = append(quiet, float64(quietMax)/1e3)
		h.Stop()
	}
	b.ReportMetric(median(call), "call-ms")
	b.ReportMetric(median(maxWait), "max-wait-us")
	b.ReportMetric(median(p999), "p99.9-wait-us")
	b.ReportMetric(median(share), "max-wait/call")
	b.ReportMetric(slices.Max(append(share, 0)), "worst-max-wait/call")
	b.ReportMetric(median(during), "calls-during")
	b.ReportMetric(median(quiet), "quiet-max-wait-us")
	settle()
}

// median returns the median of v (the mean of the middle two for an even
// count), or 0 for none; it sorts v.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
