package gnetwheel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/benbjohnson/clock"
	"github.com/panjf2000/gnet/v2"
	"github.com/timingwheel/timingwheel"
)

// registryLen is the number of loops r holds an entry for.
func registryLen(r *loops) int {
	if p := r.list.Load(); p != nil {
		return len(*p)
	}
	return 0
}

// settle advances the mock clock by d in 10 ms steps, letting the
// hierarchy and the loop run at each.
func settle(mock *clock.Mock, h *timingwheel.Hierarchy, l *fakeLoop, d time.Duration) {
	for end := mock.Now().Add(d); mock.Now().Before(end); {
		step(mock, h, l, 10*time.Millisecond)
	}
}

// payload is what a task refers to: collected once nothing keeps the task.
type payload struct{ n int }

// collected reports whether every payload of ws has been garbage collected.
func collected(ws []weak.Pointer[payload]) bool {
	runtime.GC()
	runtime.GC()
	for _, w := range ws {
		if w.Value() != nil {
			return false
		}
	}
	return true
}

// armAll arms, on loop, n AfterFunc, n Every and n Schedule tasks (under
// ctx) that count their runs in *ran, and returns weak pointers to what
// the Schedule tasks refer to.
func armAll(w *Wheel, loop gnet.EventLoop, ctx context.Context, n int, ran *int) []weak.Pointer[payload] {
	var ws []weak.Pointer[payload]
	for range n {
		w.AfterFunc(loop, time.Millisecond, func() { *ran++ })
		w.Every(loop, time.Millisecond, func() { *ran++ })
		p := &payload{}
		ws = append(ws, weak.Make(p))
		w.Schedule(loop, ctx, gnet.RunnableFunc(func(context.Context) error {
			p.n++
			*ran++
			return nil
		}), time.Millisecond)
	}
	return ws
}

func TestLoop_ALoopThatReportsShutdownEndsTheArmingOfEveryTimer(t *testing.T) {
	mock, h, idler, loop := mockLoop(t, time.Hour, MaxLifetime(time.Millisecond),
		OnWriteIdle(time.Millisecond, func(gnet.Conn) { t.Error("OnWriteIdle ran for a loop that has shut down") }))
	w := idler.w
	ctx, cancel := context.WithCancel(context.Background()) // alive throughout
	defer cancel()
	ran := 0
	ws := armAll(w, loop, ctx, 10, &ran)
	conns := make([]*fakeConn, 10)
	for i := range conns {
		conns[i] = loop.conn(idler)
	}
	loop.shutdown = true // Execute returns ErrEngineInShutdown from now on
	settle(mock, h, loop, 100*time.Millisecond)
	for _, c := range conns {
		c.idle.Close() // gnet closes every conn of a loop as it exits: OnClose
	}
	if ran != 0 {
		t.Errorf("%d tasks ran on a loop that has shut down", ran)
	}
	wantNoTimers(t, h, "h.Len() = %d once every timer fired for a loop that has shut down, want 0: a run the loop cannot take ends the arming")
	if n, m := registryLen(&w.loops), registryLen(&idler.loops); n != 0 || m != 0 {
		t.Errorf("the Wheel holds %d loops and the Idler %d, want 0: a loop that has shut down leaves the registry", n, m)
	}
	if !collected(ws) {
		t.Error("a Schedule task for a loop that has shut down is still referenced (by its context's registration, or the hierarchy)")
	}
}

func TestLoop_AnExitedLoopLeavesTheRegistryWhenAnotherComes(t *testing.T) {
	mock, h, idler, a := mockLoop(t, time.Hour)
	w := idler.w
	b, c := &fakeLoop{}, &fakeLoop{}
	ta := w.AfterFunc(a, time.Hour, func() {})
	w.AfterFunc(b, time.Hour, func() {})
	ca := a.conn(idler)
	b.conn(idler)
	a.shutdown = true // a's engine stopped, with nothing queued for a
	ca.idle.Close()   // as gnet's OnClose on a's exit
	ta.Stop()
	w.AfterFunc(c, time.Hour, func() {}) // a new loop: a new engine, say
	c.conn(idler)
	if n, m := registryLen(&w.loops), registryLen(&idler.loops); n != 2 || m != 2 {
		t.Errorf("after a loop shut down and another came, the Wheel holds %d loops and the Idler %d, want 2 each", n, m)
	}
	// b is alive: what the sweep handed it runs harmlessly.
	b.runQueued()
	for _, err := range b.runErrs {
		if err != nil {
			t.Errorf("a task on a live loop returned %v", err)
		}
	}
	step(mock, h, b, time.Millisecond)
}

