package timingwheel

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A ResetEvery racing other ops on the same timer (ResetAt, Reset, Stop)
// and an Advance that may fire the timer's arming is linearizable
// (docs/guarantees.md, "Periodic timers", "Exactly once"): the ops'
// results, whether the Advance fired the timer, and what the timer does
// afterwards (Deadline, Len, a run owed on the executor, the ticks of its
// later runs) are those of some order of the ops and the firing, each
// taking effect at once. The clock stands still during the race.

// linOp is one racing op.
type linOp struct {
	kind int   // cmResetEvery, cmResetAt, cmReset or cmStop
	p    int64 // ResetEvery: the period
	d    int64 // ResetAt: the deadline (ns since the origin); Reset: the duration
}

// linState is the timer's state in a linearization.
type linState struct {
	kind    int // linIdle, linOneShot, linPeriodic, linOwed
	d, a, p int64
}

const (
	linIdle     = iota
	linOneShot  // armed for d
	linPeriodic // runs at a+k·p
	linOwed     // an executor one-shot that fired: its run is pending
)

// linOutcome is what a linearization ends in.
type linOutcome struct {
	st    linState
	rets  []bool
	fires int
}

// linearizations returns the outcomes of every order of ops and of the
// Advance of tick CT, which fires a one-shot arming due by then once (a
// periodic arming armed at C is never due by CT).
func linearizations(h *Hierarchy, exec bool, C, CT int64, init linState, ops []linOp) []linOutcome {
	var outs []linOutcome
	var rec func(st linState, used, rets []bool, fires int, fired bool)
	rec = func(st linState, used, rets []bool, fires int, fired bool) {
		all := true
		for i, op := range ops {
			if used[i] {
				continue
			}
			all = false
			var ns linState
			switch op.kind {
			case cmResetEvery:
				ns = linState{kind: linPeriodic, a: C, p: op.p}
			case cmResetAt:
				ns = linState{kind: linOneShot, d: op.d}
			case cmReset:
				ns = linState{kind: linOneShot, d: C + op.d}
			}
			u, r := slices.Clone(used), slices.Clone(rets)
			u[i], r[i] = true, st.kind != linIdle
			rec(ns, u, r, fires, fired)
		}
		if !fired {
			if st.kind == linOneShot && h.dueTick(st.d) <= CT {
				ns := linState{}
				if exec {
					ns = linState{kind: linOwed, d: st.d}
				}
				rec(ns, used, rets, fires+1, true)
			}
			rec(st, used, rets, fires, true)
			return
		}
		if all {
			outs = append(outs, linOutcome{st, rets, fires})
		}
	}
	rec(init, make([]bool, len(ops)), make([]bool, len(ops)), 0, false)
	return outs
}

