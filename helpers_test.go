package timingwheel

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The helpers of the tests of both packages, each written once: watchdogs
// that name what hung, clocks, hierarchies, conns and what a test checks on
// them. export_test.go exports them to the black-box tests (package
// timingwheel_test).

// goWatched runs f on a goroutine of its own. done is closed when f ends;
// settle, called after that, raises a panic of f again here, and stops the
// test here too if f ended its goroutine by t.FailNow (a require inside it)
// or runtime.Goexit: f has reported why.
func goWatched(t *testing.T, f func()) (done <-chan struct{}, settle func()) {
	ch := make(chan struct{})
	var p any
	returned := false
	go func() {
		defer close(ch)
		defer func() { p = recover() }()
		f()
		returned = true
	}()
	return ch, func() {
		if p != nil {
			panic(p)
		}
		if !returned {
			t.FailNow()
		}
	}
}

// mustReturn runs f on a goroutine of its own and fails the test, naming
// what hung, unless f returns within d (the hung goroutine is left behind;
// it holds only the test's own hierarchy). A panic of f is raised again
// here. If f ends its goroutine by t.FailNow (a require inside it), the test
// stops here too.
func mustReturn(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done, settle := goWatched(t, f)
	select {
	case <-done:
		settle()
	case <-time.After(d):
		t.Fatalf("hung: %s did not return within %v", what, d)
	}
}

// mustProgress runs f on a goroutine of its own, as mustReturn does, and
// fails the test, naming what hung and where, if progress (read with
// atomic loads; f moves it on as it works) stays put for stall.
func mustProgress(t *testing.T, stall time.Duration, what string, progress *atomic.Int64, f func()) {
	t.Helper()
	done, settle := goWatched(t, f)
	tick := time.NewTicker(stall)
	defer tick.Stop()
	last := progress.Load()
	for {
		select {
		case <-done:
			settle()
			return
		case <-tick.C:
			now := progress.Load()
			if now == last {
				t.Fatalf("hung: %s made no progress for %v, at step %d", what, stall, now)
			}
			last = now
		}
	}
}

// stopWithin is h.Stop under mustReturn: Stop waits for the driver.
func stopWithin(t *testing.T, h *Hierarchy, what string) {
	t.Helper()
	mustReturn(t, 10*time.Second, "Stop of the driver ("+what+")", h.Stop)
}

// waitWithin is wg.Wait under mustReturn.
func waitWithin(t *testing.T, d time.Duration, wg *sync.WaitGroup, what string) {
	t.Helper()
	mustReturn(t, d, what, wg.Wait)
}

// recvWithin waits for a value on ch, failing the test, naming what hung,
// unless one comes within d.
func recvWithin[T any](t *testing.T, d time.Duration, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("hung: %s did not happen within %v", what, d)
		panic("unreachable")
	}
}

// inBubble runs f in a synctest bubble under mustReturn: a driver that
// spins keeps the bubble from ever blocking, and synctest.Wait from
// returning.
func inBubble(t *testing.T, what string, f func(t *testing.T)) {
	t.Helper()
	mustReturn(t, 30*time.Second, what+" (in a synctest bubble)", func() { synctest.Test(t, f) })
}

// advanceWithin is h.Advance under mustReturn.
func advanceWithin(t *testing.T, h *Hierarchy, what string) int {
	t.Helper()
	var n int
	mustReturn(t, 5*time.Second, "Advance ("+what+")", func() { n = h.Advance() })
	return n
}

// advanceTo sets clk to at and advances h, under mustReturn.
func advanceTo(t *testing.T, h *Hierarchy, clk interface{ Set(time.Time) }, at time.Time, what string) int {
	t.Helper()
	clk.Set(at)
	return advanceWithin(t, h, what)
}

// fakeClock is a manual clock safe for concurrent use. Unlike clock.Mock,
// moving it does not sleep, so tests can take millions of steps.
type fakeClock struct {
	clock.Clock // nil: only Now and Since are implemented
	mu          sync.Mutex
	now         time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}
func (c *fakeClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// newMock returns a hierarchy on a fresh clock.Mock.
func newMock(t testing.TB, opts ...Option) (*Hierarchy, *clock.Mock) {
	t.Helper()
	mock := clock.NewMock()
	h := mustNew(t, append([]Option{WithClock(mock)}, opts...)...)
	return h, mock
}

// goRandom starts n goroutines on wg; the g-th runs body with a
// rand.Rand of its own, seeded with g and stream.
func goRandom(wg *sync.WaitGroup, n int, stream uint64, body func(g int, r *rand.Rand)) {
	for g := range n {
		wg.Go(func() { body(g, rand.New(rand.NewPCG(uint64(g), stream))) })
	}
}

// mustNew is New(opts...), failing the test on an error.
func mustNew(t testing.TB, opts ...Option) *Hierarchy {
	t.Helper()
	h, err := New(opts...)
	require.NoError(t, err)
	return h
}

// newStarted returns a hierarchy with opts and its driver started; the
// caller stops it.
func newStarted(t testing.TB, opts ...Option) *Hierarchy {
	t.Helper()
	h := mustNew(t, opts...)
	h.Start()
	return h
}

// newFake returns a hierarchy on a fresh fakeClock.
func newFake(t testing.TB, opts ...Option) (*Hierarchy, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	h := mustNew(t, append([]Option{WithClock(clk)}, opts...)...)
	return h, clk
}

// goUntilClosed calls f(0), f(1), ... on a goroutine of wg until stop is
// closed (looked at before each call).
func goUntilClosed(wg *sync.WaitGroup, stop <-chan struct{}, f func(i int)) {
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			f(i)
		}
	})
}