// loopsOf dials s until conns on both of its loops are open, and returns
// the loops.
func loopsOf(t *testing.T, s *testServer, addr string) []gnet.EventLoop {
	t.Helper()
	seen := map[gnet.EventLoop]bool{}
	var els []gnet.EventLoop
	for len(els) < 2 {
		dial(t, addr)
		e := s.waitFor(t, "open", -1, 5*time.Second)
		if el := s.loopOf(e.conn); !seen[el] {
			seen[el] = true
			els = append(els, el)
		}
	}
	return els
}

// eventually polls cond for up to d, and reports whether it came true.
func eventually(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}

// A run that a loop which has shut down drops ends the arming that handed
// it over, and no other: the timer, stopped and bound again to a live loop
// (a pooled session reused on another engine) before the drop, keeps its
// new arming, whether made by Wheel.InitOn or by AfterFunc.
func TestLoop_ADroppedRunOfAnEarlierBindingLeavesTheNewArming(t *testing.T) {
	for _, kind := range []string{"InitOn", "AfterFunc"} {
		mock, h, idler, a := mockLoop(t, time.Hour)
		w := idler.w
		b := &fakeLoop{}
		w.AfterFunc(b, time.Hour, func() {}) // b is a live loop of the registry
		var tm *timingwheel.Timer
		if kind == "InitOn" {
			tm = w.InitOn(new(timingwheel.Timer), a, func() {})
			tm.Reset(time.Millisecond)
		} else {
			tm = w.AfterFunc(a, time.Millisecond, func() {})
		}
		mock.Add(time.Millisecond)
		h.Advance() // the run is on its way to a, which does not take it
		if !tm.Stop() {
			t.Fatalf("%s: Stop of a timer whose run is on its way returned false", kind)
		}
		ran := 0
		w.InitOn(tm, b, func() { ran++ }) // bound again, to b
		tm.Reset(100 * time.Millisecond)
		a.shutdown = true                              // a's engine is shut down
		w.AfterFunc(&fakeLoop{}, time.Hour, func() {}) // a new loop: the sweep finds a's shutdown and drops its runs
		settle(mock, h, b, 200*time.Millisecond)
		if ran != 1 {
			t.Fatalf("%s: the timer bound again to a live loop ran %d times in 200ms, want 1: "+
				"dropping the earlier binding's run ended its new arming (h.Len() = %d)", kind, ran, h.Len())
		}
	}
}

func TestLoop_TimersOfAStoppedEngineEndTheirArming(t *testing.T) {
	watchdog(t, 30*time.Second)
	w := newTestWheel(t)
	h := w.Hierarchy()
	s := &testServer{w: w, idler: w.Idler(time.Hour, MaxLifetime(time.Hour), OnWriteIdle(time.Hour, func(gnet.Conn) {}))}
	srv := runServer(t, s, s)
	els := loopsOf(t, s, srv.addr)
	ctx, cancel := context.WithCancel(context.Background()) // alive throughout
	defer cancel()
	var stopped, late, ticks atomic.Int64
	count := func() {
		if stopped.Load() != 0 {
			late.Add(1)
		}
	}
	var ws []weak.Pointer[payload]
	arm := func(delay time.Duration) {
		for _, el := range els {
			for range 10 {
				w.AfterFunc(el, delay, count)
				p := &payload{}
				ws = append(ws, weak.Make(p))
				w.Schedule(el, ctx, gnet.RunnableFunc(func(context.Context) error {
					p.n++
					count()
					return nil
				}), delay)
			}
		}
	}
	for _, el := range els {
		w.Every(el, time.Millisecond, func() { ticks.Add(1); count() }) // never stopped by the test
	}
	arm(300 * time.Millisecond)
	if !eventually(5*time.Second, func() bool { return ticks.Load() >= 20 }) {
		t.Fatal("the periodic tasks did not run")
	}
	srv.stop(t) // while the periodic tasks fire every millisecond on both loops
	stopped.Store(1)
	arm(time.Millisecond)
	if !eventually(5*time.Second, func() bool { return h.Len() == 0 }) {
		t.Errorf("h.Len() = %d 5s after the engine stopped, want 0: the timers of a stopped engine stay armed", h.Len())
	}
	if n := registryLen(&w.loops); n != 0 {
		t.Errorf("the Wheel holds %d loops of a stopped engine, want 0", n)
	}
	if n := late.Load(); n != 0 {
		t.Errorf("%d tasks ran after gnet.Run returned", n)
	}
	if !collected(ws) {
		t.Error("a Schedule task of a stopped engine is still referenced")
	}
}

