package gnetwheel

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/benbjohnson/clock"
	"github.com/panjf2000/gnet/v2"
	gerrors "github.com/panjf2000/gnet/v2/pkg/errors"
	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/internal/demotest"
)

// loopServer starts a server with one conn open and returns its event loop
// and the goroutine that loop runs on.
func loopServer(t *testing.T) (*Wheel, *testServer, gnet.EventLoop, uint64) {
	t.Helper()
	w := newTestWheel(t)
	s := &testServer{w: w, idler: w.Idler(time.Hour)}
	addr := startServer(t, s)
	dial(t, addr)
	e := s.waitFor(t, "open", -1, 5*time.Second)
	return w, s, s.loopOf(e.conn), e.loop
}

// ran is what a task records when it runs.
type ran struct {
	at  time.Time
	gid uint64
}

func TestSchedule_RunsOnTheLoopAfterTheDelay(t *testing.T) {
	watchdog(t, 20*time.Second)
	w, _, el, loop := loopServer(t)
	const delay = 80 * time.Millisecond
	for _, tc := range []struct {
		name     string
		schedule func(context.Context, gnet.Runnable, time.Duration) error
	}{
		{"Wheel.Schedule", func(ctx context.Context, r gnet.Runnable, d time.Duration) error {
			return w.Schedule(el, ctx, r, d)
		}},
		{"EventLoop.Schedule", w.EventLoop(el).Schedule},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan ran, 1)
			start := w.Hierarchy().Now()
			err := tc.schedule(context.Background(), gnet.RunnableFunc(func(context.Context) error {
				got <- ran{w.Hierarchy().Now(), goid()}
				return nil
			}), delay)
			if err != nil {
				t.Fatal(err)
			}
			r := <-got
			if r.gid != loop {
				t.Errorf("ran on goroutine %d, not the loop's (%d)", r.gid, loop)
			}
			if d := r.at.Sub(start); d < delay {
				t.Errorf("ran %v after Schedule, before the delay %v", d, delay)
			}
		})
	}
	if err := w.Schedule(el, context.Background(), nil, time.Millisecond); !errors.Is(err, gerrors.ErrNilRunnable) {
		t.Errorf("Schedule(nil runnable) = %v, want gnet's ErrNilRunnable", err)
	}
}

func TestSchedule_CancelledContextStopsIt(t *testing.T) {
	watchdog(t, 20*time.Second)
	w, _, el, _ := loopServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{}, 1)
	if err := w.Schedule(el, ctx, gnet.RunnableFunc(func(context.Context) error {
		ran <- struct{}{}
		return nil
	}), 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	cancel()
	time.Sleep(150 * time.Millisecond)
	select {
	case <-ran:
		t.Fatal("ran although its context was cancelled before the delay")
	default:
	}
	if n := w.Hierarchy().Len(); n != 1 { // the idle timer of loopServer's conn
		t.Errorf("h.Len() = %d, want 1: cancelling stops the task's timer", n)
	}
}

func TestAfterFunc_StopBeforeItRuns(t *testing.T) {
	watchdog(t, 20*time.Second)
	w, _, el, _ := loopServer(t)
	ran := make(chan struct{}, 1)
	task := w.AfterFunc(el, 50*time.Millisecond, func() { ran <- struct{}{} })
	if !task.Stop() {
		t.Fatal("Stop of an armed task = false, want true")
	}
	time.Sleep(150 * time.Millisecond)
	select {
	case <-ran:
		t.Fatal("a stopped task ran")
	default:
	}
	if task.Stop() {
		t.Error("a second Stop = true, want false")
	}
}

func TestAfterFunc_StopOnTheLoopAfterFiringCancelsTheRun(t *testing.T) {
	// The task's timer fires while the loop is busy; the loop, before it
	// reaches the queued run, stops the task: the run must not call f.
	watchdog(t, 20*time.Second)
	w, _, el, _ := loopServer(t)
	ran := make(chan struct{}, 1)
	task := w.AfterFunc(el, time.Hour, func() { ran <- struct{}{} })
	stopped := make(chan bool, 1)
	if err := el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		task.Reset(time.Millisecond)
		time.Sleep(50 * time.Millisecond) // the timer fires and its run queues behind this task
		stopped <- task.Stop()
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if !<-stopped {
		t.Fatal("Stop on the loop between firing and run = false, want true (a Stop before the run starts cancels it)")
	}
	time.Sleep(100 * time.Millisecond)
	select {
	case <-ran:
		t.Fatal("f ran although the loop stopped the task before the run reached it")
	default:
	}
}

