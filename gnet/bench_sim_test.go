package gnetwheel

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/internal/demo"
	"github.com/timingwheel/timingwheel/internal/idlestate"
)

// The benchmarks in this file measure the bookkeeping of idle timeouts
// alone, without sockets: simulated conns on simulated event loops (a
// goroutine each, with a task queue like gnet's), each conn getting one
// heartbeat a second, against what gnet users write without gnetwheel:
//
//	impl=wheel      gnetwheel.Idle per conn: Traffic on the loop, closed on the loop
//	impl=timer      package netidle's shape on the loop, for comparison: a Timer per conn
//	                bound with InitOn to its loop, marks that Traffic stores, and a look
//	                on the loop (package idlestate, as Idle's) when the timer fires
//	impl=scan       OnTick every 4ms scans a map of every conn's last-activity time
//	                (lateness up to a scan period: the precision of a 1ms wheel tick
//	                plus its hop, p99 <= 5ms) and Closes the idle ones
//	impl=afterfunc  a time.AfterFunc per conn, Reset on traffic, Close from the timer's goroutine
//	impl=none       the heartbeats alone: subtracted from the others
//
// Run: go test -run '^$' -bench 'Sim' -benchtime 1x
//
// BenchmarkIdle_Traffic is Traffic's own cost on the loop.

const (
	simIdle     = 2 * time.Second      // heartbeats come every second
	simScanTick = 4 * time.Millisecond // the scan's period: lateness p99 <= 5ms
	simLoops    = 2
)

// simLoop is an event loop: one goroutine running queued tasks and, every
// millisecond, the heartbeats of the conns due in that millisecond.
type simLoop struct {
	gnet.EventLoop
	tasks chan func()
}

func (l *simLoop) Execute(_ context.Context, r gnet.Runnable) error {
	l.tasks <- func() { r.Run(context.Background()) }
	return nil
}

func (l *simLoop) Close(c gnet.Conn) error { c.(*simConn).closeOnLoop(); return nil }

// simConn is a conn of a simLoop.
type simConn struct {
	gnet.Conn
	loop   *simLoop
	i      int
	closed bool // loop-owned
	b      *simBench
}

func (c *simConn) EventLoop() gnet.EventLoop { return c.loop }

// Close is gnet's Conn.Close: safe anywhere, it queues the close on the loop.
func (c *simConn) Close() error {
	c.loop.tasks <- c.closeOnLoop
	return nil
}

func (c *simConn) closeOnLoop() {
	if c.closed {
		return
	}
	c.closed = true
	c.b.tr.onClose(c.i)
	c.b.closed.Add(1)
	if d := c.b.deadlineOf(c.i); !d.IsZero() {
		c.b.lateMu.Lock()
		c.b.late = append(c.b.late, time.Since(d))
		c.b.lateMu.Unlock()
	}
}

// tracker is one way of keeping idle timeouts. open, traffic and onClose
// run on the conn's loop.
type tracker interface {
	open(i int, c *simConn)
	traffic(i int)
	onClose(i int)
	start()
	stop()
}

// simBench is one run: n conns over simLoops loops, the silent ones
// (every silentEvery-th) never sending after they open.
type simBench struct {
	n, silentEvery int
	tr             tracker
	loops          []*simLoop
	conns          []simConn
	opened         time.Time
	openedAt       []time.Time // of the silent conns, by i/silentEvery
	closed         atomic.Int64
	lateMu         sync.Mutex
	late           []time.Duration
}

func (b *simBench) silent(i int) bool { return b.silentEvery > 0 && i%b.silentEvery == 0 }

// deadlineOf is the deadline a silent conn was closed for; zero for others.
func (b *simBench) deadlineOf(i int) time.Time {
	if b.silent(i) {
		return b.openedAt[i/b.silentEvery].Add(simIdle)
	}
	return time.Time{}
}

