package timingwheel

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The concurrent periodic model checks periodic, one-shot and executor
// timers (docs/guarantees.md, "Periodic timers", "Exactly once",
// "Callbacks on an executor") while their owners race the Advances. Shared
// timers, held by value, a third of them on an executor and some bound
// again now and then (Init, InitOn), are stopped and re-armed (Stop,
// Reset, ResetAt, ResetEvery) at random by several goroutines and by their
// own callbacks, against one goroutine that moves the clock (by less than
// a tick, onto a tick, by jumps across coarse levels, backwards) and calls
// Advance; an executor calls the runs it is handed late, out of order and
// twice; a reader calls Now, Deadline and Len throughout. The ops on one
// timer are serialized by the model's lock of it, so the model knows their
// order, and the clock stands still during each (so it knows their now).
//
// Every callback is accounted against the model (see callback): it is on
// the right goroutine; it belongs to an arming that was due (so it is
// never early: periodic runs at their instants rounded up to a tick); a
// Stop or Reset that returned true ends an arming for good; each one-shot
// arming ends exactly once, by a callback or by a Stop or Reset that
// returned true. At quiescent points, once the executor has called every
// run it holds: no callback is owed, nothing due was missed, Len, every
// Deadline and the hierarchy's invariants match the model.
//
// Two things are looser on an executor, as Timer.InitOn documents: a run
// is one func per binding, so a run called late takes a later pending
// firing, and a periodic timer's firings whose run is still pending merge
// into one call of f. So an executor callback is timed against the latest
// Advance that may have fired it, and the model's next instant of an
// executor periodic timer is only a lower bound of the library's.

// cmArming is the model's view of a timer's arming.
type cmArming struct {
	periodic bool
	a, p     int64 // periodic: the instants are a+k·p (ns since the origin)
	next     int64 // the next run's instant, or the one-shot deadline
	seq      int64 // cmodel.advSeq when it was armed
}

// cmTimer is one shared timer and the model's view of it, guarded by mu.
type cmTimer struct {
	id  int
	mu  sync.Mutex
	tm  Timer
	gen int // bumped by each Init: a callback of an earlier binding is a failure
	// exec: bound with InitOn to the model's executor.
	exec bool

	armed bool
	cur   cmArming
	// inflight holds the deadlines of one-shot armings that a Stop or Reset
	// returning false found fired, whose callback has not been accounted.
	inflight []int64
	// orphan holds the instants of periodic armings that a Stop or Reset
	// returning true ended while a run of theirs had started: that run may
	// still be accounted, once.
	orphan []int64
	log    []string // the last ops and callbacks, for a failure's message

	// inF is 0 outside f, 1 once f has started, 2 once f has accounted
	// itself (it waits for mu first).
	inF atomic.Int32
	// execTick is the highest Advance tick at which exec was handed a run
	// of the timer; inRun is 1 while the executor calls one of its runs.
	execTick atomic.Int64
	inRun    atomic.Int32
}

// Op kinds.
const (
	cmStop = iota
	cmReset
	cmResetAt
	cmResetEvery
	cmInit
)

// cmPeriods are the periods, in ticks, that ResetEvery picks from.
var cmPeriods = []float64{0.3, 0.7, 1, 1.5, 2, 3.7, 7, 13.1, 60}

type cmodel struct {
	h        *Hierarchy
	clk      *fakeClock
	parallel bool
	timers   []*cmTimer
	// clockMu is held for writing while the clock moves and for reading
	// during an op, so that an op's now is the clock the library reads.
	clockMu sync.RWMutex
	advTick atomic.Int64 // the tick of the latest Advance
	advSeq  atomic.Int64 // the Advances started
	inAdv   atomic.Bool
	advG    atomic.Int64 // the advancing goroutine
	execG   atomic.Int64 // the executor goroutine
	execCh  chan cmRun
	drainCh chan chan struct{}

	errs    atomic.Int64
	errMu   sync.Mutex
	errList []string
	armings atomic.Int64
	runs    atomic.Int64
	// entered counts the funcs the hierarchy called as timers fired: the
	// model's callback of a timer not on the executor, exec for one that
	// is. Each adds one once it has started (see runStarted).
	entered  atomic.Int64
	progress atomic.Int64 // the Advances done, for the watchdog
}