func TestEvery_RunsOnTheLoopEachPeriod(t *testing.T) {
	watchdog(t, 20*time.Second)
	w, _, el, loop := loopServer(t)
	const period = 40 * time.Millisecond
	got := make(chan ran, 16)
	start := w.Hierarchy().Now()
	task := w.Every(el, period, func() { got <- ran{w.Hierarchy().Now(), goid()} })
	for k := 1; k <= 4; k++ {
		r := <-got
		if r.gid != loop {
			t.Errorf("run %d on goroutine %d, not the loop's (%d)", k, r.gid, loop)
		}
		if due := start.Add(time.Duration(k) * period); r.at.Before(due) {
			t.Errorf("run %d at %v, before its instant %v", k, r.at.Sub(start), due.Sub(start))
		}
	}
	if !task.Stop() {
		t.Error("Stop of a periodic task = false, want true")
	}
	time.Sleep(2 * period)
	for len(got) > 0 { // a run on its way when Stop came
		<-got
	}
	time.Sleep(3 * period)
	if len(got) != 0 {
		t.Error("a periodic task ran on after Stop")
	}
	task.ResetEvery(period) // re-armed by value: runs again
	if r := <-got; r.gid != loop {
		t.Errorf("after ResetEvery, ran on goroutine %d, not the loop's", r.gid)
	}
	task.Stop()
}

// doneOnRegister is a context.WithCancel that is cancelled by its first
// Done call: the call Schedule makes just before it registers with the
// context, after its first ctx.Err() check.
type doneOnRegister struct {
	context.Context
	cancel context.CancelFunc
	first  atomic.Bool
}

func (c *doneOnRegister) Done() <-chan struct{} {
	if c.first.CompareAndSwap(false, true) {
		c.cancel()
	}
	return c.Context.Done()
}

func TestSchedule_ContextDoneWhileArmingIsStoppedBeforeScheduleReturns(t *testing.T) {
	h := demotest.NewHierarchy(t, timingwheel.WithClock(clock.NewMock()))
	w := New(h)
	loop := &fakeLoop{}
	for i := range 100 {
		inner, cancel := context.WithCancel(context.Background())
		ctx := &doneOnRegister{Context: inner, cancel: cancel}
		if err := w.Schedule(loop, ctx, gnet.RunnableFunc(func(context.Context) error { return nil }), time.Hour); err != nil {
			t.Fatal(err)
		}
		if n := h.Len(); n != 0 {
			t.Fatalf("round %d: h.Len() = %d as Schedule returned with its ctx done, want 0: the timer is stopped at once", i, n)
		}
	}
}

// cancelOnRegister is a context.WithCancel whose first Done call lets a
// canceller on another goroutine go: so the cancel lands while Schedule
// registers with the context and arms the timer.
type cancelOnRegister struct {
	context.Context
	first atomic.Bool
	go_   chan struct{}
}

func (c *cancelOnRegister) Done() <-chan struct{} {
	if c.first.CompareAndSwap(false, true) {
		close(c.go_)
	}
	return c.Context.Done()
}

func TestSchedule_CancelRacingTheArmingLeavesNoTimer(t *testing.T) {
	// The code before armed after registering with ctx, with ctx checked
	// only before: a cancel between the check and the arming could have
	// its Stop run before the Reset, and the timer stayed armed for the
	// whole delay (1 round in a few hundred under -race).
	watchdog(t, 30*time.Second)
	h := demotest.NewHierarchy(t, timingwheel.WithClock(clock.NewMock()))
	w := New(h)
	loop := &fakeLoop{}
	r := gnet.RunnableFunc(func(context.Context) error {
		t.Error("a task ran although its context was cancelled before its delay")
		return nil
	})
	for i := range 20000 {
		inner, cancel := context.WithCancel(context.Background())
		ctx := &cancelOnRegister{Context: inner, go_: make(chan struct{})}
		cancelled := make(chan struct{})
		spin := i % 64
		go func() {
			defer close(cancelled)
			<-ctx.go_
			for range spin { // land anywhere in the window
			}
			cancel()
		}()
		if err := w.Schedule(loop, ctx, r, time.Hour); err != nil {
			t.Fatal(err)
		}
		<-cancelled
		// The cancel has returned: the timer is stopped by Schedule, or a
		// moment later by context.AfterFunc's goroutine.
		for end := time.Now().Add(time.Second); h.Len() != 0; runtime.Gosched() {
			if time.Now().After(end) {
				t.Fatalf("round %d: the timer is still armed 1s after its context was cancelled (h.Len() = %d)", i, h.Len())
			}
		}
	}
}

