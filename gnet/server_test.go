package gnetwheel

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/internal/demo"
	"github.com/timingwheel/timingwheel/internal/demotest"
	"golang.org/x/sys/unix"
)

// goid returns the current goroutine's id: how a test tells that a
// callback ran on a conn's event loop.
func goid() uint64 {
	var b [64]byte
	n := runtime.Stack(b[:], false)
	f := bytes.Fields(b[:n]) // "goroutine 123 [running]:"
	id, _ := strconv.ParseUint(string(f[1]), 10, 64)
	return id
}

// watchdog fails the whole test binary, with every goroutine's stack, if
// the test has not ended after d: a hang shows where it hangs.
func watchdog(t *testing.T, d time.Duration) {
	t.Helper()
	name := t.Name()
	timer := time.AfterFunc(d, func() {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		fmt.Fprintf(os.Stderr, "watchdog: %s still running after %v\n%s", name, d, buf[:n])
		os.Exit(2)
	})
	t.Cleanup(func() { timer.Stop() })
}

// newIdleServer returns, under a 20 s watchdog, a test server on a new test
// wheel whose conns w.Idler(idle, opts...) watches; run it with startServer
// or runServer.
func newIdleServer(t *testing.T, idle time.Duration, opts ...IdleOption) *testServer {
	t.Helper()
	watchdog(t, 20*time.Second)
	w := newTestWheel(t)
	return &testServer{w: w, idler: w.Idler(idle, opts...)}
}

// newTestWheel returns a started hierarchy with a fast tick and its Wheel.
func newTestWheel(t *testing.T) *Wheel {
	t.Helper()
	return New(demotest.StartHierarchy(t, timingwheel.WithTick(time.Millisecond)))
}

// event is one thing that happened on the server, with when and where.
type event struct {
	kind string // "open", "traffic", "close", "readidle", "writeidle"
	conn int    // the conn's number, in order of OnOpen
	at   time.Time
	gid  uint64 // goroutine it ran on
	loop uint64 // the goroutine of the conn's OnOpen: its event loop
	err  error  // for "close": Idle.Err()
	last time.Time
}

// session is the test server's per-conn state.
type session struct {
	idle     Idle
	n        int
	loop     uint64    // goroutine id of OnOpen: the conn's loop
	lastRead time.Time // the last OnTraffic, on the hierarchy's clock
}

// testServer is a gnet server whose conns use an Idle from idler.
type testServer struct {
	gnet.BuiltinEventEngine
	w      *Wheel
	idler  *Idler
	echo   bool // write back what arrives
	events chan event
	// Events that waitFor met and did not return; only the test's
	// goroutine touches it.
	backlog []event

	mu   sync.Mutex
	eng  gnet.Engine
	addr string
	next int
	open map[int]gnet.EventLoop
}

func (s *testServer) OnBoot(eng gnet.Engine) gnet.Action {
	fd, err := eng.Dup()
	if err == nil {
		sa, _ := unix.Getsockname(fd)
		unix.Close(fd)
		if in, ok := sa.(*unix.SockaddrInet4); ok {
			s.mu.Lock()
			s.eng, s.addr = eng, fmt.Sprintf("127.0.0.1:%d", in.Port)
			s.mu.Unlock()
		}
	}
	return gnet.None
}

func (s *testServer) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	ss := &session{loop: goid(), lastRead: s.w.h.Now()}
	s.mu.Lock()
	ss.n = s.next
	s.next++
	s.open[ss.n] = c.EventLoop()
	s.mu.Unlock()
	ss.idle.Init(s.idler, c)
	c.SetContext(ss)
	// Stamped with the clock read before Init armed the conn's timers:
	// what "after opening" is measured from.
	s.emit(event{kind: "open", conn: ss.n, loop: ss.loop, at: ss.lastRead})
	return nil, gnet.None
}

func (s *testServer) OnTraffic(c gnet.Conn) gnet.Action {
	ss := c.Context().(*session)
	// Read before Traffic reads it: the idle counts from no earlier than
	// lastRead, so "closed at least an idle after lastRead" holds exactly.
	ss.lastRead = s.w.h.Now()
	ss.idle.Traffic()
	buf, _ := c.Next(-1)
	if s.echo {
		ss.idle.Write(buf)
	}
	s.emit(event{kind: "traffic", conn: ss.n, loop: ss.loop})
	return gnet.None
}

