package gnetwheel

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	gerrors "github.com/panjf2000/gnet/v2/pkg/errors"
	"github.com/timingwheel/timingwheel"
)

// Wheel runs the callbacks of a hierarchy's timers on gnet event loops.
// Create one per hierarchy with [New]; its methods are safe for concurrent
// use.
type Wheel struct {
	h     *timingwheel.Hierarchy
	loops loops // a runner per event loop seen
}

// New returns a Wheel whose timers live in h. The caller drives h (Start).
// New panics if h is nil.
func New(h *timingwheel.Hierarchy) *Wheel {
	if h == nil {
		panic("gnetwheel: New called with a nil Hierarchy")
	}
	return &Wheel{h: h}
}

// Hierarchy returns the hierarchy the wheel's timers live in.
func (w *Wheel) Hierarchy() *timingwheel.Hierarchy { return w.h }

// Exec returns the executor that runs a callback on el, for
// [timingwheel.Timer.InitOn]:
//
//	t.InitOn(w.Hierarchy(), w.Exec(c.EventLoop()), f) // f runs on c's loop
//
// exec(run) never blocks: it queues run and, if no batch is pending on el,
// queues one with el.Execute, so timers that fire together reach the loop
// in one task. If el's engine has shut down, run is dropped. Exec
// allocates only the first time it sees el.
func (w *Wheel) Exec(el gnet.EventLoop) func(run func()) {
	return w.loops.of(el, nil).execFn
}

// loops is a registry of loopRuns, one per event loop, read without a lock.
type loops struct {
	mu   sync.Mutex                 // serializes additions
	list atomic.Pointer[[]*loopRun] // copied on write
}

// of returns el's runner, creating it (for cfg) the first time.
func (r *loops) of(el gnet.EventLoop, cfg *Idler) *loopRun {
	if l, ok := el.(*EventLoop); ok {
		el = l.EventLoop
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
	l := &loopRun{el: el, cfg: cfg}
	l.shared.lr = l
	if cfg != nil {
		l.epoch = cfg.w.h.Now()
		l.buckets = map[int64]*bucket{}
	}
	l.execFn = l.exec
	l.drainFn = runFunc(l.drain)
	list := append(old[:len(old):len(old)], l)
	r.list.Store(&list)
	return l
}

// loopItem is a callback queued for an event loop. A pointer or a func
// converts to it without allocating.
type loopItem interface{ runOnLoop() }

// loopRun queues callbacks for one event loop and runs them there in
// batches: however many timers fire together, the loop is woken once.
type loopRun struct {
	el      gnet.EventLoop
	cfg     *Idler       // the Idler whose conns use this runner; nil for a Wheel's
	execFn  func(func()) // l.exec, made once so Exec does not allocate
	drainFn gnet.Runnable

	mu      sync.Mutex
	pending []loopItem // queued, not yet run
	spare   []loopItem // the last batch's slice, for reuse
	queued  bool       // a drain is queued on el

	// Loop-owned: the conn the loop is closing for the wheel, and why; so
	// that Idle.Err, called from OnClose, can tell.
	closing *Idle
	reason  error

	shared idleExt // the ext of this loop's conns that have no optional timers

	// Loop-owned idle buckets (see Idle), by due slot, and the free ones.
	epoch       time.Time
	buckets     map[int64]*bucket
	freeBuckets *bucket
}

// exec queues run for el's loop: the executor of Wheel.Exec.
func (l *loopRun) exec(run func()) { l.push(runFunc(run)) }

// push queues it for el's loop.
func (l *loopRun) push(it loopItem) {
	l.mu.Lock()
	l.pending = append(l.pending, it)
	first := !l.queued
	l.queued = true
	l.mu.Unlock()
	if !first {
		return // the drain already queued takes it
	}
	if err := l.el.Execute(context.Background(), l.drainFn); err != nil {
		// The engine is shutting down and closes every conn itself:
		// nothing queued here will run.
		l.mu.Lock()
		clear(l.pending)
		l.pending = l.pending[:0]
		l.queued = false
		l.mu.Unlock()
	}
}

// drain runs, on the loop, every callback queued so far.
func (l *loopRun) drain() {
	l.mu.Lock()
	runs := l.pending
	l.pending, l.spare = l.spare[:0], nil
	l.queued = false
	l.mu.Unlock()
	for i, it := range runs {
		runs[i] = nil // keep no reference to a conn once its callback ran
		it.runOnLoop()
	}
	l.mu.Lock()
	l.spare = runs[:0] // drains are serialized on the loop: spare is nil here
	l.mu.Unlock()
}

// runFunc makes a func() a loopItem and a gnet.Runnable; the conversions
// allocate nothing, as a func is a pointer.
type runFunc func()

func (r runFunc) runOnLoop()                { r() }
func (r runFunc) Run(context.Context) error { r(); return nil }

// AfterFunc returns a timer that calls f on el's loop once d has passed.
// Stop and Reset it from anywhere; on el's loop they also cancel a callback
// that is on its way there (guarantee 14).
func (w *Wheel) AfterFunc(el gnet.EventLoop, d time.Duration, f func()) *timingwheel.Timer {
	t := new(timingwheel.Timer).InitOn(w.h, w.Exec(el), f)
	t.Reset(d)
	return t
}

// Every returns a timer that calls f on el's loop every period from now,
// until Stop (guarantee 12: missed runs are skipped, never early).
func (w *Wheel) Every(el gnet.EventLoop, period time.Duration, f func()) *timingwheel.Timer {
	t := new(timingwheel.Timer).InitOn(w.h, w.Exec(el), f)
	t.ResetEvery(period)
	return t
}

// Schedule is the EventLoop.Schedule that gnet declares: runnable.Run(ctx)
// runs on el's loop once delay has passed, never before (and within a tick
// plus the hop onto the loop after). If ctx is done before then, runnable
// does not run, and the timer is stopped at once. A nil runnable is
// gnet's ErrNilRunnable.
func (w *Wheel) Schedule(el gnet.EventLoop, ctx context.Context, runnable gnet.Runnable, delay time.Duration) error {
	if runnable == nil {
		return gerrors.ErrNilRunnable
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if ctx.Err() != nil {
		return nil // done already: it would not run
	}
	t := new(timingwheel.Timer)
	var unhook func() bool
	t.InitOn(w.h, w.Exec(el), func() {
		if unhook != nil {
			unhook()
		}
		if ctx.Err() == nil {
			_ = runnable.Run(ctx)
		}
	})
	if ctx.Done() != nil {
		unhook = context.AfterFunc(ctx, func() { t.Stop() })
	}
	t.Reset(delay)
	return nil
}

// EventLoop is a gnet.EventLoop whose Schedule works: it is
// [Wheel.Schedule] on the wrapped loop. Its other methods are the loop's.
type EventLoop struct {
	gnet.EventLoop
	w *Wheel
}

// EventLoop returns el with a working Schedule.
func (w *Wheel) EventLoop(el gnet.EventLoop) *EventLoop {
	if l, ok := el.(*EventLoop); ok {
		el = l.EventLoop
	}
	return &EventLoop{EventLoop: el, w: w}
}

// Schedule runs runnable on the loop once delay has passed; see
// [Wheel.Schedule].
func (l *EventLoop) Schedule(ctx context.Context, runnable gnet.Runnable, delay time.Duration) error {
	return l.w.Schedule(l.EventLoop, ctx, runnable, delay)
}

var _ gnet.EventLoop = (*EventLoop)(nil)