// churnServer is a gnet server whose sessions come from a pool (so an Idle
// is initialized again, on either loop, once Closed), with an idle
// timeout, a lifetime, a write-idle ping, a Schedule per conn under a
// context cancelled when it closes, and an AfterFunc per request: timers
// firing all the time, also as the engine stops.
type churnServer struct {
	*testServer
	pool   sync.Pool
	tasks  atomic.Int64 // callbacks run
	early  atomic.Int64 // lifetime closes before the lifetime
	loopMu sync.Mutex
	loops  []gnet.EventLoop
	obj    *payload // what a weak pointer tells is collected
}

type churnSession struct {
	idle   Idle
	opened time.Time
	cancel context.CancelFunc
}

const churnLife = 40 * time.Millisecond

func (s *churnServer) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	ss, _ := s.pool.Get().(*churnSession)
	if ss == nil {
		ss = new(churnSession)
	}
	ss.opened = s.w.h.Now() // no later than the lifetime's mark
	ss.idle.Init(s.idler, c)
	var ctx context.Context
	ctx, ss.cancel = context.WithCancel(context.Background())
	c.SetContext(ss)
	obj := s.obj
	s.w.Schedule(c.EventLoop(), ctx, gnet.RunnableFunc(func(context.Context) error {
		runtime.KeepAlive(obj)
		s.tasks.Add(1)
		return nil
	}), 5*time.Millisecond)
	s.loopMu.Lock()
	if !slices.Contains(s.loops, c.EventLoop()) {
		s.loops = append(s.loops, c.EventLoop())
	}
	s.loopMu.Unlock()
	return nil, gnet.None
}

func (s *churnServer) OnTraffic(c gnet.Conn) gnet.Action {
	ss := c.Context().(*churnSession)
	ss.idle.Traffic()
	buf, _ := c.Next(-1)
	ss.idle.Write(buf)
	s.w.AfterFunc(c.EventLoop(), 2*time.Millisecond, func() { s.tasks.Add(1) })
	return gnet.None
}

func (s *churnServer) OnClose(c gnet.Conn, _ error) gnet.Action {
	ss := c.Context().(*churnSession)
	if errors.Is(ss.idle.Err(), ErrLifetime) && s.w.h.Now().Sub(ss.opened) < churnLife {
		s.early.Add(1)
	}
	ss.idle.Close()
	ss.cancel()
	c.SetContext(nil)
	s.pool.Put(ss)
	return gnet.None
}

// churnClients dials addr from n goroutines until stop is closed: each
// sends a line every few milliseconds and dials again when the server
// closes its conn.
func churnClients(addr string, n int, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64)
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				for {
					select {
					case <-stop:
						c.Close()
						return
					case <-time.After(3 * time.Millisecond):
					}
					c.SetDeadline(time.Now().Add(time.Second))
					if _, err := c.Write([]byte("hb\n")); err != nil {
						break
					}
					if _, err := c.Read(buf); err != nil {
						break
					}
				}
				c.Close()
			}
		}()
	}
	return &wg
}

