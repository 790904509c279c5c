package gnetwheel

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/panjf2000/gnet/v2"
	gerrors "github.com/panjf2000/gnet/v2/pkg/errors"
	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/internal/demotest"
)

// openConns dials n conns to s and returns them with their server numbers.
func openConns(t *testing.T, s *testServer, addr string, n int) map[int]net.Conn {
	t.Helper()
	conns := map[int]net.Conn{}
	for range n {
		c := dial(t, addr)
		e := s.waitFor(t, "open", -1, 5*time.Second)
		conns[e.conn] = c
	}
	return conns
}

func TestIdle_ClosesOnItsLoopNeverEarly(t *testing.T) {
	const idle = 100 * time.Millisecond
	s := newIdleServer(t, idle)
	addr := startServer(t, s)
	conns := openConns(t, s, addr, 4)
	for n := range conns {
		e := s.waitFor(t, "close", -1, 5*time.Second)
		if e.gid != e.loop {
			t.Errorf("conn %d closed on goroutine %d, not its loop's (%d)", e.conn, e.gid, e.loop)
		}
		if got := e.at.Sub(e.last); got < idle {
			t.Errorf("conn %d closed %v after its last traffic, before the idle timeout %v", e.conn, got, idle)
		}
		if !errors.Is(e.err, ErrIdle) || !errors.Is(e.err, os.ErrDeadlineExceeded) {
			t.Errorf("conn %d: Idle.Err() in OnClose = %v, want ErrIdle", e.conn, e.err)
		}
		_ = n
	}
	for n, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("client of conn %d: Read = %v, want EOF (the server closed it)", n, err)
		}
	}
}

// TestIdle_TrafficKeepsItOpen judges by what the server saw: a conn that
// the wheel closes must have been silent, on the server's side, for at
// least idle before the close. Heartbeats every 30 ms against an idle of
// 150 ms keep every conn open while they arrive on time; under a heavy
// load they may stall for longer than idle on their way (the client's
// goroutine, the kernel, the loop), and a close after such a stall is the
// idle close doing its job, not a failure. A Traffic that failed to push
// the close back closes a conn some 30 ms after its last heartbeat, which
// the test reports whatever the load. The exact instants are pinned with a
// mock clock by TestIdle_ReFiledManyTimesClosesExactlyAnIdleAfterItsLastTraffic.
func TestIdle_TrafficKeepsItOpen(t *testing.T) {
	const idle = 150 * time.Millisecond
	s := newIdleServer(t, idle)
	addr := startServer(t, s)
	conns := openConns(t, s, addr, 3)
	closed := map[int]bool{}
	checkClose := func(e event, during string) {
		t.Helper()
		if got := e.at.Sub(e.last); got < idle {
			t.Errorf("conn %d closed %s, %v after the last data the server received: before the idle %v", e.conn, during, got, idle)
		} else if during != "" {
			t.Logf("conn %d closed %s after %v of silence on the server's side (heartbeats stalled under load)", e.conn, during, got)
		}
		closed[e.conn] = true
	}
	drain := func() {
		for e, ok := s.poll(); ok; e, ok = s.poll() {
			if e.kind == "close" {
				checkClose(e, "during the heartbeats")
			}
		}
	}
	// Heartbeats every 30ms for 4 idles.
	end := time.Now().Add(4 * idle)
	for time.Now().Before(end) {
		drain()
		for n, c := range conns {
			if closed[n] {
				continue
			}
			if _, err := c.Write([]byte("hb\n")); err != nil {
				// Only a close the server made may fail a Write.
				checkClose(s.waitFor(t, "close", n, 5*time.Second), "during the heartbeats")
			}
		}
		time.Sleep(30 * time.Millisecond)
	}
	drain()
	// Then silence: each is closed, an idle after its last heartbeat.
	for n := range conns {
		if !closed[n] {
			checkClose(s.waitFor(t, "close", n, 5*time.Second), "")
		}
	}
}

