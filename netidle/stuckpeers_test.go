package netidle_test

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel/netidle"
)

// TestOnWriteIdle_StuckPeersDelayNoOtherClose runs OnWriteIdle's documented
// ping — the event hands the Write to a goroutine — on the real driver, over
// real sockets on 127.0.0.1, for many peers that never read, whose socket
// buffers were filled first: each ping's Write blocks. Their events come
// due just before other conns' idle closes, and those closes come within a
// tick plus the driver's wake-up (generously, as the other real-clock
// tests bound them), not held up behind the stuck writes.
//
// The pattern OnWriteIdle's godoc gave before, a Write under a 10 ms write
// deadline made by the event itself, would have held the driver for each
// stuck peer's deadline in turn: stuck × 10 ms (6 s here) before the first
// close, well over the bound. The test checks its premises rather than
// timing that pattern: a Write under a 10 ms deadline to a stuck peer
// times out, every stuck peer's event ran, and its ping's Write was still
// blocked when the closes came.
func TestOnWriteIdle_StuckPeersDelayNoOtherClose(t *testing.T) {
	const (
		stuck  = 600                    // peers that never read
		others = 20                     // silent conns, closed for idleness
		ping   = 150 * time.Millisecond // the stuck peers' write idle
		idle   = 200 * time.Millisecond // the others' idle: they close after every stuck peer's ping
		late   = 2 * time.Second        // a tick plus the driver's and the reader's wake-up, generously
	)
	if late >= stuck*10*time.Millisecond {
		t.Fatalf("the bound %v is not below what the old pattern cost (%d stuck peers × 10 ms): the test would not tell them apart", late, stuck)
	}
	h := startedHierarchy(t)
	ln := listen(t)
	clients, raws := dialAcceptRaw(t, ln, stuck+others+1)

	// Fill each stuck peer's socket: small buffers, then Writes until one
	// times out; the peer never reads, so it stays full.
	var fill sync.WaitGroup
	fillErrs := make(chan error, stuck+1)
	for i := range stuck + 1 {
		fill.Go(func() {
			if err := fillUp(clients[i], raws[i]); err != nil {
				fillErrs <- err
			}
		})
	}
	mustReturn(t, 30*time.Second, "filling the stuck peers' sockets", fill.Wait)
	close(fillErrs)
	for err := range fillErrs {
		t.Fatal(err)
	}
	// The old pattern's Write, on the spare stuck conn: it waits out its
	// deadline, as it would have on the driver, for each stuck peer.
	probe := raws[stuck]
	require.NoError(t, probe.SetWriteDeadline(time.Now().Add(10*time.Millisecond)))
	_, err := probe.Write([]byte("ping\n"))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "a Write with a 10 ms deadline to a peer that reads nothing")

	var pings sync.WaitGroup
	var events, returned atomic.Int64
	// A ping larger than what the peer's and the socket's buffers hold, so
	// that no room the kernel frees in a full receive queue lets it through.
	msg := make([]byte, 256<<10)
	f := func(c net.Conn) { // the documented pattern, counted
		events.Add(1)
		pings.Go(func() {
			c.Write(msg)
			returned.Add(1)
		})
	}
	stuckConns := make([]net.Conn, stuck)
	for i := range stuck {
		stuckConns[i] = netidle.Conn(h, raws[i], time.Hour, netidle.OnWriteIdle(ping, f))
	}
	defer func() {
		for _, c := range stuckConns {
			c.Close() // ends the blocked pings' Writes
		}
		mustReturn(t, 10*time.Second, "the pings' Writes after their conns closed", pings.Wait)
	}()

	type closed struct {
		at, deadline time.Time
		err          error
	}
	closes := make(chan closed, others)
	for i := stuck + 1; i < len(raws); i++ {
		c := netidle.Conn(h, raws[i], idle)
		go func() {
			_, err := c.Read(make([]byte, 1)) // blocks until the idle close
			at := time.Now()
			closes <- closed{at, c.(netidle.Control).IdleDeadline(), err}
		}()
	}
	var worst time.Duration
	for range others {
		c := recvWithin(t, 20*time.Second, closes, "the idle close of a conn beside the stuck peers")
		assert.ErrorIs(t, c.err, netidle.ErrIdle)
		lateBy := c.at.Sub(c.deadline)
		worst = max(worst, lateBy)
		assert.GreaterOrEqual(t, lateBy, time.Duration(0), "closed before its idle deadline")
		assert.Less(t, lateBy, late, "an idle close held up beside %d stuck peers", stuck)
	}
	n, r := events.Load(), returned.Load()
	t.Logf("%d closes beside %d stuck peers: the latest %v after its deadline; %d ping events, %d pings' Writes returned (the old pattern: %v of the driver's time)",
		others, stuck, worst, n, r, time.Duration(n)*10*time.Millisecond)
	assert.GreaterOrEqual(t, n, int64(stuck), "not every stuck peer's ping event ran before the closes")
	// Each ping's Write is blocked, or its goroutine not yet started: none
	// has returned before the closes, or the peers were not stuck.
	assert.Zero(t, r, "a stuck peer's ping Write returned before the closes: the peers were not stuck")
}

// dialAcceptRaw dials n connections to ln and accepts them, under a
// watchdog; both ends of each are closed when the test ends. The client
// ends get a small receive buffer, so that a peer that never reads fills
// up after little data.
func dialAcceptRaw(t *testing.T, ln net.Listener, n int) (clients, servers []net.Conn) {
	t.Helper()
	watchdog(t, 30*time.Second, "dialling and accepting the test's conns", ln)
	for range n {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		require.NoError(t, c.(*net.TCPConn).SetReadBuffer(4096))
		clients = append(clients, c)
		s, err := ln.Accept()
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		servers = append(servers, s)
	}
	return clients, servers
}

// fillUp writes to server, whose peer client never reads, until a Write
// times out: its send buffer and the peer's receive buffer are full.
func fillUp(client, server net.Conn) error {
	if err := server.(*net.TCPConn).SetWriteBuffer(4096); err != nil {
		return err
	}
	chunk := make([]byte, 16<<10)
	for written := 0; ; {
		server.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
		n, err := server.Write(chunk)
		written += n
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return server.SetWriteDeadline(time.Time{})
		}
		if err != nil {
			return err
		}
		if written > 64<<20 {
			return errors.New("64 MiB written to a peer that never reads, and no Write blocked")
		}
	}
}
