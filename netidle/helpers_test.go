package netidle_test

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/internal/watch"
	"github.com/timingwheel/timingwheel/wheeltest"
)

// The helpers of netidle's tests: watchdogs that name what hung, clocks,
// hierarchies, conns and what a test checks on them. The watchdogs are
// internal/watch's, shared with the root package's tests.

// The watchdogs, written once for this package's tests and the others'
// (internal/watch).
var (
	mustReturn = watch.MustReturn
	waitWithin = watch.WaitWithin
	inBubble   = watch.InBubble
)

// recvWithin is watch.RecvWithin.
func recvWithin[T any](t testing.TB, d time.Duration, ch <-chan T, what string) T {
	t.Helper()
	return watch.RecvWithin(t, d, ch, what)
}

// stopWithin is h.Stop under mustReturn: Stop waits for the driver.
func stopWithin(t testing.TB, h *timingwheel.Hierarchy, what string) {
	t.Helper()
	mustReturn(t, 10*time.Second, "Stop of the driver ("+what+")", h.Stop)
}

// advanceWithin is h.Advance under mustReturn.
func advanceWithin(t *testing.T, h *timingwheel.Hierarchy, what string) int {
	t.Helper()
	var n int
	mustReturn(t, 5*time.Second, "Advance ("+what+")", func() { n = h.Advance() })
	return n
}

// newFakeClock returns a manual clock safe for concurrent use, reading
// 2026-01-01 00:00 UTC (wheeltest's, which users have too): unlike
// clock.Mock, moving it does not sleep, so tests can take millions of
// steps.
func newFakeClock() *wheeltest.Clock {
	return wheeltest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

// advanceBy moves mock by d and runs h.Advance under mustReturn.
func advanceBy(t *testing.T, h *timingwheel.Hierarchy, mock interface{ Add(time.Duration) }, d time.Duration, what string) int {
	t.Helper()
	mock.Add(d)
	return advanceWithin(t, h, what)
}

// startedHierarchy returns a hierarchy on the real clock with its driver
// running until the test ends.
func startedHierarchy(t testing.TB) *timingwheel.Hierarchy {
	t.Helper()
	h, err := timingwheel.New()
	require.NoError(t, err)
	h.Start()
	t.Cleanup(func() { stopWithin(t, h, "the driver") })
	return h
}

// newMock returns a hierarchy on a fresh clock.Mock.
func newMock(t testing.TB, opts ...timingwheel.Option) (*timingwheel.Hierarchy, *clock.Mock) {
	t.Helper()
	mock := clock.NewMock()
	h, err := timingwheel.New(append([]timingwheel.Option{timingwheel.WithClock(mock)}, opts...)...)
	require.NoError(t, err)
	return h, mock
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

// watchedPair is tcpPair under a watchdog: both ends are closed, and the
// test fails saying what hung, if the test is still running after d.
func watchedPair(t *testing.T, d time.Duration, what string) (server, client net.Conn) {
	t.Helper()
	server, client = tcpPair(t)
	watchdog(t, d, what, server, client)
	return server, client
}

// listen returns a TCP listener on 127.0.0.1, closed when the test ends.
func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return ln
}

// dialAccept dials n connections to ln and accepts them from il, ln
// wrapped, under a watchdog that closes them all if an Accept hangs. Both
// ends of each are closed when the test ends.
func dialAccept(t *testing.T, ln, il net.Listener, n int) (clients, conns []net.Conn) {
	t.Helper()
	closed := []io.Closer{il} // by the watchdog
	for range n {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
		closed = append(closed, c)
	}
	watchdog(t, 10*time.Second, "Accept of a dialled connection", closed...)
	for range n {
		c, err := il.Accept()
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
	}
	return clients, conns
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

// assertReadsAllocFree has client, conn's peer, send more than runs Reads
// of 8 bytes take, and checks that those Reads of conn allocate nothing and
// count as data read: they move its idle deadline on.
func assertReadsAllocFree(t *testing.T, conn idleConn, client net.Conn, runs int) {
	t.Helper()
	send(t, client, string(make([]byte, 2*8*(runs+1))))
	buf := make([]byte, 8)
	before := conn.IdleDeadline()
	allocs := testing.AllocsPerRun(runs, func() {
		if n, err := conn.Read(buf); n == 0 || err != nil {
			panic("a Read of buffered data returned nothing")
		}
	})
	assert.Zero(t, allocs, "allocations per Read with data")
	assert.True(t, conn.IdleDeadline().After(before), "the Reads did not re-arm")
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
func advanceRecovering(t *testing.T, h *timingwheel.Hierarchy, what string) (p any) {
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

func (r closeRace) Run(t *testing.T, h *timingwheel.Hierarchy) {
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

// long reports whether the long pass runs: tests scale their seeds, rounds
// or run time by it.
func long() bool { return os.Getenv("TIMINGWHEEL_LONG") == "1" }