func TestIdle_ReadAndWriteIdleCallbacksRunOnTheLoop(t *testing.T) {
	const readIdle, writeIdle = 120 * time.Millisecond, 50 * time.Millisecond
	var s *testServer
	s = newIdleServer(t, readIdle,
		OnReadIdle(func(c gnet.Conn) {
			ss := c.Context().(*session) // safe: on the loop
			s.emit(event{kind: "readidle", conn: ss.n, loop: ss.loop, last: ss.lastRead})
		}),
		OnWriteIdle(writeIdle, func(c gnet.Conn) {
			ss := c.Context().(*session)
			ss.idle.Write([]byte("ping\n")) // writing is safe here
			s.emit(event{kind: "writeidle", conn: ss.n, loop: ss.loop})
		}))
	addr := startServer(t, s)
	conns := openConns(t, s, addr, 2)
	opened := time.Now()
	reads, writes := 0, 0
	var lastWrite [2]time.Time
	for reads < 4 || writes < 6 {
		e := s.nextEvent()
		switch e.kind {
		case "readidle":
			reads++
			if got := e.at.Sub(e.last); got < readIdle {
				t.Errorf("read idle of conn %d came %v after its last traffic, before %v", e.conn, got, readIdle)
			}
		case "writeidle":
			writes++
			if !lastWrite[e.conn].IsZero() && e.at.Sub(lastWrite[e.conn]) < writeIdle {
				t.Errorf("write idle of conn %d came %v after the previous ping, before %v",
					e.conn, e.at.Sub(lastWrite[e.conn]), writeIdle)
			}
			lastWrite[e.conn] = e.at
		case "close":
			t.Fatalf("conn %d closed: OnReadIdle must keep it open", e.conn)
		default:
			continue
		}
		if e.gid != e.loop {
			t.Errorf("%s of conn %d ran on goroutine %d, not its loop's (%d)", e.kind, e.conn, e.gid, e.loop)
		}
		if time.Since(opened) > 10*time.Second {
			t.Fatal("too few idle events")
		}
	}
	// The pings reached the clients.
	for n, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping\n" {
			t.Errorf("client of conn %d read %q, %v; want the write-idle ping", n, buf, err)
		}
	}
}

func TestIdle_MaxLifetimeClosesAChattyConn(t *testing.T) {
	const idle, life = time.Second, 200 * time.Millisecond
	s := newIdleServer(t, idle, MaxLifetime(life))
	addr := startServer(t, s)
	c := dial(t, addr)
	open := s.waitFor(t, "open", -1, 5*time.Second)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				if _, err := c.Write([]byte("hb\n")); err != nil {
					return
				}
			}
		}
	}()
	e := s.waitFor(t, "close", open.conn, 5*time.Second)
	if got := e.at.Sub(open.at); got < life {
		t.Errorf("closed %v after opening, before its lifetime %v", got, life)
	}
	if !errors.Is(e.err, ErrLifetime) {
		t.Errorf("Idle.Err() in OnClose = %v, want ErrLifetime", e.err)
	}
	if e.gid != e.loop {
		t.Errorf("closed on goroutine %d, not its loop's (%d)", e.gid, e.loop)
	}
}

// fakeLoop is a gnet.EventLoop whose Execute queues the runnable for the
// test to run: the test is the loop, and decides when the hop lands. It
// can also play a loop that has exited, as gnet v2.9.7's does: exited
// makes Execute drop the task and return nil (the loop is gone, its
// engine not yet marked shut down), shutdown makes it return
// ErrEngineInShutdown (the engine is).
type fakeLoop struct {
	gnet.EventLoop
	queued   []gnet.Runnable
	closed   []gnet.Conn
	executes int     // calls of Execute
	exited   bool    // Execute drops the task, and returns nil
	shutdown bool    // Execute returns ErrEngineInShutdown
	closeErr error   // Close returns it (gnet's ErrEngineShutdown when OnClose returned Shutdown)
	runErrs  []error // what the runnables run by runQueued returned, nil ones too
}

func (l *fakeLoop) Execute(_ context.Context, r gnet.Runnable) error {
	l.executes++
	switch {
	case l.shutdown:
		return gerrors.ErrEngineInShutdown
	case l.exited:
		return nil
	}
	l.queued = append(l.queued, r)
	return nil
}

