package gnetwheel

import (
	"context"
	"fmt"
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
// in one task. If el's loop has exited, run is dropped; the core then
// counts t as armed until t is stopped, as for any executor that drops a
// run. [Wheel.InitOn] binds t so that such a run ends t's arming at once,
// as Stop would, and queues a periodic timer's runs once while el's loop
// has not taken them (exec queues one per firing): prefer it. Exec
// allocates only the first time it sees el.
func (w *Wheel) Exec(el gnet.EventLoop) func(run func()) {
	return w.loops.of(el, w.h, nil).execFn
}

// InitOn binds t, as [timingwheel.Timer.InitOn] does, to call f on el's
// loop when it fires, and returns t, unarmed: Reset, ResetAt or
// ResetEvery arm it, Stop disarms it. Unlike t.InitOn(w.Hierarchy(),
// w.Exec(el), f), a run that el's loop cannot take (its engine has shut
// down, or is shutting down) ends that arming as Stop would: the
// hierarchy no longer counts t, and f does not run; such a run of an
// earlier binding of t, dropped after t was stopped and bound again (to
// another loop, say), leaves the new binding's arming alone. As Timer.InitOn,
// InitOn must not run concurrently with t's other methods, and panics if
// f is nil or t is armed; it allocates a little, once.
func (w *Wheel) InitOn(t *timingwheel.Timer, el gnet.EventLoop, f func()) *timingwheel.Timer {
	if f == nil {
		panic("gnetwheel: Wheel.InitOn called with a nil func")
	}
	p := &hop{l: w.loops.of(el, w.h, nil), t: t}
	return p.bind(w.h, f)
}

// AfterFunc returns a timer that calls f on el's loop once d has passed.
// Stop and Reset it from anywhere; on el's loop they also cancel a callback
// that is on its way there (see "Callbacks on an executor" in the core's
// docs/guarantees.md). If el's loop has exited when the timer fires, f
// does not run and the arming ends, as after Stop (see [Wheel.InitOn]).
func (w *Wheel) AfterFunc(el gnet.EventLoop, d time.Duration, f func()) *timingwheel.Timer {
	t := w.newTimer("AfterFunc", el, f)
	t.Reset(d)
	return t
}

// Every returns a timer that calls f on el's loop every period from now,
// until Stop: missed runs are skipped, and none is early (see "Periodic
// timers" in the core's docs/guarantees.md). Once el's loop has exited,
// the next run stops the timer instead of calling f (see "Engines that
// stop" in the package's doc for when gnet lets that be known). While el's
// loop has not taken a run (a slow handler), the timer's later firings do
// not queue another: the one run takes the latest. Every panics if f is
// nil or period <= 0.
func (w *Wheel) Every(el gnet.EventLoop, period time.Duration, f func()) *timingwheel.Timer {
	if period <= 0 {
		panic(fmt.Sprintf("gnetwheel: Wheel.Every called with period %v; it must be positive", period))
	}
	t := w.newTimer("Every", el, f)
	t.ResetEvery(period)
	return t
}

// newTimer is w.InitOn(new(timingwheel.Timer), el, f), the timer and its
// hop in one allocation.
func (w *Wheel) newTimer(method string, el gnet.EventLoop, f func()) *timingwheel.Timer {
	if f == nil {
		panic("gnetwheel: Wheel." + method + " called with a nil func")
	}
	p := new(struct {
		t   timingwheel.Timer
		hop hop
	})
	p.hop = hop{l: w.loops.of(el, w.h, nil), t: &p.t}
	return p.hop.bind(w.h, f)
}

// Schedule is the EventLoop.Schedule that gnet declares: runnable.Run(ctx)
// runs on el's loop once delay has passed, never before (and within a tick
// plus the hop onto the loop after). If ctx is done before then, runnable
// does not run, and the timer is stopped at once: by Schedule itself if
// ctx is done by the time Schedule has armed it, else as ctx is done (by
// context.AfterFunc's goroutine, a moment after the cancel; the
// registration is removed when the task runs or is dropped). If el's
// loop has exited when the delay has passed, runnable does not run either,
// and nothing of it is kept once gnet lets that be known (see "Engines
// that stop" in the package's doc). The
// error runnable returns is handled as gnet handles a task's it runs with
// Execute: gnet's ErrEngineShutdown shuts the engine down, any other is
// ignored. A nil runnable is gnet's ErrNilRunnable; a nil ctx is
// context.Background().
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
	s := &scheduled{ctx: ctx, r: runnable}
	s.hop = hop{l: w.loops.of(el, w.h, nil), t: &s.t}
	s.hop.bind(w.h, s.fire)
	if ctx.Done() == nil {
		s.t.Reset(delay) // never done: nothing to watch
		return nil
	}
	// Registered before the timer is armed, so that the callback, which
	// removes the registration, finds it; and checked again once armed:
	// a cancel that came after the check above may have had its Stop run
	// before the Reset, which then armed the timer again.
	s.unhook = context.AfterFunc(ctx, s.cancel)
	s.hop.end = s.unhook
	s.t.Reset(delay)
	if ctx.Err() != nil {
		s.cancel()
		s.unhook()
	}
	return nil
}

// scheduled is one Schedule: its timer, the task and its context.
type scheduled struct {
	t      timingwheel.Timer
	hop    hop // t's way onto the loop; it removes the registration if dropped
	ctx    context.Context
	r      gnet.Runnable
	unhook func() bool // removes the context.AfterFunc registration; nil if none
}

// fire runs on the loop once the delay has passed.
func (s *scheduled) fire() {
	if s.unhook != nil {
		s.unhook()
	}
	if s.ctx.Err() == nil {
		s.hop.l.shutdownAsked(s.r.Run(s.ctx))
	}
}

// cancel stops the timer: ctx is done.
func (s *scheduled) cancel() { s.t.Stop() }

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