func TestLoop_EnginesStartedAndStoppedInALoopLeakNothing(t *testing.T) {
	watchdog(t, 60*time.Second)
	w := newTestWheel(t)
	h := w.Hierarchy()
	idler := w.Idler(30*time.Millisecond, MaxLifetime(churnLife),
		OnWriteIdle(2*time.Millisecond, func(c gnet.Conn) { c.Context().(*churnSession).idle.Write([]byte("ping\n")) }))
	const cycles = 6
	var servers []weak.Pointer[payload]
	goroutines := 0
	for i := range cycles {
		s := &churnServer{testServer: &testServer{w: w, idler: idler}, obj: new(payload)}
		servers = append(servers, weak.Make(s.obj))
		srv := runServer(t, s, s.testServer)
		stop := make(chan struct{})
		clients := churnClients(srv.addr, 8, stop)
		if !eventually(5*time.Second, func() bool {
			s.loopMu.Lock()
			defer s.loopMu.Unlock()
			return len(s.loops) == 2
		}) {
			t.Fatal("no conn opened on both loops")
		}
		for _, el := range s.loops {
			w.Every(el, time.Millisecond, func() { s.tasks.Add(1) }) // never stopped by the test
		}
		time.Sleep(60 * time.Millisecond) // idle, lifetime and write-idle closes, pooled sessions reused
		if !eventually(5*time.Second, func() bool { return s.tasks.Load() >= 50 }) {
			t.Fatalf("cycle %d: %d tasks ran in 5s", i, s.tasks.Load())
		}
		srv.stop(t) // with timers firing on both loops
		close(stop)
		clients.Wait()
		if n := s.early.Load(); n != 0 {
			t.Errorf("cycle %d: %d conns closed for their lifetime before it had passed (a pooled session's earlier conn's close?)", i, n)
		}
		if i == 0 {
			if !eventually(5*time.Second, func() bool { return h.Len() == 0 }) {
				t.Fatalf("h.Len() = %d after the first engine stopped, want 0", h.Len())
			}
			time.Sleep(600 * time.Millisecond) // Engine.Stop's goroutine returns at its next poll
			goroutines = runtime.NumGoroutine()
		}
	}
	if !eventually(5*time.Second, func() bool { return h.Len() == 0 }) {
		t.Errorf("h.Len() = %d after %d engines stopped, want 0", h.Len(), cycles)
	}
	if n := registryLen(&w.loops); n != 0 {
		t.Errorf("the Wheel holds %d loops after every engine stopped, want 0", n)
	}
	if n := registryLen(&idler.loops); n > 2 {
		t.Errorf("the Idler holds %d loops after %d engines of 2 loops, want at most the last engine's 2", n, cycles)
	}
	if !eventually(5*time.Second, func() bool { return runtime.NumGoroutine() <= goroutines }) {
		t.Errorf("%d goroutines after %d engines, %d after the first", runtime.NumGoroutine(), cycles, goroutines)
	}
	// gnet itself keeps the last engine (its allEngines, by address).
	if !collected(servers[:cycles-1]) {
		for i, s := range servers[:cycles-1] {
			if s.Value() != nil {
				t.Errorf("what the server of engine %d refers to is still referenced after it stopped", i)
			}
		}
	}
}

// stepClock is a Mock whose Now the benchmark steps without Mock.Add's
// sleep (the hierarchy is not started: it only reads Now and Since).
type stepClock struct {
	*clock.Mock
	d atomic.Int64
}

func (c *stepClock) Now() time.Time                  { return c.Mock.Now().Add(time.Duration(c.d.Load())) }
func (c *stepClock) step(d time.Duration)            { c.d.Add(int64(d)) }
func (c *stepClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// BenchmarkLoop_FiringAndDrain is one timer's firing, its hop to the loop
// (push, Execute) and the drain on the loop: the cost per batch.
func BenchmarkLoop_FiringAndDrain(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("timers=%d", n), func(b *testing.B) {
			clk := &stepClock{Mock: clock.NewMock()}
			h, _ := timingwheel.New(timingwheel.WithClock(clk))
			w := New(h)
			loop := &fakeLoop{}
			ran := 0
			ts := make([]*timingwheel.Timer, n)
			for i := range ts {
				ts[i] = w.AfterFunc(loop, time.Millisecond, func() { ran++ })
			}
			b.ReportAllocs()
			for b.Loop() {
				clk.step(time.Millisecond)
				h.Advance()
				loop.runQueued()
				loop.runErrs = loop.runErrs[:0]
				for _, t := range ts {
					t.Reset(time.Millisecond)
				}
			}
			if ran == 0 {
				b.Fatal("no timer ran")
			}
		})
	}
}