func (l *fakeLoop) Close(c gnet.Conn) error {
	l.closed = append(l.closed, c)
	c.(*fakeConn).onClose()
	return l.closeErr
}

// runQueued runs what Execute queued, as the loop would.
func (l *fakeLoop) runQueued() {
	q := l.queued
	l.queued = nil
	for _, r := range q {
		l.runErrs = append(l.runErrs, r.Run(context.Background()))
	}
}

// fakeConn is a gnet.Conn of a fakeLoop; closing it calls its Idle's
// Close, as the handler's OnClose does.
type fakeConn struct {
	gnet.Conn
	loop *fakeLoop
	idle *Idle
	err  error // Idle.Err() seen in "OnClose"
}

func (c *fakeConn) EventLoop() gnet.EventLoop   { return c.loop }
func (c *fakeConn) Write(p []byte) (int, error) { return len(p), nil }
func (c *fakeConn) onClose()                    { c.err = c.idle.Err(); c.idle.Close() }

// newMockIdle returns an Idle of a fake conn on a fake loop, in a hierarchy
// driven by the test with a mock clock.
func newMockIdle(t *testing.T, idle time.Duration, opts ...IdleOption) (*clock.Mock, *timingwheel.Hierarchy, *fakeConn) {
	t.Helper()
	mock := clock.NewMock()
	h := demotest.NewHierarchy(t, timingwheel.WithClock(mock))
	c := &fakeConn{loop: &fakeLoop{}, idle: new(Idle)}
	c.idle.Init(New(h).Idler(idle, opts...), c)
	return mock, h, c
}

func TestIdle_TrafficBetweenFiringAndHopCancelsTheClose(t *testing.T) {
	mock, h, c := newMockIdle(t, 100*time.Millisecond)
	mock.Add(100 * time.Millisecond)
	if n := h.Advance(); n != 1 {
		t.Fatalf("Advance ran %d callbacks, want the idle timer's", n)
	}
	if len(c.loop.queued) != 1 {
		t.Fatalf("the firing queued %d tasks on the loop, want 1", len(c.loop.queued))
	}
	c.idle.Traffic() // on the loop, before the hop lands
	c.loop.runQueued()
	if len(c.loop.closed) != 0 {
		t.Fatal("closed although traffic re-armed the timer after it fired, before the close reached the loop")
	}
	// The new arming closes it, an idle after the traffic, not before.
	mock.Add(99 * time.Millisecond)
	h.Advance()
	c.loop.runQueued()
	if len(c.loop.closed) != 0 {
		t.Fatal("closed before an idle had passed since the traffic")
	}
	mock.Add(time.Millisecond)
	h.Advance()
	c.loop.runQueued()
	if len(c.loop.closed) != 1 || !errors.Is(c.err, ErrIdle) {
		t.Fatalf("closes = %d, Err = %v; want one idle close", len(c.loop.closed), c.err)
	}
	if h.Len() != 0 {
		t.Errorf("h.Len() = %d after the close, want 0 (Close stops the timers)", h.Len())
	}
}

func TestIdle_CloseBetweenFiringAndHopCancelsTheCallback(t *testing.T) {
	calls := 0
	mock, h, c := newMockIdle(t, 100*time.Millisecond, OnReadIdle(func(gnet.Conn) { calls++ }))
	mock.Add(100 * time.Millisecond)
	h.Advance()
	c.idle.Close() // OnClose on the loop, before the hop lands
	c.loop.runQueued()
	if calls != 0 {
		t.Fatal("OnReadIdle ran for a conn closed after the timer fired")
	}
	if h.Len() != 0 {
		t.Errorf("h.Len() = %d, want 0", h.Len())
	}
}