func (s *testServer) OnClose(c gnet.Conn, _ error) gnet.Action {
	ss := c.Context().(*session)
	err := ss.idle.Err()
	ss.idle.Close()
	s.mu.Lock()
	delete(s.open, ss.n)
	s.mu.Unlock()
	s.emit(event{kind: "close", conn: ss.n, loop: ss.loop, err: err, last: ss.lastRead})
	return gnet.None
}

// emit records e, stamped with the time (unless e has one) and goroutine.
func (s *testServer) emit(e event) {
	if e.at.IsZero() {
		e.at = s.w.h.Now()
	}
	e.gid = goid()
	s.events <- e
}

// startServer runs s on 127.0.0.1 with two event loops until the test ends.
func startServer(t *testing.T, s *testServer) string {
	t.Helper()
	return runServer(t, s, s).addr
}

// running is a gnet engine started by runServer.
type running struct {
	addr string
	eng  gnet.Engine
	done chan struct{} // closed when gnet.Run has returned
	err  error         // what it returned, once done is closed
}

// stop stops the engine (Engine.Stop, which returns only at its next
// half-second poll, runs on its own goroutine) and waits for gnet.Run to
// return.
func (r *running) stop(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
		r.eng = gnet.Engine{}
		return
	default:
	}
	eng := r.eng
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		eng.Stop(ctx)
	}()
	select {
	case <-r.done:
		r.eng = gnet.Engine{} // the test's cleanup keeps r: not the engine
	case <-time.After(10 * time.Second):
		t.Fatal("gnet.Run did not return within 10s of Engine.Stop")
	}
}

// runServer runs handler, whose OnBoot is s's, on 127.0.0.1 with two
// event loops; the test's end stops it if it is still running.
func runServer(t *testing.T, handler gnet.EventHandler, s *testServer) *running {
	t.Helper()
	s.events = make(chan event, 4096)
	s.open = map[int]gnet.EventLoop{}
	s.mu.Lock()
	s.addr = ""
	s.mu.Unlock()
	r := &running{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = gnet.Run(handler, "tcp://127.0.0.1:0", gnet.WithMulticore(true), gnet.WithNumEventLoop(2),
			gnet.WithLogger(demo.Quiet{}))
	}()
	for wait := time.Now().Add(5 * time.Second); ; {
		s.mu.Lock()
		r.addr, r.eng = s.addr, s.eng
		s.mu.Unlock()
		if r.addr != "" {
			break
		}
		select {
		case <-r.done:
			t.Fatalf("gnet.Run: %v", r.err)
		default:
		}
		if time.Now().After(wait) {
			t.Fatal("gnet server did not boot")
		}
		time.Sleep(time.Millisecond)
	}
	t.Cleanup(func() { r.stop(t) })
	return r
}

// loopOf returns the event loop of open conn n.
func (s *testServer) loopOf(n int) gnet.EventLoop {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[n]
}

// waitFor returns the next event of kind for conn (any conn if conn < 0),
// or fails the test after d. The events of other kinds it meets are kept,
// in order, for the later calls of waitFor, nextEvent and poll: a close that
// comes while the test waits for an open is not lost.
func (s *testServer) waitFor(t *testing.T, kind string, conn int, d time.Duration) event {
	t.Helper()
	match := func(e event) bool { return e.kind == kind && (conn < 0 || e.conn == conn) }
	for i, e := range s.backlog {
		if match(e) {
			s.backlog = slices.Delete(s.backlog, i, i+1)
			return e
		}
	}
	timeout := time.After(d)
	for {
		select {
		case e := <-s.events:
			if match(e) {
				return e
			}
			s.backlog = append(s.backlog, e)
		case <-timeout:
			t.Fatalf("no %q event for conn %d within %v", kind, conn, d)
		}
	}
}

// nextEvent returns the oldest event not yet returned, waiting for one.
func (s *testServer) nextEvent() event {
	if e, ok := s.poll(); ok {
		return e
	}
	return <-s.events
}

// poll is nextEvent without the wait: false if no event has come.
func (s *testServer) poll() (event, bool) {
	if len(s.backlog) > 0 {
		e := s.backlog[0]
		s.backlog = s.backlog[1:]
		return e, true
	}
	select {
	case e := <-s.events:
		return e, true
	default:
		return event{}, false
	}
}

// dial connects to addr and sends one line, so the server has seen traffic.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
