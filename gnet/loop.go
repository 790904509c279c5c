package gnetwheel

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"
	gerrors "github.com/panjf2000/gnet/v2/pkg/errors"
	"github.com/timingwheel/timingwheel"
)

// How a loop's callbacks reach it, and what happens to those its loop
// never takes.
//
// Callbacks for a loop are queued on its loopRun (push) and run there in
// batches by one drain task, handed to the loop with EventLoop.Execute
// (and handed over again if the loop does not take it: see execdrop.go).
// A loop that has exited cannot take a task: gnet's Execute then returns
// ErrEngineInShutdown. A loopRun whose Execute fails is dead: everything
// queued on it, and everything pushed later, is dropped — each item ends
// its timer's arming as Stop would (drop), so the hierarchy counts nothing
// for a loop that is gone, context registrations are removed, and nothing
// is retained — and it leaves its registry.

// loopItem is a callback queued for an event loop. A pointer or a func
// converts to it without allocating.
type loopItem interface {
	// runOnLoop runs the callback, on the loop.
	runOnLoop()
	// drop is called, on any goroutine, instead of runOnLoop when the
	// loop will never take the item: it ends the arming of the timer
	// that queued it, as Stop would, and lets go of what it holds.
	drop()
}

// loops is a registry of loopRuns, one per event loop, read without a lock.
type loops struct {
	mu   sync.Mutex                 // serializes changes
	list atomic.Pointer[[]*loopRun] // copied on write
}