func TestIdle_TimersThatFireTogetherHopInOneTask(t *testing.T) {
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))
	idler := New(h).Idler(50 * time.Millisecond) // near buckets, 1 ms each
	loop := &fakeLoop{}
	conns := make([]*fakeConn, 100)
	for i := range conns {
		if i%10 == 0 {
			mock.Add(time.Millisecond) // ten buckets, not yet due
		}
		conns[i] = &fakeConn{loop: loop, idle: new(Idle)}
		conns[i].idle.Init(idler, conns[i])
	}
	if n := h.Len(); n != 10 {
		t.Fatalf("conns opened in 10 milliseconds arm %d timers, want 10 buckets", n)
	}
	mock.Add(time.Second)
	h.Advance()
	if len(loop.queued) != 1 {
		t.Fatalf("10 idle buckets firing together queued %d tasks on the loop, want 1", len(loop.queued))
	}
	loop.runQueued()
	if len(loop.closed) != 100 {
		t.Fatalf("closed %d conns, want 100", len(loop.closed))
	}
}

func TestIdle_TrafficAllocatesNothing(t *testing.T) {
	_, _, c := newMockIdle(t, time.Minute, OnWriteIdle(time.Second, func(gnet.Conn) {}))
	if a := testing.AllocsPerRun(1000, c.idle.Traffic); a != 0 {
		t.Errorf("Idle.Traffic allocates %v times per call, want 0", a)
	}
	buf := []byte("x")
	if a := testing.AllocsPerRun(1000, func() { c.idle.Write(buf) }); a != 0 {
		t.Errorf("Idle.Write allocates %v times per call, want 0", a)
	}
}

// mockLoop is a hierarchy on a mock clock, an Idler of it, and a fake loop.
func mockLoop(t *testing.T, idle time.Duration, opts ...IdleOption) (*clock.Mock, *timingwheel.Hierarchy, *Idler, *fakeLoop) {
	t.Helper()
	mock := clock.NewMock()
	h := demotest.NewHierarchy(t, timingwheel.WithClock(mock))
	return mock, h, New(h).Idler(idle, opts...), &fakeLoop{}
}

func (l *fakeLoop) conn(idler *Idler) *fakeConn {
	c := &fakeConn{loop: l, idle: new(Idle)}
	c.idle.Init(idler, c)
	return c
}

// step advances the mock clock by d and lets the hierarchy and the loop
// run until they settle at that instant, as a driver that ticks on would:
// a far bucket whose instant the jump passed re-files its conns into near
// buckets whose instant has passed too, which fire at the next Advance.
func step(mock *clock.Mock, h *timingwheel.Hierarchy, l *fakeLoop, d time.Duration) {
	mock.Add(d)
	for range 10 {
		h.Advance()
		if len(l.queued) == 0 {
			return
		}
		l.runQueued()
	}
}

// wantCloses fails the test at once unless loop has closed n conns and err
// is target; msg, with a %d for the closes and a %v for err, says when and
// what it wants.
func wantCloses(t *testing.T, loop *fakeLoop, n int, err, target error, msg string) {
	t.Helper()
	if len(loop.closed) != n || !errors.Is(err, target) {
		t.Fatalf(msg, len(loop.closed), err)
	}
}

// wantNoTimers fails the test, going on, if h holds a timer; msg, with a %d
// for h.Len(), says when and why it must not.
func wantNoTimers(t *testing.T, h *timingwheel.Hierarchy, msg string) {
	t.Helper()
	if n := h.Len(); n != 0 {
		t.Errorf(msg, n)
	}
}

func TestIdle_IsSmallAndHasNoTimer(t *testing.T) {
	if s := reflect.TypeFor[Idle]().Size(); strconv.IntSize == 64 && s > 80 {
		t.Errorf("Idle is %d bytes, want <= 80 on 64-bit (its four marks, list links, the conn, its loop, paused)", s)
	}
	_, h, idler, loop := mockLoop(t, time.Second, MaxLifetime(time.Hour),
		OnWriteIdle(time.Second, func(gnet.Conn) {}))
	for range 1000 {
		loop.conn(idler) // all in the same millisecond: one bucket
	}
	if n := h.Len(); n != 1 {
		t.Errorf("1000 conns opened at one instant, with a write idle and a lifetime, arm %d timers, want 1 (their bucket's)", n)
	}
}