// advanceContinuously moves clk by a millisecond and advances h, over and
// over on its own goroutine, until the returned function is called; that
// function returns once the goroutine has stopped, or fails the test if it
// does not within 10s (an Advance hung).
func advanceContinuously(t *testing.T, h *Hierarchy, clk *fakeClock) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	goUntilClosed(&wg, done, func(int) {
		clk.Add(time.Millisecond)
		h.Advance()
	})
	return func() {
		t.Helper()
		close(done)
		waitWithin(t, 10*time.Second, &wg, "the goroutine advancing continuously (its Advance)")
	}
}

// recorder collects the names of fired timers in order.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) fn(name string) func() {
	return func() {
		r.mu.Lock()
		r.got = append(r.got, name)
		r.mu.Unlock()
	}
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

// mustCheck fails the test unless h's invariants hold (see check), or if
// the check, which takes every shard's lock, does not return within 10s.
func mustCheck(t testing.TB, h *Hierarchy) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- h.check() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("hung: the invariant check did not return within 10s (a shard's lock left held?)")
	}
}

// waitFreed runs the collector until p's target is freed or 2s pass.
func waitFreed[T any](p weak.Pointer[T]) bool {
	deadline := time.Now().Add(2 * time.Second)
	for p.Value() != nil && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	return p.Value() == nil
}

// Helpers of the tests of idle conns: real TCP conns on 127.0.0.1, net.Pipe
// conns, and what a test checks on them.

// tcpPair returns both ends of a fresh TCP connection on 127.0.0.1: the one
// the listener accepted and the one that dialled. Both are closed when the
// test ends.
func tcpPair(t testing.TB) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err = net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	select {
	case server = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("Accept hung for 10s on a connection that was dialled")
	}
	require.NotNil(t, server, "Accept failed")
	t.Cleanup(func() { server.Close() })
	return server, client
}

// watchdog closes conns (or listeners), which unblocks whatever waits on
// them, and fails the test saying what hung, if the test is still running
// after d.
func watchdog(t *testing.T, d time.Duration, what string, conns ...io.Closer) {
	t.Helper()
	wd := time.AfterFunc(d, func() {
		t.Errorf("watchdog: %s did not happen within %v", what, d)
		for _, c := range conns {
			c.Close()
		}
	})
	t.Cleanup(func() { wd.Stop() })
}

// send writes msg to c, failing the test if it cannot.
func send(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	require.NoError(t, c.SetWriteDeadline(time.Now().Add(10*time.Second)))
	_, err := io.WriteString(c, msg)
	require.NoError(t, err)
}

// receive reads exactly len(want) bytes from c and checks them.
func receive(t *testing.T, c net.Conn, want string) {
	t.Helper()
	buf := make([]byte, len(want))
	_, err := io.ReadFull(c, buf)
	require.NoError(t, err)
	require.Equal(t, want, string(buf))
}

// assertTimeout checks that err is the error of an idle conn that timed out.
func assertTimeout(t *testing.T, err error, op string) {
	t.Helper()
	require.Error(t, err, op)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded, op)
	var ne net.Error
	if assert.ErrorAs(t, err, &ne, op) {
		assert.True(t, ne.Timeout(), "%s: %v: Timeout() is false", op, err)
	}
	var oe *net.OpError
	if assert.ErrorAs(t, err, &oe, op) {
		assert.Equal(t, op, oe.Op)
		assert.Equal(t, "tcp", oe.Net)
	}
}