func runLinearizable(t *testing.T, seed uint64, shards int, parallel, exec bool, rounds int) {
	opts := []Option{WithTick(time.Millisecond), WithLevels(8, 4, 4), WithShards(shards)}
	if parallel {
		opts = append(opts, WithParallelCallbacks())
	}
	h, clk := newFake(t, opts...)
	tick := h.tick
	rnd := rand.New(rand.NewPCG(seed, 5))
	q := &queue{}
	var fired atomic.Int64
	var mu sync.Mutex
	var firedAt []int64 // the ticks of the runs after the race
	var curTick atomic.Int64
	f := func() {
		fired.Add(1)
		mu.Lock()
		firedAt = append(firedAt, curTick.Load())
		mu.Unlock()
	}
	var tm Timer
	if exec {
		tm.InitOn(h, q.exec, f)
	} else {
		tm.Init(h, f)
	}
	periods := []float64{0.3, 0.7, 1, 1.5, 3.3, 7}
	period := func() int64 { return int64(periods[rnd.IntN(len(periods))] * float64(tick)) }
	for round := range rounds {
		// The clock a random offset into a tick well ahead.
		clk.Add(time.Duration(50*tick + rnd.Int64N(tick)))
		C := h.offset(clk.Now())
		CT := floorDiv(C, tick)
		advanceWithin(t, h, "the move to the round's clock")
		q.runAll()
		fired.Store(0)
		// The arming the race starts from: a one-shot due by CT (the
		// Advance may fire it), one due later, or a periodic one.
		var init linState
		switch rnd.IntN(3) {
		case 0:
			init = linState{kind: linOneShot, d: C - rnd.Int64N(tick)}
		case 1:
			init = linState{kind: linOneShot, d: C + 1 + rnd.Int64N(6*tick)}
		case 2:
			init = linState{kind: linPeriodic, a: C, p: period()}
		}
		if init.kind == linPeriodic {
			tm.ResetEvery(time.Duration(init.p))
		} else {
			tm.ResetAt(h.origin.Add(time.Duration(init.d)))
		}
		ops := []linOp{{kind: cmResetEvery, p: period()}}
		for range 1 + rnd.IntN(2) {
			op := linOp{kind: []int{cmResetAt, cmReset, cmStop}[rnd.IntN(3)]}
			switch op.kind {
			case cmResetAt:
				op.d = C + 1 + rnd.Int64N(10*tick)
				if rnd.IntN(3) == 0 {
					op.d = C + ops[0].p // the ResetEvery's first instant
				}
			case cmReset:
				op.d = 1 + rnd.Int64N(10*tick)
			}
			ops = append(ops, op)
		}
		// The race: the ops, the Advance of CT and a reader, each after a
		// few yields.
		rets := make([]bool, len(ops))
		var wg sync.WaitGroup
		start := make(chan struct{})
		race := func(f func()) {
			spins := rnd.IntN(5)
			wg.Go(func() {
				<-start
				for range spins {
					runtime.Gosched()
				}
				f()
			})
		}
		for i, op := range ops {
			race(func() {
				switch op.kind {
				case cmResetEvery:
					rets[i] = tm.ResetEvery(time.Duration(op.p))
				case cmResetAt:
					rets[i] = tm.ResetAt(h.origin.Add(time.Duration(op.d)))
				case cmReset:
					rets[i] = tm.Reset(time.Duration(op.d))
				case cmStop:
					rets[i] = tm.Stop()
				}
			})
		}
		race(func() { curTick.Store(CT); h.Advance() })
		race(func() { _, _, _ = tm.Deadline(), h.Now(), h.Len() })
		close(start)
		waitWithin(t, 10*time.Second, &wg, "the racing ops and Advance")
		firedInRace := fired.Load()
		// What the timer does afterwards: Deadline and Len now, a run owed
		// on the executor, then its runs over 25 ticks.
		dl, ln := h.offset(tm.Deadline()), h.Len()
		q.runAll()
		afterQueue := fired.Load()
		mu.Lock()
		firedAt = nil
		mu.Unlock()
		for k := int64(1); k <= 25; k++ {
			curTick.Store(CT + k)
			advanceTo(t, h, clk, h.origin.Add(time.Duration((CT+k)*tick)), "the runs after the race")
			q.runAll()
		}
		mu.Lock()
		sched := firedAt
		mu.Unlock()
		outs := linearizations(h, exec, C, CT, init, ops)
		var tried []string
		match := slices.ContainsFunc(outs, func(o linOutcome) bool {
			// On an executor, the firing calls f only once its run does.
			wantRace, wantLen, wantQueue, wantDl := int64(o.fires), 0, firedInRace, dl
			if exec {
				wantRace = 0
			}
			var want []int64
			switch o.st.kind {
			case linOneShot:
				wantLen, wantDl = 1, o.st.d
				want = []int64{h.dueTick(o.st.d)}
			case linPeriodic:
				wantLen, wantDl = 1, o.st.a+o.st.p
				for k, next := int64(1), o.st.a+o.st.p; k <= 25; k++ {
					if T := CT + k; h.dueTick(next) <= T {
						want = append(want, T)
						next = nextInstant(o.st.a, o.st.p, h.tickNanos(T))
					}
				}
			case linOwed:
				wantLen, wantQueue = 1, firedInRace+1
			}
			tried = append(tried, fmt.Sprintf("  %+v rets=%v fires=%d: runs at %v, Len %d", o.st, o.rets, o.fires, want, wantLen))
			return slices.Equal(rets, o.rets) && firedInRace == wantRace && dl == wantDl &&
				ln == wantLen && afterQueue == wantQueue && slices.Equal(want, sched)
		})
		if !match {
			t.Fatalf("round %d: no linearization: C=%d CT=%d init=%+v ops=%+v rets=%v fired in the race %d, after the queue %d, Len %d, Deadline %d, runs at %v\nlinearizations:\n%s",
				round, C, CT, init, ops, rets, firedInRace, afterQueue, ln, dl, sched, strings.Join(tried, "\n"))
		}
		tm.Stop()
		q.runAll()
		if h.Len() != 0 {
			t.Fatalf("round %d: Len %d after Stop", round, h.Len())
		}
		mustCheck(t, h)
	}
}

func TestPeriodic_ResetEveryRacingOpsAndAdvanceIsLinearizable(t *testing.T) {
	rounds := volume(25, 120)
	seed := uint64(0)
	for shards := 1; shards <= 4; shards++ {
		for _, parallel := range []bool{false, true} {
			for _, exec := range []bool{false, true} {
				seed++
				t.Run(fmt.Sprintf("shards%d/parallel%v/exec%v", shards, parallel, exec), func(t *testing.T) {
					runLinearizable(t, seed, shards, parallel, exec, rounds)
				})
			}
		}
	}
}