func TestIdle_LazyTrafficAfterTheBucketFiredKeepsItOpen(t *testing.T) {
	mock, h, idler, loop := mockLoop(t, 50*time.Millisecond) // a near bucket
	quiet, chatty := loop.conn(idler), loop.conn(idler)
	mock.Add(50 * time.Millisecond)
	h.Advance() // the bucket fires: its scan is queued on the loop
	if len(loop.queued) != 1 {
		t.Fatalf("the firing queued %d tasks, want 1", len(loop.queued))
	}
	chatty.idle.Traffic() // on the loop, before the scan runs
	loop.runQueued()
	if len(loop.closed) != 1 || loop.closed[0] != quiet {
		t.Fatalf("closed %v; want only the conn without traffic", loop.closed)
	}
	// Re-filed by its traffic: closed an idle after it, not before.
	step(mock, h, loop, 49*time.Millisecond)
	if len(loop.closed) != 1 {
		t.Fatal("closed before an idle had passed since its traffic")
	}
	step(mock, h, loop, time.Millisecond)
	wantCloses(t, loop, 2, chatty.err, ErrIdle, "closes = %d, Err = %v; want the chatty conn closed for idle")
	wantNoTimers(t, h, "h.Len() = %d once every conn closed, want 0")
}

func TestIdle_ReFiledManyTimesClosesExactlyAnIdleAfterItsLastTraffic(t *testing.T) {
	const idle = 50 * time.Millisecond
	mock, h, idler, loop := mockLoop(t, idle)
	c := loop.conn(idler)
	start := mock.Now()
	last := start
	// Traffic at irregular instants, each before the idle passes; the conn
	// is re-filed at each scan of the bucket it sits in.
	for k := range 200 {
		step(mock, h, loop, time.Duration(1+k*7%49)*time.Millisecond)
		if len(loop.closed) != 0 {
			t.Fatalf("closed at +%v, %v after its last traffic (idle %v)", mock.Now().Sub(start), mock.Now().Sub(last), idle)
		}
		c.idle.Traffic()
		last = mock.Now()
		if got := c.idle.Deadline(); !got.Equal(last.Add(idle)) {
			t.Fatalf("Deadline() = %v after traffic, want last traffic + idle", got.Sub(start))
		}
	}
	for mock.Now().Sub(last) < idle {
		if len(loop.closed) != 0 {
			t.Fatalf("closed %v after its last traffic, before the idle %v", mock.Now().Sub(last), idle)
		}
		step(mock, h, loop, time.Millisecond)
	}
	wantCloses(t, loop, 1, c.err, ErrIdle, "at exactly idle after the last traffic: closes = %d, Err = %v; want one idle close")
	if h.Len() != 0 {
		t.Errorf("h.Len() = %d, want 0", h.Len())
	}
}

func TestIdle_CloseUnlinksFromItsBucket(t *testing.T) {
	mock, h, idler, loop := mockLoop(t, time.Second)
	a, b, c := loop.conn(idler), loop.conn(idler), loop.conn(idler)
	b.idle.Close() // the middle one
	if b.idle.next != nil || b.idle.prev != nil || a.idle.next != c.idle || c.idle.prev != a.idle {
		t.Fatal("Close did not unlink the Idle from its bucket's list")
	}
	b.idle.Close() // twice is fine
	a.idle.Close()
	c.idle.Close()
	wantNoTimers(t, h, "h.Len() = %d once the bucket emptied, want 0: its timer is stopped")
	step(mock, h, loop, 2*time.Second)
	if len(loop.closed) != 0 {
		t.Errorf("closed %d conns that had been closed already", len(loop.closed))
	}
	// Steady state: a bucket is reused, Init and Close allocate nothing.
	x := &fakeConn{loop: loop, idle: new(Idle)}
	if a := testing.AllocsPerRun(1000, func() { x.idle.Init(idler, x); x.idle.Close() }); a != 0 {
		t.Errorf("Init+Close allocate %v times, want 0 once a bucket is free", a)
	}
}