// assertPeerSeesClose checks that the peer of a conn sees it closed: its
// Read returns io.EOF (or a reset), not a timeout of its own deadline.
func assertPeerSeesClose(t *testing.T, peer net.Conn) {
	t.Helper()
	require.NoError(t, peer.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err := peer.Read(make([]byte, 1))
	require.Error(t, err)
	assert.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the peer waited 10s and the conn was not closed: %v", err)
}

// pipe returns both ends of a net.Pipe, closed when the test ends.
func pipe(t *testing.T) (local, peer net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// peerSeesClosed reports whether the local end of peer's pipe was closed:
// a Read on peer returns io.EOF at once then, and times out (20ms of real
// time) while the other end is open and silent.
func peerSeesClosed(t *testing.T, peer net.Conn) bool {
	t.Helper()
	if err := peer.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); errors.Is(err, io.ErrClosedPipe) {
		return true // net.Pipe: either end is closed
	}
	_, err := peer.Read(make([]byte, 1))
	require.Error(t, err, "the peer read data nobody wrote")
	return errors.Is(err, io.EOF)
}

// advanceRecovering runs Advance (with a watchdog) and returns what it
// panicked with, nil if nothing.
func advanceRecovering(t *testing.T, h *Hierarchy, what string) (p any) {
	t.Helper()
	defer func() { p = recover() }()
	advanceWithin(t, h, what)
	return nil
}

// weakRef returns a function that reports whether p is still reachable.
func weakRef[T any](p *T) func() bool {
	w := weak.Make(p)
	return func() bool { return w.Value() != nil }
}

// assertIdleErr checks that err is the error of a conn the hierarchy
// closed, for why (ErrIdle or ErrLifetime).
func assertIdleErr(t *testing.T, err error, why error, op string) {
	t.Helper()
	require.Error(t, err, op)
	assert.ErrorIs(t, err, why, op)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded, op)
	var ne net.Error
	if assert.ErrorAs(t, err, &ne, op) {
		assert.True(t, ne.Timeout(), "%s: %v: Timeout() is false", op, err)
	}
}

// Helpers of panics.

// mustPanic calls f and fails unless it panics with a message that starts
// with "timingwheel:" and contains want.
func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Errorf("no panic, want one about %q", want)
			return
		}
		msg := fmt.Sprint(r)
		if !strings.HasPrefix(msg, "timingwheel:") || !strings.Contains(msg, want) {
			t.Errorf("panic %q, want a message prefixed %q about %q", msg, "timingwheel:", want)
		}
	}()
	f()
}

// recovered calls f and returns what it panicked with, or nil.
func recovered(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// closeRace is the harness of the tests that race Close with the traffic and
// the timers of many conns on a running hierarchy: Conns TCP pairs on
// 127.0.0.1, the server end of each wrapped by Wrap; on each pair a peer
// writing "x" to the client end at random gaps of up to 1.5 idle (and
// draining what the conn writes, if Drain), Readers reading the conn,
// Writers writing "y" to it at random gaps below WriteGap, a goroutine
// setting its deadline a second on every millisecond (if SetDeadlines),
// and, racing with it all, a Close of both ends closeAfter after the pair
// was made. A Read or Write ends at its first error, which Expected must
// accept (it may count what it sees). Run fails the test if the goroutines
// are not all done within 20s, for each error Expected did not accept, and
// if a timer is left armed once every conn was closed. Its fields are
// exported for the black-box tests (export_test.go).
type closeRace struct {
	Conns            int
	Readers, Writers int // each, per conn
	ReadBuf          int // bytes a Read asks for
	WriteGap         time.Duration
	Drain            bool
	SetDeadlines     bool
	// Wrap wraps the server end of pair i; it returns the conn, its idle
	// (the peer's gaps scale with it) and when to close the pair.
	Wrap     func(i int, server net.Conn) (c net.Conn, idle, closeAfter time.Duration)
	Expected func(op string, err error) bool // op is "read" or "write"
}

func (r closeRace) Run(t *testing.T, h *Hierarchy) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, (r.Readers+r.Writers)*r.Conns)
	for i := range r.Conns {
		server, client := tcpPair(t)
		conn, idle, closeAfter := r.Wrap(i, server)
		wg.Go(func() { // the peer: sends at random gaps, some too long
			if r.Drain {
				go io.Copy(io.Discard, client)
			}
			rng := rand.New(rand.NewPCG(uint64(i), 2))
			for {
				time.Sleep(time.Duration(rng.Int64N(int64(idle))) * 3 / 2)
				if _, err := client.Write([]byte("x")); err != nil {
					return
				}
			}
		})
		for range r.Readers {
			wg.Go(func() {
				buf := make([]byte, r.ReadBuf)
				for {
					if _, err := conn.Read(buf); err != nil {
						if !r.Expected("read", err) {
							errs <- err
						}
						return
					}
				}
			})
		}
		for range r.Writers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(i), 3))
				for {
					if _, err := conn.Write([]byte("y")); err != nil {
						if !r.Expected("write", err) {
							errs <- err
						}
						return
					}
					time.Sleep(time.Duration(rng.Int64N(int64(r.WriteGap/time.Microsecond))) * time.Microsecond)
				}
			})
		}
		if r.SetDeadlines {
			wg.Go(func() {
				for {
					if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
						return // closed
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
		wg.Go(func() { // and Close, racing with it all
			time.Sleep(closeAfter)
			conn.Close()
			client.Close()
		})
	}
	waitWithin(t, 20*time.Second, &wg, "the peers, readers, writers, deadline setters and closers of the conns")
	close(errs)
	for err := range errs {
		t.Errorf("unexpected error: %v", err)
	}
	assert.Equal(t, 0, h.Len(), "timers left armed after every conn was closed")
}

// level0Span returns the number of ticks level 0 spans: a timer filed at
// least that far beyond its shard's now is in a coarser level.
func level0Span(h *Hierarchy) int64 { return h.shards[0].levels[0].span }