// cmRun is a run exec was handed.
type cmRun struct {
	run func()
	ts  *cmTimer
}

// goroutineID returns the id of the calling goroutine.
func goroutineID() int64 {
	var buf [64]byte
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	id, _ := strconv.ParseInt(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// errorf records a failure; goroutines other than the test's report here,
// and the test prints the first ones.
func (x *cmodel) errorf(format string, args ...any) {
	x.errs.Add(1)
	x.errMu.Lock()
	if len(x.errList) < 20 {
		x.errList = append(x.errList, fmt.Sprintf(format, args...))
	}
	x.errMu.Unlock()
}

func (ts *cmTimer) logf(format string, args ...any) {
	ts.log = append(ts.log, fmt.Sprintf(format, args...))
	if len(ts.log) > 16 {
		ts.log = ts.log[1:]
	}
}

func (ts *cmTimer) history() string { return strings.Join(ts.log, "\n") }

func (x *cmodel) ns() int64 { return x.h.offset(x.clk.Now()) }

// callback is f of timer ts bound as generation gen; byFiring says the
// hierarchy calls it as the timer fires (not a run on the executor).
func (x *cmodel) callback(ts *cmTimer, gen int, rnd *rand.Rand, byFiring bool) {
	ts.inF.Store(1)
	defer ts.inF.Store(0)
	if byFiring {
		x.entered.Add(1) // after inF: see runStarted
	}
	// T is the tick of the Advance that fired this run, or a later one.
	var T int64
	if ts.exec {
		// f runs inside a run the executor called, never on the advancing
		// goroutine. The run may have taken a firing of the Advance under
		// way, before exec was handed it: T is the latest Advance's tick.
		if goroutineID() != x.execG.Load() {
			x.errorf("timer %d: executor callback not on the executor goroutine", ts.id)
		}
		T = max(ts.execTick.Load(), x.advTick.Load())
	} else {
		// f runs within an Advance, on the advancing goroutine unless
		// callbacks run in parallel.
		if !x.inAdv.Load() {
			x.errorf("timer %d: callback outside an Advance", ts.id)
		}
		if !x.parallel && goroutineID() != x.advG.Load() {
			x.errorf("timer %d: callback not on the advancing goroutine", ts.id)
		}
		T = x.advTick.Load()
	}
	x.runs.Add(1)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.inF.Store(2)
	ts.logf("callback T=%d seq=%d adv=%v", T, x.advSeq.Load(), x.inAdv.Load())
	// A run handed over before the timer was bound again calls nothing.
	if ts.gen != gen {
		x.errorf("timer %d: callback of binding %d after it was bound again (binding %d)", ts.id, gen, ts.gen)
		return
	}
	h := x.h
	switch {
	case len(ts.inflight) > 0:
		// A one-shot arming fired before a Stop or Reset returned false.
		d := ts.inflight[0]
		ts.inflight = ts.inflight[1:]
		if h.dueTick(d) > T {
			x.errorf("timer %d: one-shot run for %d early, at tick %d\nlog:\n%s", ts.id, d, T, ts.history())
		}
	case len(ts.orphan) > 0:
		// A periodic run that had started when a Stop or Reset ended it.
		d := ts.orphan[0]
		ts.orphan = ts.orphan[1:]
		if h.dueTick(d) > T {
			x.errorf("timer %d: periodic run for %d early, at tick %d\nlog:\n%s", ts.id, d, T, ts.history())
		}
	case ts.armed && h.dueTick(ts.cur.next) <= T:
		if !ts.cur.periodic {
			ts.armed = false
			break
		}
		// The next run is the first instant after the firing's tick: at
		// most one run per Advance, none skipped that was not due. On an
		// executor, runs may merge, and T may be a later Advance's: the
		// next instant after the due tick of this one is a lower bound.
		fired := T
		if ts.exec {
			fired = h.dueTick(ts.cur.next)
		}
		ts.cur.next = nextInstant(ts.cur.a, ts.cur.p, h.tickNanos(fired))
	default:
		// Early, a second run of a one-shot arming, a run after a Stop or
		// Reset that returned true, or a periodic run twice in an Advance.
		x.errorf("timer %d (exec=%v): callback at tick %d with no arming due: armed=%v cur=%+v (due %d) orphan=%v inflight=%v\nlog:\n%s",
			ts.id, ts.exec, T, ts.armed, ts.cur, h.dueTick(ts.cur.next), ts.orphan, ts.inflight, ts.history())
		return
	}
	// The callback stops or re-arms its own timer, now and then.
	switch rnd.IntN(6) {
	case 0:
		x.op(ts, rnd, cmStop, true)
	case 1:
		x.op(ts, rnd, cmReset+rnd.IntN(3), true)
	}
}

// endOld applies r, the result of op what on ts (locked), to the arming it
// ends. self says the op is ts's own callback's.
func (x *cmodel) endOld(ts *cmTimer, r bool, what string, self bool) {
	if !ts.armed {
		if r {
			x.errorf("timer %d: %s returned true on an unarmed timer", ts.id, what)
		}
		return
	}
	ts.armed = false
	if r {
		// The arming is cancelled: no run of it may come, but for one that
		// had started already (periodic: the next run is armed before f).
		if ts.cur.periodic && !self && len(ts.inflight)+len(ts.orphan) == 0 && x.runStarted(ts) {
			ts.orphan = append(ts.orphan, ts.cur.next)
		}
		return
	}
	// False on an armed timer: a one-shot arming that has fired, whose
	// callback is owed. A periodic timer is armed until stopped.
	if ts.cur.periodic {
		x.errorf("timer %d: %s returned false on an armed periodic timer (cur %+v)", ts.id, what, ts.cur)
		return
	}
	ts.inflight = append(ts.inflight, ts.cur.next)
}

// runStarted reports whether a callback of ts, whose lock the caller holds,
// has started and not yet accounted itself (it waits for the lock). It
// waits out a callback about to start.
func (x *cmodel) runStarted(ts *cmTimer) bool {
	for {
		if ts.exec {
			switch {
			case ts.inF.Load() == 1:
				return true
			case ts.inF.Load() == 2 || ts.inRun.Load() == 0:
				return ts.inF.Load() == 1
			}
		} else {
			// Every firing the hierarchy claims counts once in its shard's
			// lateness statistics, under the shard's lock, before the lock
			// is released and its func started. With every shard's lock
			// held none is between the two, and no claim comes; so when
			// entered has caught up with the claims then, every claimed
			// firing's func has started (a later claim's cannot stand in
			// for an earlier one's, as it could between two looks), and a
			// run of ts claimed before the op that called this has set inF.
			for !x.allEntered() {
				runtime.Gosched()
			}
			return ts.inF.Load() == 1
		}
		runtime.Gosched()
	}
}

// allEntered reports whether every firing claimed so far has started its
// func (see runStarted).
func (x *cmodel) allEntered() bool {
	x.h.lockAll()
	defer x.h.unlockAll()
	var claimed uint64
	for _, s := range x.h.shards {
		for _, n := range s.stats.lateness.buckets {
			claimed += n
		}
	}
	return uint64(x.entered.Load()) >= claimed
}

// op applies op k to ts, which the caller has locked, and the model.
func (x *cmodel) op(ts *cmTimer, rnd *rand.Rand, k int, self bool) {
	tick := x.h.tick
	dur := func() time.Duration {
		// A past deadline, but not while an owner ends a periodic arming:
		// the new arming could run at once, and its run could not be told
		// from one of the old arming's (runStarted).
		if rnd.IntN(8) == 0 && (self || !ts.armed || !ts.cur.periodic) {
			return time.Duration(rnd.Int64N(3*tick) - 2*tick)
		}
		return time.Duration(rnd.Int64N(40*tick) + 1)
	}
	x.clockMu.RLock()
	defer x.clockMu.RUnlock()
	now := x.ns()
	seq := func() int64 { return x.advSeq.Load() }
	switch k {
	case cmStop:
		r := ts.tm.Stop()
		x.endOld(ts, r, "Stop", self)
		ts.logf("Stop=%v self=%v now=%d orphan=%v inflight=%v", r, self, now, ts.orphan, ts.inflight)
		return
	case cmReset:
		d := dur()
		r := ts.tm.Reset(d)
		x.endOld(ts, r, "Reset", self)
		ts.armed, ts.cur = true, cmArming{next: clampDeadline(now + int64(d)), seq: seq()}
		ts.logf("Reset(%v)=%v", d, r)
	case cmResetAt:
		d := dur()
		r := ts.tm.ResetAt(x.h.origin.Add(time.Duration(now) + d))
		x.endOld(ts, r, "ResetAt", self)
		ts.armed, ts.cur = true, cmArming{next: now + int64(d), seq: seq()}
		ts.logf("ResetAt(now%+v)=%v", d, r)
	case cmResetEvery:
		p := int64(cmPeriods[rnd.IntN(len(cmPeriods))] * float64(tick))
		r := ts.tm.ResetEvery(time.Duration(p))
		x.endOld(ts, r, "ResetEvery", self)
		ts.armed, ts.cur = true, cmArming{periodic: true, a: now, p: p, next: now + p, seq: seq()}
		ts.logf("ResetEvery(%v)=%v", time.Duration(p), r)
	case cmInit:
		// Only a timer the reader leaves alone, with nothing armed or owed:
		// Init must not run concurrently with the timer's other methods.
		if ts.armed || len(ts.inflight) > 0 || len(ts.orphan) > 0 || ts.id%4 != 0 {
			return
		}
		ts.gen++
		ts.exec = rnd.IntN(2) == 0
		x.bind(ts, rnd.Uint64())
		ts.logf("Init gen=%d exec=%v", ts.gen, ts.exec)
		return
	}
	ts.logf("  self=%v now=%d seq=%d adv=%v -> cur=%+v orphan=%v inflight=%v", self, now, x.advSeq.Load(), x.inAdv.Load(), ts.cur, ts.orphan, ts.inflight)
	x.armings.Add(1)
	// Deadline is the new arming's deadline, or its first run's instant,
	// at once.
	if dl := x.h.offset(ts.tm.Deadline()); dl != ts.cur.next {
		x.errorf("timer %d: Deadline %d right after op %d, want %d", ts.id, dl, k, ts.cur.next)
	}
}

// bind binds ts, with Init or, on the model's executor, InitOn.
func (x *cmodel) bind(ts *cmTimer, seed uint64) {
	gen := ts.gen
	rnd := rand.New(rand.NewPCG(seed, uint64(ts.id)))
	if !ts.exec {
		ts.tm.Init(x.h, func() { x.callback(ts, gen, rnd, true) })
		return
	}
	f := func() { x.callback(ts, gen, rnd, false) }
	ts.tm.InitOn(x.h, func(run func()) {
		x.entered.Add(1)
		// exec is called by the Advance that fired the timer.
		if !x.inAdv.Load() {
			x.errorf("timer %d: exec called outside an Advance", ts.id)
		}
		if !x.parallel && goroutineID() != x.advG.Load() {
			x.errorf("timer %d: exec not called on the advancing goroutine", ts.id)
		}
		for {
			o, n := ts.execTick.Load(), x.advTick.Load()
			if n <= o || ts.execTick.CompareAndSwap(o, n) {
				break
			}
		}
		select {
		case x.execCh <- cmRun{run, ts}:
		default:
			x.errorf("executor queue full")
		}
	}, f)
}

// executor calls the runs exec is handed, a few at a time, in random
// order, some twice and some again later, until stop is closed. On a
// request on drainCh it calls every run it holds and closes the request's
// channel.
func (x *cmodel) executor(seed uint64, stop <-chan struct{}) {
	x.execG.Store(goroutineID())
	rnd := rand.New(rand.NewPCG(seed, 7))
	var held []cmRun
	call := func(i int, keep bool) {
		r := held[i]
		r.ts.inRun.Store(1)
		r.run()
		if rnd.IntN(5) == 0 {
			r.run()
		}
		r.ts.inRun.Store(0)
		if !keep {
			held = append(held[:i], held[i+1:]...)
		}
	}
	take := func() {
		for {
			select {
			case r := <-x.execCh:
				held = append(held, r)
			default:
				return
			}
		}
	}
	for {
		select {
		case <-stop:
			return
		case done := <-x.drainCh:
			take()
			for len(held) > 0 {
				call(rnd.IntN(len(held)), false)
			}
			close(done)
			continue
		case r := <-x.execCh:
			held = append(held, r)
		case <-time.After(200 * time.Microsecond):
		}
		for len(held) > 0 && rnd.IntN(3) != 0 {
			call(rnd.IntN(len(held)), rnd.IntN(5) == 0)
		}
	}
}

// drainExec has the executor call every run it holds, with no Advance
// under way (none is handed over meanwhile).
func (x *cmodel) drainExec(t *testing.T) {
	done := make(chan struct{})
	x.drainCh <- done
	recvWithin(t, 10*time.Second, done, "the executor calling the runs it holds")
}

// advance moves the clock at random, or onto the next tick if onto, and
// calls Advance.
func (x *cmodel) advance(r *rand.Rand, onto bool) {
	x.progress.Add(1)
	x.clockMu.Lock()
	tick := x.h.tick
	switch k := r.IntN(20); {
	case onto || k < 3:
		now := x.ns()
		x.clk.Add(time.Duration((floorDiv(now, tick)+1)*tick - now))
	case k < 15:
		x.clk.Add(time.Duration(r.Int64N(3 * tick)))
	case k < 17:
		x.clk.Add(time.Duration(r.Int64N(300 * tick))) // across coarse levels
	default:
		x.clk.Add(-time.Duration(r.Int64N(5 * tick)))
	}
	now := x.ns()
	x.clockMu.Unlock()
	x.advTick.Store(floorDiv(now, tick))
	x.advSeq.Add(1)
	x.inAdv.Store(true)
	x.h.Advance()
	x.inAdv.Store(false)
}

// checkQuiescent checks the model against the hierarchy with no op, no
// Advance and no run under way.
func (x *cmodel) checkQuiescent(when string) {
	h := x.h
	armed := 0
	T := floorDiv(x.ns(), h.tick)
	lastAdv := x.advTick.Load()
	for _, ts := range x.timers {
		ts.mu.Lock()
		// Every one-shot arming found fired, and every periodic run that
		// had started when its arming ended, has called f.
		if len(ts.inflight) > 0 {
			x.errorf("%s: timer %d: one-shot callbacks never came: %v", when, ts.id, ts.inflight)
		}
		if len(ts.orphan) > 0 {
			x.errorf("%s: timer %d: periodic runs never came: %v", when, ts.id, ts.orphan)
		}
		if ts.armed {
			armed++
			// An arming made before the latest Advance, at the clock's
			// tick, and due by then has run (an executor periodic timer's
			// model is only a lower bound).
			if h.dueTick(ts.cur.next) <= lastAdv && lastAdv == T && ts.cur.seq < x.advSeq.Load() && !(ts.exec && ts.cur.periodic) {
				x.errorf("%s: timer %d: arming %+v (due %d) still armed after an Advance at tick %d (missed)", when, ts.id, ts.cur, h.dueTick(ts.cur.next), lastAdv)
			}
			if dl := h.offset(ts.tm.Deadline()); dl != ts.cur.next && !(ts.exec && ts.cur.periodic) {
				x.errorf("%s: timer %d: Deadline %d, model %d (%+v)", when, ts.id, dl, ts.cur.next, ts.cur)
			}
		}
		ts.mu.Unlock()
	}
	if n := h.Len(); n != armed {
		x.errorf("%s: Len %d, model %d armed", when, n, armed)
	}
	if err := h.check(); err != nil {
		x.errorf("%s: invariant: %v", when, err)
	}
}

// runConcurrentModel runs the model on a hierarchy of shards shards, for
// rounds rounds of steps Advances each, and returns its counts of armings
// and callbacks.
func runConcurrentModel(t *testing.T, seed uint64, shards int, parallel bool, rounds, steps int) (armings, runs int64) {
	opts := []Option{WithTick(time.Millisecond), WithLevels(8, 4, 4), WithShards(shards)}
	if parallel {
		opts = append(opts, WithParallelCallbacks())
	}
	h, clk := newFake(t, opts...)
	x := &cmodel{h: h, clk: clk, parallel: parallel, execCh: make(chan cmRun, 1<<16), drainCh: make(chan chan struct{})}
	rnd := rand.New(rand.NewPCG(seed, 99))
	const nTimers = 24
	for i := range nTimers {
		ts := &cmTimer{id: i, exec: i%3 == 2}
		x.timers = append(x.timers, ts)
		x.bind(ts, rnd.Uint64())
	}
	stopExec := make(chan struct{})
	execDone, settleExec := goWatched(t, func() { x.executor(seed, stopExec) })
	defer func() {
		close(stopExec)
		recvWithin(t, 10*time.Second, execDone, "the executor's return")
		settleExec()
	}()

	for round := range rounds {
		// Concurrent phase: three owners and a reader against the Advances.
		var stop atomic.Bool
		var wg sync.WaitGroup
		goRandom(&wg, 3, uint64(1000*seed)+uint64(round), func(_ int, r *rand.Rand) {
			for !stop.Load() {
				ts := x.timers[r.IntN(nTimers)]
				k := r.IntN(5)
				if k == cmInit && r.IntN(3) != 0 {
					k = cmResetEvery
				}
				ts.mu.Lock()
				x.op(ts, r, k, false)
				ts.mu.Unlock()
				if r.IntN(4) == 0 {
					runtime.Gosched()
				}
			}
		})
		wg.Go(func() {
			for !stop.Load() {
				for _, ts := range x.timers {
					if ts.id%4 != 0 { // never one that is bound again
						_ = ts.tm.Deadline()
					}
				}
				_ = h.Now()
				_ = h.Len()
				time.Sleep(50 * time.Microsecond)
			}
		})
		mustProgress(t, 10*time.Second, fmt.Sprintf("round %d's Advances", round), &x.progress, func() {
			x.advG.Store(goroutineID())
			r := rand.New(rand.NewPCG(seed, uint64(7000+round)))
			for range steps {
				x.advance(r, false)
			}
		})
		stop.Store(true)
		waitWithin(t, 10*time.Second, &wg, "the owners and the reader")
		x.drainExec(t)
		x.checkQuiescent("after the concurrent phase")
		// Quiescent phase: a few Advances alone, the last onto the next
		// tick, so that everything due has run.
		mustReturn(t, 10*time.Second, fmt.Sprintf("round %d's quiescent Advances", round), func() {
			x.advG.Store(goroutineID())
			r := rand.New(rand.NewPCG(seed, uint64(9000+round)))
			for range 5 {
				x.advance(r, false)
			}
			x.advance(r, true)
		})
		x.drainExec(t)
		x.checkQuiescent("after the quiescent Advances")
		if x.errs.Load() > 0 {
			break
		}
	}
	if n := x.errs.Load(); n > 0 {
		x.errMu.Lock()
		defer x.errMu.Unlock()
		for _, e := range x.errList {
			t.Error(e)
		}
		t.Fatalf("seed %d, %d shards, parallel %v: %d failures", seed, shards, parallel, n)
	}
	return x.armings.Load(), x.runs.Load()
}

func TestPeriodicModel_ConcurrentOwnersAgainstAdvance(t *testing.T) {
	seeds, rounds, steps := volume(1, 3), 3, volume(400, 1000)
	var armings, runs int64
	for seed := range uint64(seeds) {
		for shards := 1; shards <= 4; shards++ {
			for _, parallel := range []bool{false, true} {
				t.Run(fmt.Sprintf("seed%d/shards%d/parallel%v", seed, shards, parallel), func(t *testing.T) {
					a, r := runConcurrentModel(t, seed, shards, parallel, rounds, steps)
					armings += a
					runs += r
				})
			}
		}
	}
	t.Logf("%d armings, %d callbacks", armings, runs)
}