// of returns el's runner, creating it (for cfg, in h) the first time. A
// new entry first sweeps the registry of loops that have exited, so that
// engines started one after another do not pile up entries.
func (r *loops) of(el gnet.EventLoop, h *timingwheel.Hierarchy, cfg *Idler) *loopRun {
	if l, ok := el.(*EventLoop); ok {
		el = l.EventLoop
	}
	if el == nil {
		panic("gnetwheel: called with a nil gnet.EventLoop (a Conn's EventLoop, or one gnet passed to a handler)")
	}
	if p := r.list.Load(); p != nil {
		for _, l := range *p {
			if l.el == el {
				return l
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var old []*loopRun
	if p := r.list.Load(); p != nil {
		old = *p
		for _, l := range old {
			if l.el == el {
				return l
			}
		}
	}
	list := make([]*loopRun, 0, len(old)+1)
	var dead [][]loopItem
	for _, l := range old {
		if l.isDead() {
			continue // its die is removing it
		}
		// A probe: a no-op task on a live loop; an error from a loop
		// that has exited.
		if l.el.Execute(context.Background(), noop) != nil {
			if runs, ok := l.markDead(); ok {
				dead = append(dead, runs)
			}
			continue
		}
		list = append(list, l)
	}
	l := newLoopRun(el, r, h, cfg)
	list = append(list, l)
	r.list.Store(&list)
	for _, runs := range dead {
		dropAll(runs)
	}
	return l
}

// remove takes l out of the registry.
func (r *loops) remove(l *loopRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.list.Load()
	if p == nil {
		return
	}
	list := make([]*loopRun, 0, len(*p))
	for _, o := range *p {
		if o != l {
			list = append(list, o)
		}
	}
	r.list.Store(&list)
}

var noop gnet.Runnable = runFunc(func() {})

// loopRun queues callbacks for one event loop and runs them there in
// batches: however many timers fire together, the loop is woken once.
type loopRun struct {
	el      gnet.EventLoop
	reg     *loops       // the registry it is in
	cfg     *Idler       // the Idler whose conns use this runner; nil for a Wheel's
	execFn  func(func()) // l.exec, made once so Exec does not allocate
	drainFn gnet.Runnable

	mu      sync.Mutex
	pending []loopItem // queued, not yet run
	spare   []loopItem // the last batch's slice, for reuse
	queued  bool       // a drain was handed to el and has not taken pending yet
	dead    bool       // el's loop will take nothing more: items are dropped
	watch   execWatch  // told when a drain is handed over and taken

	// Loop-owned: the conn the loop is closing for the wheel, and why; so
	// that Idle.Err, called from OnClose, can tell.
	closing *Idle
	reason  error
	closed  bool // closing's Close was called
	// Loop-owned: gnet's ErrEngineShutdown, once a callback of the
	// running drain asked for it (an OnClose that returned gnet.Shutdown,
	// a scheduled Runnable that returned the error).
	stop error

	// Loop-owned idle buckets (see Idle), by due slot, the free ones, and
	// every bucket made, by its index (see bucket).
	buckets     map[int64]*bucket
	freeBuckets *bucket
	all         []*bucket
}

func newLoopRun(el gnet.EventLoop, r *loops, h *timingwheel.Hierarchy, cfg *Idler) *loopRun {
	l := &loopRun{el: el, reg: r, cfg: cfg}
	if cfg != nil {
		l.buckets = map[int64]*bucket{}
	}
	l.execFn = l.exec
	l.drainFn = gnet.RunnableFunc(l.drain)
	l.watch.init(h, l)
	return l
}

// exec queues run for el's loop: the executor of Wheel.Exec. Such a run
// cannot be cancelled if the loop never takes it: runFunc's drop does
// nothing (see Wheel.Exec).
func (l *loopRun) exec(run func()) { l.push(runFunc(run), nil) }

// push queues it for el's loop, or drops it if the loop is gone. If once
// is not nil, it is it's flag of being queued, guarded by l.mu (a hop's
// queued): it is not queued again until a drain has taken it.
func (l *loopRun) push(it loopItem, once *bool) {
	l.mu.Lock()
	if l.dead {
		l.mu.Unlock()
		it.drop()
		return
	}
	if once != nil {
		if *once {
			l.mu.Unlock()
			return // queued already, not yet taken: its run takes this firing too
		}
		*once = true
	}
	l.pending = append(l.pending, it)
	if l.queued {
		l.mu.Unlock()
		return // the drain already queued takes it
	}
	l.queued = true
	l.watch.handedOver()
	l.mu.Unlock()
	l.submit()
}

// submit hands a drain to el; if el cannot take it, l is dead.
func (l *loopRun) submit() {
	if err := l.el.Execute(context.Background(), l.drainFn); err != nil {
		// gnet's ErrEngineInShutdown, or a poller that cannot be woken:
		// either way the loop runs no task any more.
		l.die()
	}
}

// drain runs, on the loop, every callback queued so far. If one asks for
// the engine's shutdown, the loop exits once drain returns: the rest of
// the batch is dropped, and l is dead.
func (l *loopRun) drain(context.Context) error {
	l.mu.Lock()
	runs := l.pending
	for _, it := range runs {
		if p, ok := it.(*hop); ok {
			p.queued = false // a firing from now on is queued again
		}
	}
	l.pending, l.spare = l.spare[:0], nil
	l.queued = false
	l.watch.taken()
	l.mu.Unlock()
	var stop error
	for i, it := range runs {
		runs[i] = nil // keep no reference to a conn once its callback ran
		if stop != nil {
			it.drop()
			continue
		}
		it.runOnLoop()
		stop, l.stop = l.stop, nil
	}
	if stop != nil {
		l.die()
		return stop
	}
	l.mu.Lock()
	l.spare = runs[:0] // drains are serialized on the loop: spare is nil here
	l.mu.Unlock()
	return nil
}

// shutdownAsked records, on the loop, an error of a close or a runnable:
// gnet's ErrEngineShutdown makes the running drain return it, which stops
// the loop as it stops when a handler returns gnet.Shutdown. Any other
// error is ignored, as gnet ignores it from a task it runs.
func (l *loopRun) shutdownAsked(err error) {
	if errors.Is(err, gerrors.ErrEngineShutdown) && l.stop == nil {
		l.stop = err
	}
}

func (l *loopRun) isDead() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dead
}

// die marks l dead, takes it out of its registry, and drops what was
// queued on it: in that order, so that once the hierarchy no longer
// counts a timer of a dead loop, the loop is out of the registry.
func (l *loopRun) die() {
	if runs, ok := l.markDead(); ok {
		l.reg.remove(l)
		dropAll(runs)
	}
}

// markDead marks l dead and returns what was queued on it, to be dropped;
// it reports whether l was alive. From then on push drops what it gets.
func (l *loopRun) markDead() ([]loopItem, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead {
		return nil, false
	}
	l.dead = true
	runs := l.pending
	l.pending, l.spare, l.queued = nil, nil, false
	l.watch.taken()
	return runs, true
}

func dropAll(runs []loopItem) {
	for _, it := range runs {
		it.drop()
	}
}

// runFunc makes a func() a loopItem; the conversion allocates nothing, as
// a func is a pointer.
type runFunc func()

func (r runFunc) runOnLoop()                { r() }
func (r runFunc) drop()                     {}
func (r runFunc) Run(context.Context) error { r(); return nil }

// hop is a timer's way onto its loop: the exec of the timer's InitOn (see
// bind). It queues itself, so that a run the loop never takes is dropped
// by ending the arming that handed it over.
type hop struct {
	l   *loopRun
	t   *timingwheel.Timer
	f   func()      // the callback t was bound with, through fire
	run func()      // the timer's run, set at its first firing
	end func() bool // called when the run is dropped, if not nil
	// dropped is set once a run of this binding was dropped: its loop
	// takes nothing more, so no run of it calls f any more.
	dropped atomic.Bool
	// queued is set while p is in its loop's queue, not yet taken by a
	// drain: a periodic timer that fires again before the loop took its
	// run is not queued twice (the one run takes the latest firing), so a
	// slow loop's queue holds at most one entry per timer. Guarded by the
	// loop's mu.
	queued bool
}

// bind binds p's timer to call f on p's loop.
func (p *hop) bind(h *timingwheel.Hierarchy, f func()) *timingwheel.Timer {
	p.f = f
	return p.t.InitOn(h, p.exec, p.fire)
}

// exec queues the timer's run for the loop.
func (p *hop) exec(run func()) {
	if p.run == nil { // the same run every time (InitOn makes it once)
		p.run = run
	}
	p.l.push(p, &p.queued)
}

// runOnLoop runs the run, which takes the binding's latest firing.
func (p *hop) runOnLoop() { p.run() }

// fire is the callback the core calls from a run of p's binding.
func (p *hop) fire() {
	if p.dropped.Load() {
		p.t.Stop() // a periodic timer's next run is armed: end it too
		return
	}
	p.f()
}

// drop ends the arming that handed the run over, as Stop would, if t is
// still bound by p: the run itself does that, through fire, and does
// nothing for a binding t has left since (t stopped and bound again by
// Wheel.InitOn, to another loop), whose arming a Stop here would end.
func (p *hop) drop() {
	p.dropped.Store(true)
	p.run()
	if p.end != nil {
		p.end()
	}
}