func TestIdle_TenThousandConnsIdleAtOneInstantCloseInOneScan(t *testing.T) {
	const n = 10_000
	mock, h, idler, loop := mockLoop(t, time.Second)
	for range n {
		loop.conn(idler)
	}
	step(mock, h, loop, 999*time.Millisecond) // the far bucket re-files them, near
	if len(loop.closed) != 0 {
		t.Fatalf("closed %d conns before their deadline", len(loop.closed))
	}
	mock.Add(time.Millisecond)
	if runs := h.Advance(); runs != 1 {
		t.Errorf("Advance ran %d callbacks for %d conns idle at one instant, want 1", runs, n)
	}
	if len(loop.queued) != 1 {
		t.Fatalf("queued %d tasks on the loop, want 1", len(loop.queued))
	}
	loop.runQueued()
	if len(loop.closed) != n {
		t.Fatalf("one scan closed %d conns, want %d", len(loop.closed), n)
	}
	if h.Len() != 0 {
		t.Errorf("h.Len() = %d, want 0", h.Len())
	}
}

func TestIdle_AnIdleCloseReturnsWhatOnCloseAsked(t *testing.T) {
	mock, h, idler, loop := mockLoop(t, 100*time.Millisecond)
	a, b := loop.conn(idler), loop.conn(idler)
	loop.closeErr = gerrors.ErrEngineShutdown // gnet's Close, when OnClose returned gnet.Shutdown
	step(mock, h, loop, 100*time.Millisecond)
	if len(loop.closed) != 2 || !errors.Is(a.err, ErrIdle) || !errors.Is(b.err, ErrIdle) {
		t.Fatalf("closes = %d, Err = %v, %v; want both conns closed for idle", len(loop.closed), a.err, b.err)
	}
	shutdown := 0
	for _, err := range loop.runErrs {
		if errors.Is(err, gerrors.ErrEngineShutdown) {
			shutdown++
		}
	}
	if shutdown != 1 {
		t.Errorf("the loop's tasks returned %v; want gnet's ErrEngineShutdown once: an idle close honours OnClose's gnet.Shutdown as a peer's close does", loop.runErrs)
	}
	wantNoTimers(t, h, "h.Len() = %d, want 0")
}

func TestIdle_ReInitAfterCloseIsNotTouchedByTheEarlierConnsQueuedClose(t *testing.T) {
	// A lifetime close is on its way to the loop when the conn closes and
	// its session (and Idle) is reused for a new conn.
	const life = 100 * time.Millisecond
	mock, h, idler, loop := mockLoop(t, time.Hour, MaxLifetime(life))
	x := new(Idle)
	old := &fakeConn{loop: loop, idle: x}
	x.Init(idler, old)
	mock.Add(life)
	h.Advance() // the bucket fires for the lifetime: its scan is queued for the loop
	if len(loop.queued) != 1 {
		t.Fatalf("queued %d tasks, want the lifetime close", len(loop.queued))
	}
	x.Close() // the peer closed the old conn: OnClose, on the loop
	next := &fakeConn{loop: loop, idle: x}
	x.Init(idler, next) // a new conn's OnOpen reuses the session
	opened := mock.Now()
	loop.runQueued()
	if len(loop.closed) != 0 {
		t.Fatalf("the new conn was closed (Err %v) by the lifetime close queued for the conn before it", next.err)
	}
	for mock.Now().Sub(opened) < life {
		step(mock, h, loop, 10*time.Millisecond)
		if len(loop.closed) != 0 && mock.Now().Sub(opened) < life {
			t.Fatalf("the new conn closed %v after its Init, before its lifetime %v", mock.Now().Sub(opened), life)
		}
	}
	if len(loop.closed) != 1 || loop.closed[0] != next || !errors.Is(next.err, ErrLifetime) {
		t.Fatalf("closes = %d, Err = %v; want the new conn closed for its own lifetime", len(loop.closed), next.err)
	}
	x.Close()
	wantNoTimers(t, h, "h.Len() = %d, want 0")
}