// open makes the loops and the conns and starts the tracker on them.
func (b *simBench) open() {
	b.loops = make([]*simLoop, simLoops)
	for i := range b.loops {
		b.loops[i] = &simLoop{tasks: make(chan func(), 1<<16)}
	}
	b.conns = make([]simConn, b.n)
	b.openedAt = make([]time.Time, b.n/max(b.silentEvery, 1)+1)
	b.tr.start()
	b.opened = time.Now()
	for i := range b.conns {
		c := &b.conns[i]
		*c = simConn{loop: b.loops[i%simLoops], i: i, b: b}
		if b.silent(i) {
			b.openedAt[i/b.silentEvery] = time.Now()
		}
		b.tr.open(i, c)
	}
}

// firer is a tracker whose hierarchy counts its timers' firings.
type firer interface{ fired() uint64 }

// run opens the conns, runs the loops for d with heartbeats, and returns
// the process CPU used over d, and the tracker's timer firings over d
// (if it is a firer).
func (b *simBench) run(d time.Duration) (time.Duration, uint64) {
	b.open()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	f, _ := b.tr.(firer)
	var fired0 uint64
	if f != nil {
		fired0 = f.fired()
	}
	cpu0 := cpuTime()
	for li, l := range b.loops {
		wg.Go(func() { b.loop(li, l, stop) })
	}
	time.Sleep(d)
	close(stop)
	wg.Wait()
	cpu := cpuTime() - cpu0
	var fired uint64
	if f != nil {
		fired = f.fired() - fired0
	}
	b.tr.stop()
	return cpu, fired
}

// loop is loop li: every millisecond ms, the heartbeat of each of its
// conns i with i/simLoops ≡ ms (mod 1000): one per conn per second.
func (b *simBench) loop(li int, l *simLoop, stop chan struct{}) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	perLoop := (b.n + simLoops - 1) / simLoops
	start := time.Now()
	next := 0 // heartbeats sent so far by this loop, in order
	for {
		select {
		case <-stop:
			return
		case f := <-l.tasks:
			f()
		case now := <-tick.C:
			// Every conn once a second, spread evenly.
			due := int(float64(perLoop) * now.Sub(start).Seconds())
			for ; next < due; next++ {
				i := (next%perLoop)*simLoops + li
				if i < b.n && !b.silent(i) && !b.conns[i].closed {
					b.tr.traffic(i)
				}
			}
		}
	}
}

// wheelTracker is gnetwheel: an Idle per conn, held by value.
type wheelTracker struct {
	h     *timingwheel.Hierarchy
	idler *Idler
	s     []struct{ idle Idle }
}

func (t *wheelTracker) start() {
	t.h, _ = timingwheel.New()
	t.idler = New(t.h).Idler(simIdle)
	t.h.Start()
}
func (t *wheelTracker) stop()                  { t.h.Stop() }
func (t *wheelTracker) fired() uint64          { return t.h.Stats().Fired }
func (t *wheelTracker) open(i int, c *simConn) { t.s[i].idle.Init(t.idler, c) }
func (t *wheelTracker) traffic(i int)          { t.s[i].idle.Traffic() }
func (t *wheelTracker) onClose(i int)          { t.s[i].idle.Close() }

// timerTracker is netidle's shape on a gnet loop: a Timer per conn, bound
// with InitOn to the conn's loop (Wheel.Exec, which allocates nothing per
// run), and marks that Traffic stores; the look on the loop judges them as
// Idle's scan does (idlestate), closing the conn or arming the timer again
// for the next deadline.
type timerTracker struct {
	h *timingwheel.Hierarchy
	w *Wheel
	s []timerSession
}

type timerSession struct {
	m idlestate.Marks
	t timingwheel.Timer
	h *timingwheel.Hierarchy
	c *simConn
}

func (t *timerTracker) start() {
	t.h, _ = timingwheel.New()
	t.w = New(t.h)
	t.h.Start()
}
func (t *timerTracker) stop()         { t.h.Stop() }
func (t *timerTracker) fired() uint64 { return t.h.Stats().Fired }
func (t *timerTracker) open(i int, c *simConn) {
	s := &t.s[i]
	s.h, s.c = t.h, c
	s.m = idlestate.Start(int64(t.h.Elapsed()), int64(simIdle), 0)
	s.t.InitOn(t.h, t.w.Exec(c.loop), s.look)
	s.arm()
}
func (t *timerTracker) traffic(i int) {
	s := &t.s[i]
	var back bool
	if s.m.Read, back = idlestate.Moved(s.m.Read, int64(s.h.Elapsed())); back {
		s.arm()
	}
}
func (t *timerTracker) onClose(i int) { t.s[i].t.Stop() }

