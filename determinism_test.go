package timingwheel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestDeterminism_SameCallsSameOrderAcrossShards: with a clock given by
// WithClock, the same calls in the same order on one goroutine and the
// same clock steps run the same callbacks in the same order, also at one
// tick across shards. A seeded schedule of many timers, several sharing
// each tick, whose callbacks arm, re-arm and stop more, runs again and
// again, with the default shards and with WithShards(4): every run gives
// the first run's trace.
func TestDeterminism_SameCallsSameOrderAcrossShards(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithShards(4)}} {
		t.Run(fmt.Sprintf("%d options", len(opts)), func(t *testing.T) {
			first := seededTrace(t, opts)
			for run := range 30 {
				if got := seededTrace(t, opts); !slices.Equal(got, first) {
					t.Fatalf("run %d: the trace differs from the first run's:\n%v\nwant\n%v", run+1, got, first)
				}
			}
		})
	}
}

// seededTrace runs one seeded schedule on a new hierarchy made with opts
// and a manual clock, and returns what its callbacks did, in order.
func seededTrace(t *testing.T, opts []Option) []string {
	h, clk := newFake(t, opts...)
	r := rand.New(rand.NewPCG(45, 47))
	var trace []string
	var timers []*Timer
	keys := NewTimeouts(h, func(k int) { trace = append(trace, fmt.Sprint("key ", k)) })
	at := func() time.Duration { return time.Duration(1+r.IntN(20)) * 10 * time.Millisecond } // 20 ticks, shared
	var arm func(id int)
	arm = func(id int) {
		timers = append(timers, h.AfterFunc(at(), func() {
			trace = append(trace, fmt.Sprint("timer ", id))
			switch r.IntN(5) {
			case 0: // arm another
				arm(len(timers))
			case 1: // re-arm one, maybe fired (it may move shards)
				timers[r.IntN(len(timers))].Reset(at())
			case 2:
				timers[r.IntN(len(timers))].Stop()
			case 3:
				keys.Add(r.IntN(50), at())
			}
		}))
	}
	for i := range 300 {
		arm(i)
		if i%3 == 0 {
			keys.Add(i%50, at())
		}
	}
	for range 60 {
		clk.Add(10 * time.Millisecond)
		trace = append(trace, fmt.Sprint("advance ", h.Advance()))
	}
	return trace
}