func TestSchedule_DoneContextRegistrationIsRemovedWhenItRuns(t *testing.T) {
	mock, h, idler, loop := mockLoop(t, time.Hour)
	w := idler.w
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ws []weak.Pointer[payload]
	for range 10 {
		p := &payload{}
		ws = append(ws, weak.Make(p))
		w.Schedule(loop, ctx, gnet.RunnableFunc(func(context.Context) error { p.n++; return nil }), time.Millisecond)
	}
	step(mock, h, loop, time.Millisecond)
	wantNoTimers(t, h, "h.Len() = %d after the tasks ran, want 0")
	if !collected(ws) {
		t.Error("a task that ran is still referenced, by its context's registration")
	}
}

func TestWheel_ANilEventLoopPanicsWithAClearMessage(t *testing.T) {
	h := demotest.NewHierarchy(t, timingwheel.WithClock(clock.NewMock()))
	w := New(h)
	for name, call := range map[string]func(){
		"AfterFunc": func() { w.AfterFunc(nil, time.Second, func() {}) },
		"Every":     func() { w.Every(nil, time.Second, func() {}) },
		"Schedule": func() {
			w.Schedule(nil, context.Background(), gnet.RunnableFunc(func(context.Context) error { return nil }), time.Second)
		},
		"InitOn": func() { w.InitOn(new(timingwheel.Timer), nil, func() {}) },
		"Exec":   func() { w.Exec(nil) },
	} {
		func() {
			defer func() {
				if s, _ := recover().(string); !strings.Contains(s, "gnetwheel") || !strings.Contains(s, "nil gnet.EventLoop") {
					t.Errorf("%s with a nil loop: panic %q, want gnetwheel's about a nil gnet.EventLoop", name, s)
				}
			}()
			call()
		}()
	}
	wantNoTimers(t, h, "h.Len() = %d, want 0")
}

// A nil func or a period <= 0 panics with gnetwheel's message, before
// the loop is looked at.
func TestWheel_BadArgumentsPanicWithAClearMessage(t *testing.T) {
	h := demotest.NewHierarchy(t, timingwheel.WithClock(clock.NewMock()))
	w := New(h)
	loop := &fakeLoop{}
	for name, call := range map[string]func(){
		"AfterFunc nil func": func() { w.AfterFunc(loop, time.Second, nil) },
		"Every nil func":     func() { w.Every(loop, time.Second, nil) },
		"Every period 0":     func() { w.Every(loop, 0, func() {}) },
		"Every period -1s":   func() { w.Every(loop, -time.Second, func() {}) },
		"InitOn nil func":    func() { w.InitOn(new(timingwheel.Timer), loop, nil) },
	} {
		func() {
			defer func() {
				if s, _ := recover().(string); !strings.HasPrefix(s, "gnetwheel: Wheel.") {
					t.Errorf("%s: panic %q, want gnetwheel's", name, s)
				}
			}()
			call()
		}()
	}
	if n := registryLen(&w.loops); n != 0 {
		t.Errorf("the wheel records %d loops after calls that panicked, want 0", n)
	}
	wantNoTimers(t, h, "h.Len() = %d, want 0")
}

// Periodic timers on a loop that does not take its batch for a while (a
// slow handler) are queued once each, not once per period, and each runs
// once when the loop takes the batch; then again each period.
func TestEvery_ASlowLoopQueuesEachTimerOnce(t *testing.T) {
	mock, h, idler, loop := mockLoop(t, time.Hour)
	w := idler.w
	const timers = 100
	runs := 0
	for range timers {
		w.Every(loop, time.Millisecond, func() { runs++ })
	}
	for range 1000 { // 1 s, the loop busy
		mock.Add(time.Millisecond)
		h.Advance()
	}
	l := w.loops.of(loop, h, nil)
	l.mu.Lock()
	n := len(l.pending)
	l.mu.Unlock()
	if n != timers {
		t.Errorf("a busy loop's queue holds %d entries for %d periodic timers after 1000 periods, want one each", n, timers)
	}
	loop.runQueued()
	if runs != timers {
		t.Errorf("the batch ran %d callbacks, want one per timer (%d)", runs, timers)
	}
	step(mock, h, loop, time.Millisecond)
	if runs != 2*timers {
		t.Errorf("the next period ran %d callbacks, want %d", runs-timers, timers)
	}
}