func (s *timerSession) arm() {
	st := idlestate.State{Marks: s.m}
	s.t.ResetAt(s.h.Origin().Add(time.Duration(st.Next())))
}

func (s *timerSession) look() {
	j := idlestate.NewJudge(s.h, s.t.Deadline())
	st := idlestate.State{Marks: s.m}
	if st.Due(&j, idlestate.LifetimeEnd) != idlestate.None {
		s.c.loop.Close(s.c)
		return
	}
	s.arm()
}

// scanTracker is OnTick scanning every conn's last-activity time: gnet
// runs OnTick on a goroutine of its own, so the map has a lock and the
// times are atomic.
type scanTracker struct {
	mu    sync.Mutex
	conns map[*simConn]*scanSession
	s     []scanSession
	cs    []*simConn
	done  chan struct{}
	wg    sync.WaitGroup
}

type scanSession struct{ last atomic.Int64 } // UnixNano of the last traffic

func (t *scanTracker) start() {
	t.conns = map[*simConn]*scanSession{}
	t.done = make(chan struct{})
	t.wg.Go(func() {
		tick := time.NewTicker(simScanTick)
		defer tick.Stop()
		var idle []*simConn
		for {
			select {
			case <-t.done:
				return
			case <-tick.C:
			}
			now := time.Now().UnixNano()
			idle = idle[:0]
			t.mu.Lock()
			for c, s := range t.conns {
				if now-s.last.Load() >= int64(simIdle) {
					delete(t.conns, c)
					idle = append(idle, c)
				}
			}
			t.mu.Unlock()
			for _, c := range idle { // not under the lock: OnClose takes it
				c.Close()
			}
		}
	})
}
func (t *scanTracker) stop() { close(t.done); t.wg.Wait() }
func (t *scanTracker) open(i int, c *simConn) {
	t.s[i].last.Store(time.Now().UnixNano())
	t.cs[i] = c
	t.mu.Lock()
	t.conns[c] = &t.s[i]
	t.mu.Unlock()
}
func (t *scanTracker) traffic(i int) { t.s[i].last.Store(time.Now().UnixNano()) }
func (t *scanTracker) onClose(i int) {
	t.mu.Lock()
	delete(t.conns, t.cs[i]) // OnClose takes it out (the scan may have already)
	t.mu.Unlock()
}

// afterFuncTracker is a time.AfterFunc per conn.
type afterFuncTracker struct{ s []struct{ t *time.Timer } }

func (t *afterFuncTracker) start() {}
func (t *afterFuncTracker) stop() {
	for i := range t.s {
		if t.s[i].t != nil {
			t.s[i].t.Stop()
		}
	}
}
func (t *afterFuncTracker) open(i int, c *simConn) {
	t.s[i].t = time.AfterFunc(simIdle, func() { c.Close() })
}
func (t *afterFuncTracker) traffic(i int) { t.s[i].t.Reset(simIdle) }
func (t *afterFuncTracker) onClose(i int) { t.s[i].t.Stop() }

// noneTracker keeps no timeouts: the cost of the heartbeats alone.
type noneTracker struct{}

func (noneTracker) start()             {}
func (noneTracker) stop()              {}
func (noneTracker) open(int, *simConn) {}
func (noneTracker) traffic(int)        {}
func (noneTracker) onClose(int)        {}

func newTracker(impl string, n int) tracker {
	switch impl {
	case "wheel":
		return &wheelTracker{s: make([]struct{ idle Idle }, n)}
	case "timer":
		return &timerTracker{s: make([]timerSession, n)}
	case "scan":
		return &scanTracker{s: make([]scanSession, n), cs: make([]*simConn, n)}
	case "afterfunc":
		return &afterFuncTracker{s: make([]struct{ t *time.Timer }, n)}
	}
	return noneTracker{}
}