func TestIdle_ReInitAfterCloseGetsNoWriteIdleOfTheEarlierConn(t *testing.T) {
	const writeIdle = 50 * time.Millisecond
	var got []gnet.Conn
	mock, h, idler, loop := mockLoop(t, time.Hour, OnWriteIdle(writeIdle, func(c gnet.Conn) { got = append(got, c) }))
	x := new(Idle)
	x.Init(idler, &fakeConn{loop: loop, idle: x})
	mock.Add(writeIdle)
	h.Advance() // the write-idle callback is on its way to the loop
	x.Close()
	next := &fakeConn{loop: loop, idle: x}
	x.Init(idler, next)
	loop.runQueued()
	if len(got) != 0 {
		t.Fatal("OnWriteIdle ran for the new conn when the earlier conn's write idle reached the loop")
	}
	step(mock, h, loop, writeIdle)
	if len(got) != 1 || got[0] != next {
		t.Fatalf("OnWriteIdle ran %d times; want once, for the new conn, a write idle after its Init", len(got))
	}
	x.Close()
	wantNoTimers(t, h, "h.Len() = %d, want 0")
}

func TestIdle_InitOfAnIdleInUsePanics(t *testing.T) {
	_, _, idler, loop := mockLoop(t, time.Hour)
	c := loop.conn(idler)
	defer func() {
		if recover() == nil {
			t.Error("Init of an Idle that was not closed did not panic")
		}
	}()
	c.idle.Init(idler, &fakeConn{loop: loop, idle: c.idle})
}

// shutdownOnIdle is the test server, but its OnClose returns gnet.Shutdown
// when the wheel closed the conn.
type shutdownOnIdle struct{ *testServer }

func (s shutdownOnIdle) OnClose(c gnet.Conn, err error) gnet.Action {
	idle := c.Context().(*session).idle.Err() != nil
	s.testServer.OnClose(c, err)
	if idle {
		return gnet.Shutdown
	}
	return gnet.None
}

func TestIdle_ShutdownReturnedByOnCloseOfAnIdleCloseStopsTheEngine(t *testing.T) {
	s := newIdleServer(t, 50*time.Millisecond)
	srv := runServer(t, shutdownOnIdle{s}, s)
	dial(t, srv.addr)
	if e := s.waitFor(t, "close", -1, 5*time.Second); !errors.Is(e.err, ErrIdle) {
		t.Fatalf("Idle.Err() in OnClose = %v, want ErrIdle", e.err)
	}
	select {
	case <-srv.done:
		if srv.err != nil {
			t.Errorf("gnet.Run = %v, want nil (a shutdown the handler asked for)", srv.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("gnet.Run still running 5s after OnClose returned gnet.Shutdown for an idle close: the action was ignored")
	}
	if !eventually(5*time.Second, func() bool { return s.w.Hierarchy().Len() == 0 }) {
		t.Errorf("h.Len() = %d after the engine stopped, want 0", s.w.Hierarchy().Len())
	}
}

// Read and write idle due at one instant come in one look, in the shared
// semantics' order: the read-idle event, then the write-idle event, judged
// afresh after it (a write by the first pushes the second back).
func TestIdle_ReadAndWriteIdleDueTogetherComeInOneLookReadFirst(t *testing.T) {
	for _, pingInReadIdle := range []bool{false, true} {
		var got []string
		var c *fakeConn
		mock, h, idler, loop := mockLoop(t, 50*time.Millisecond,
			OnReadIdle(func(gnet.Conn) {
				got = append(got, "read")
				if pingInReadIdle {
					c.idle.Write([]byte("ping"))
				}
			}),
			OnWriteIdle(50*time.Millisecond, func(gnet.Conn) { got = append(got, "write") }))
		c = loop.conn(idler)
		mock.Add(50 * time.Millisecond)
		h.Advance()
		if len(loop.queued) != 1 {
			t.Fatalf("ping=%v: both events due queued %d tasks, want 1", pingInReadIdle, len(loop.queued))
		}
		loop.runQueued()
		want := []string{"read", "write"}
		if pingInReadIdle {
			want = want[:1]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("ping=%v: events %v in the look, want %v", pingInReadIdle, got, want)
		}
	}
}