// cpuTime is the CPU time the process has used so far.
func cpuTime() time.Duration {
	d, _ := demo.ProcessCPU()
	return d
}

// BenchmarkSimIdleTracking: CPU per second of keeping n conns' idle
// timeouts with one heartbeat per conn per second, net of the heartbeats
// themselves (impl=none), lateness of the silent conns' closes, and heap
// per conn of the tracking state.
func BenchmarkSimIdleTracking(b *testing.B) {
	const d = 3 * time.Second // the silent conns close at 2s
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		var noneCPU float64
		var noneHeap float64
		for _, impl := range []string{"none", "wheel", "timer", "scan", "afterfunc"} {
			b.Run(fmt.Sprintf("conns=%d/impl=%s", n, impl), func(b *testing.B) {
				for b.Loop() {
					runtime.GC()
					h0 := demo.MemAfterGC().HeapAlloc
					sb := &simBench{n: n, silentEvery: 100, tr: newTracker(impl, n)}
					cpu, fired := sb.run(d)
					heap := float64(int64(demo.MemAfterGC().HeapAlloc)-int64(h0)) / float64(n)
					runtime.KeepAlive(sb)
					cpuPerSec := cpu.Seconds() / d.Seconds() * 1000 // ms of CPU per s
					if impl == "none" {
						noneCPU, noneHeap = cpuPerSec, heap
					}
					b.ReportMetric(cpuPerSec, "cpu-ms/s")
					b.ReportMetric(cpuPerSec-noneCPU, "tracking-cpu-ms/s")
					b.ReportMetric(heap-noneHeap, "tracking-B/conn")
					if impl != "none" {
						b.ReportMetric(float64(demo.Quantile(sb.late, 0.99).Microseconds())/1000, "late-p99-ms")
						b.ReportMetric(float64(sb.closed.Load()), "closed")
					}
					if _, ok := sb.tr.(firer); ok {
						b.ReportMetric(float64(fired)/d.Seconds(), "firings/s")
						b.ReportMetric(float64(fired)/float64(max(sb.closed.Load(), 1)), "firings/close")
					}
				}
			})
		}
	}
}

// BenchmarkSimMassExpiry: CPU to close n conns that go idle at the same
// instant, from the firing to the last close on the loops.
func BenchmarkSimMassExpiry(b *testing.B) {
	const n = 10_000
	for _, impl := range []string{"wheel", "timer", "afterfunc"} {
		b.Run(fmt.Sprintf("conns=%d/impl=%s", n, impl), func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				runtime.GC()
				sb := &simBench{n: n, silentEvery: 1, tr: newTracker(impl, n)}
				done := make(chan time.Duration)
				go func() {
					// Wait until just before the deadline, then measure
					// the CPU from there to the last close.
					time.Sleep(simIdle - 50*time.Millisecond)
					cpu0 := cpuTime()
					for sb.closed.Load() < n {
						time.Sleep(100 * time.Microsecond)
					}
					done <- cpuTime() - cpu0
				}()
				sb.runUntil(func() bool { return sb.closed.Load() >= n })
				total += <-done
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// runUntil is run until done reports true (checked every 10ms).
func (b *simBench) runUntil(done func() bool) {
	b.open()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for li, l := range b.loops {
		wg.Go(func() { b.loop(li, l, stop) })
	}
	for !done() {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	b.tr.stop()
}

// BenchmarkIdle_Traffic: one Traffic, on the loop, of one of 10^4 conns
// in turn (the hierarchy on the real clock, not driven: no timer fires).
func BenchmarkIdle_Traffic(b *testing.B) {
	const n = 10_000
	h, err := timingwheel.New()
	if err != nil {
		b.Fatal(err)
	}
	idler := New(h).Idler(simIdle)
	loop := &fakeLoop{}
	s := make([]struct{ idle Idle }, n)
	for i := range s {
		s[i].idle.Init(idler, &fakeConn{loop: loop, idle: &s[i].idle})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s[i].idle.Traffic()
		if i++; i == n {
			i = 0
		}
	}
}
