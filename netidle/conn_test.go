package netidle_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"math/big"
	"math/rand/v2"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/netidle"
)

// Tests of idle connections (docs/guarantees.md, "Idle connections"), on
// real TCP connections over
// 127.0.0.1. Most drive the hierarchy by hand on a clock.Mock, so when the
// timeout fires is decided by the test, not by the scheduler; the sockets
// are real, so closing, unblocking and the errors are package net's own.
// Only the public API is used.

// idleConn is what the conns returned by IdleConn offer beyond net.Conn.
type idleConn interface {
	net.Conn
	NetConn() net.Conn
	IdleDeadline() time.Time
}

func TestIdleConn_ClosedAfterIdleNotBefore(t *testing.T) {
	h, mock := newMock(t)
	server, client := watchedPair(t, 20*time.Second, "a Read of the conn closed by its idle timeout returning")
	const idle = 3 * time.Second
	conn := netidle.Conn(h, server, idle)
	assert.Equal(t, 1, h.Len())
	assert.Equal(t, mock.Now().Add(idle), conn.(idleConn).IdleDeadline())

	require.Equal(t, 0, advanceBy(t, h, mock, idle-time.Millisecond, "a tick before idle"), "closed a tick before idle had passed")
	send(t, conn, "still open") // only reading re-arms: this changes nothing
	receive(t, client, "still open")

	require.Equal(t, 1, advanceBy(t, h, mock, time.Millisecond, "idle passed"), "not closed once idle had passed")
	assert.Equal(t, 0, h.Len(), "the hierarchy holds the timer of a closed conn")
	assertPeerSeesClose(t, client) // the socket itself was closed
	_, err := conn.Read(make([]byte, 1))
	assertTimeout(t, err, "read")
	assert.NoError(t, conn.Close(), "the first Close after the hierarchy closed the conn")
	assert.ErrorIs(t, conn.Close(), net.ErrClosed, "a second Close")
}

func TestIdleConn_ReadRearms(t *testing.T) {
	h, mock := newMock(t)
	server, client := watchedPair(t, 10*time.Second, "a Read of data already sent")
	const idle = 2 * time.Second
	conn := netidle.Conn(h, server, idle).(idleConn)
	deadline := mock.Now().Add(idle)

	// Each Read that returns data moves the deadline to idle after it.
	buf := make([]byte, 16)
	for i := range 5 {
		mock.Add(idle - time.Millisecond)
		// The conn's timer fires at its first deadline and finds the
		// Read's mark: it is armed again, the conn stays open.
		advanceWithin(t, h, "a heartbeat")
		assertOpen(t, conn)
		send(t, client, "x")
		n, err := conn.Read(buf)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		deadline = mock.Now().Add(idle)
		require.Equal(t, deadline, conn.IdleDeadline(), "heartbeat %d", i)
	}

	// A Read that returns no data leaves the deadline alone: one that fails
	// on the conn's own deadline, and one into an empty buffer.
	mock.Add(time.Second)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(-time.Second)))
	n, err := conn.Read(buf)
	assert.Equal(t, 0, n)
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded, "the conn's own read deadline")
	require.NoError(t, conn.SetReadDeadline(time.Time{}))
	n, err = conn.Read(buf[:0])
	assert.Equal(t, 0, n)
	assert.NoError(t, err)
	assert.Equal(t, deadline, conn.IdleDeadline())
	assert.Equal(t, 1, h.Len(), "a failed Read of c closed the idle conn")

	advanceBy(t, h, mock, time.Second-time.Millisecond, "a tick before idle after the last Read") // a look, if the timer was due, that finds the Read
	assertOpen(t, conn)
	require.Equal(t, 1, advanceBy(t, h, mock, time.Millisecond, "idle after the last Read"), "not closed idle after the last Read with data")
	_, err = conn.Read(buf)
	assertTimeout(t, err, "read")
}

func TestIdleConn_TimeoutError(t *testing.T) {
	const idle = time.Minute
	t.Run("after", func(t *testing.T) {
		h, mock := newMock(t)
		server, _ := watchedPair(t, 10*time.Second, "a Read and a Write of the conn closed by its idle timeout returning")
		conn := netidle.Conn(h, server, idle)
		require.Equal(t, 1, advanceBy(t, h, mock, idle, "idle passed"))
		for range 2 { // and stays so
			_, err := conn.Read(make([]byte, 1))
			assertTimeout(t, err, "read")
			_, err = conn.Write([]byte("x"))
			assertTimeout(t, err, "write")
		}
		assert.Equal(t, 0, h.Len())
	})
	for _, b := range []struct {
		name, op, what string
		do             func(net.Conn) error
		settle         time.Duration // to let it block: had it not yet, the error is the same
		peerSeesClose  bool
	}{
		{name: "blocked read", op: "read", what: "Read", settle: 20 * time.Millisecond, peerSeesClose: true,
			do: func(c net.Conn) error { _, err := c.Read(make([]byte, 1)); return err }},
		// The client reads nothing, so this fills the socket buffers and
		// blocks.
		{name: "blocked write", op: "write", what: "Write", settle: 50 * time.Millisecond,
			do: func(c net.Conn) error { _, err := c.Write(make([]byte, 64<<20)); return err }},
	} {
		t.Run(b.name, func(t *testing.T) {
			h, mock := newMock(t)
			server, client := watchedPair(t, 10*time.Second, "a "+b.what+" blocked across the idle timeout returning")
			conn := netidle.Conn(h, server, idle)
			errc := make(chan error, 1)
			go func() { errc <- b.do(conn) }()
			time.Sleep(b.settle)
			require.Equal(t, 1, advanceBy(t, h, mock, idle, "idle passed, a "+b.what+" blocked"))
			assertTimeout(t, recvWithin(t, 10*time.Second, errc, "the blocked "+b.what+" returning"), b.op)
			if b.peerSeesClose {
				assertPeerSeesClose(t, client)
			}
		})
	}
}

func TestIdleConn_CloseStopsTimer(t *testing.T) {
	h, mock := newMock(t)
	other := h.AfterFunc(time.Hour, func() {})
	before := h.Len()
	server, client := watchedPair(t, 20*time.Second, "a Read of the closed conn returning")
	conn := netidle.Conn(h, server, time.Second)
	assert.Equal(t, before+1, h.Len())

	assert.NoError(t, conn.Close())
	assert.Equal(t, before, h.Len(), "Close left the timer armed")
	assertPeerSeesClose(t, client)
	assert.ErrorIs(t, conn.Close(), net.ErrClosed, "a second Close is c's second Close")

	assert.Equal(t, 0, advanceBy(t, h, mock, time.Minute, "a minute after Close"), "a closed conn's timer fired")
	_, err := conn.Read(make([]byte, 1))
	assert.ErrorIs(t, err, net.ErrClosed, "Read after Close")
	assert.NotErrorIs(t, err, os.ErrDeadlineExceeded, "Read after Close")
	other.Stop()
}

func TestIdleConn_PeerClosed(t *testing.T) {
	h, mock := newMock(t)
	server, client := watchedPair(t, 10*time.Second, "Read seeing the peer close")
	conn := netidle.Conn(h, server, time.Minute).(idleConn)
	deadline := conn.IdleDeadline()

	send(t, client, "bye")
	require.NoError(t, client.Close())
	mock.Add(time.Second)
	data, err := io.ReadAll(conn) // reads to io.EOF
	assert.NoError(t, err)
	assert.Equal(t, "bye", string(data))
	assert.Equal(t, mock.Now().Add(time.Minute), conn.IdleDeadline(), "the Read of bye re-arms")
	assert.NotEqual(t, deadline, conn.IdleDeadline())
	n, err := conn.Read(make([]byte, 1))
	assert.Equal(t, 0, n)
	assert.Equal(t, io.EOF, err, "io.EOF passes through unchanged")
	assert.Equal(t, 1, h.Len(), "armed until Close")

	assert.NoError(t, conn.Close())
	assert.Equal(t, 0, h.Len(), "Close releases the timer")
}

// TestIdleConn_OtherMethods checks that what IdleConn does not change is
// c's: addresses, deadlines (a read deadline times out a Read without
// closing the conn), and NetConn gives c back.
func TestIdleConn_OtherMethods(t *testing.T) {
	h, _ := newMock(t)
	server, client := tcpPair(t)
	conn := netidle.Conn(h, server, time.Minute).(idleConn)
	assert.Same(t, server, conn.NetConn())
	assert.Equal(t, server.LocalAddr(), conn.LocalAddr())
	assert.Equal(t, server.RemoteAddr(), conn.RemoteAddr())

	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Millisecond)))
	_, err := conn.Read(make([]byte, 1))
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NoError(t, conn.SetDeadline(time.Time{}))
	send(t, client, "after")
	receive(t, conn, "after") // still open
	assert.Equal(t, 1, h.Len())
}

func TestIdleListener(t *testing.T) {
	h, mock := newMock(t)
	ln := listen(t)
	il := netidle.Listener(h, ln, time.Second)
	defer il.Close()
	assert.Equal(t, ln.Addr(), il.Addr())

	clients, conns := dialAccept(t, ln, il, 3)
	for _, c := range conns {
		_, ok := c.(idleConn)
		require.True(t, ok, "Accept returned a %T, not an idle conn", c)
	}
	assert.Equal(t, len(clients), h.Len())

	// One heartbeats; the others are closed a second after Accept.
	mock.Add(500 * time.Millisecond)
	send(t, clients[0], "x")
	receive(t, conns[0], "x")
	advanceBy(t, h, mock, 500*time.Millisecond, "a second after Accept") // the heartbeating conn's timer looks and is armed again
	for _, c := range conns[1:] {
		_, err := c.Read(make([]byte, 1))
		assertTimeout(t, err, "read")
	}
	assertOpen(t, conns[0])
	assert.Equal(t, 1, advanceBy(t, h, mock, 500*time.Millisecond, "a second after the heartbeat"))

	// Accept's errors are the listener's.
	require.NoError(t, il.Close())
	_, err := il.Accept()
	assert.ErrorIs(t, err, net.ErrClosed)
}

func TestIdleConn_BadInput(t *testing.T) {
	h, _ := newMock(t)
	server, _ := tcpPair(t)
	ln := listen(t)
	for _, idle := range []time.Duration{0, -time.Second} {
		assert.PanicsWithValue(t, "netidle: Conn called with idle "+idle.String()+"; it must be positive",
			func() { netidle.Conn(h, server, idle) })
		assert.PanicsWithValue(t, "netidle: Listener called with idle "+idle.String()+"; it must be positive",
			func() { netidle.Listener(h, ln, idle) })
	}
	assert.PanicsWithValue(t, "netidle: Conn called with a nil net.Conn", func() { netidle.Conn(h, nil, time.Second) })
	assert.PanicsWithValue(t, "netidle: Listener called with a nil net.Listener", func() { netidle.Listener(h, nil, time.Second) })
	var nilH *timingwheel.Hierarchy
	assert.PanicsWithValue(t, "netidle: Conn called with a nil Hierarchy", func() { netidle.Conn(nilH, server, time.Second) })
	assert.Equal(t, 0, h.Len(), "a panicking call armed a timer")
}

// TestIdleConn_RealClock runs the driver on the real clock: the close comes
// at or after the deadline the last Read set, and soon after it.
func TestIdleConn_RealClock(t *testing.T) {
	h := startedHierarchy(t)
	server, client := watchedPair(t, 20*time.Second, "the close of an idle conn by the driver")
	const idle = 100 * time.Millisecond
	conn := netidle.Conn(h, server, idle).(idleConn)

	buf := make([]byte, 1)
	var deadline time.Time
	for range 3 {
		sent := time.Now()
		send(t, client, "x")
		_, err := conn.Read(buf)
		require.NoError(t, err)
		deadline = conn.IdleDeadline()
		require.False(t, deadline.Before(sent.Add(idle)), "deadline %v is less than idle after the data was sent", deadline.Sub(sent))
		time.Sleep(idle / 2)
	}
	_, err := conn.Read(buf)
	closed := time.Now()
	assertTimeout(t, err, "read")
	assert.False(t, closed.Before(deadline), "closed %v before its deadline", deadline.Sub(closed))
	late := closed.Sub(deadline)
	t.Logf("the blocked Read returned %v after the deadline", late)
	assert.Less(t, late, 5*time.Second, "generous bound: a tick plus the driver's and the reader's wake-up")
	assert.Equal(t, 0, h.Len())
}

// TestIdleConn_Concurrent reads, writes and closes conns from several
// goroutines while the driver times some of them out, with idle times of a
// few milliseconds so that Reads that re-arm race with the expiry and with
// Close. Whatever wins, every error is a timeout or a closed conn, and once
// all are closed the hierarchy holds no timer.
func TestIdleConn_Concurrent(t *testing.T) {
	h := startedHierarchy(t)
	var timedOut, closed atomic.Int64 // readers' ends, to see both happen
	closeRace{
		Conns: 24, Readers: 2, Writers: 1, ReadBuf: 1, WriteGap: 4 * time.Millisecond,
		Wrap: func(i int, server net.Conn) (net.Conn, time.Duration, time.Duration) {
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			idle := time.Duration(2+rng.IntN(10)) * time.Millisecond
			conn := netidle.Conn(h, server, idle)
			return conn, idle, time.Duration(rng.IntN(60)) * time.Millisecond
		},
		Expected: func(op string, err error) bool {
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				if op == "read" {
					timedOut.Add(1)
				}
			case errors.Is(err, net.ErrClosed):
				if op == "read" {
					closed.Add(1)
				}
			default:
				return false
			}
			return true
		},
	}.Run(t, h)
	t.Logf("readers ended by the timeout: %d, by Close: %d", timedOut.Load(), closed.Load())
}

// TestIdleConn_ReadAllocs checks that a Read that re-arms allocates nothing,
// with the timer far off (only its deadline stored) and near.
func TestIdleConn_ReadAllocs(t *testing.T) {
	for _, idle := range []time.Duration{time.Hour, 100 * time.Millisecond} {
		t.Run("idle="+idle.String(), func(t *testing.T) {
			h, err := timingwheel.New()
			require.NoError(t, err)
			server, client := watchedPair(t, 20*time.Second, "a Read of data already sent")
			assertReadsAllocFree(t, netidle.Conn(h, server, idle).(idleConn), client, 500)
		})
	}
}

// BenchmarkIdleConn_Read compares what a Read costs with the idle timeout
// kept by IdleConn and by SetReadDeadline before every Read, against a
// plain Read; a goroutine keeps the socket full.
func BenchmarkIdleConn_Read(b *testing.B) {
	const idle = 30 * time.Second
	h := startedHierarchy(b)
	for _, impl := range []string{"plain", "idleconn", "setreaddeadline"} {
		b.Run("read="+impl, func(b *testing.B) {
			server, client := tcpPair(b)
			go func() {
				chunk := make([]byte, 64<<10)
				for {
					if _, err := client.Write(chunk); err != nil {
						return
					}
				}
			}()
			defer client.Close()
			conn := server
			if impl == "idleconn" {
				conn = netidle.Conn(h, server, idle)
				defer conn.Close()
			}
			buf := make([]byte, 64)
			b.ReportAllocs()
			for b.Loop() {
				if impl == "setreaddeadline" {
					conn.SetReadDeadline(time.Now().Add(idle))
				}
				if _, err := conn.Read(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestIdleConn_ReadRacesCloseAndExpiry aims Close, and the expiry, at a
// reader that is re-arming the timer all the time: a Read whose data came
// just before either must not leave the timer armed for a conn that is gone.
func TestIdleConn_ReadRacesCloseAndExpiry(t *testing.T) {
	clk := newFakeClock()
	h, err := timingwheel.New(timingwheel.WithClock(clk))
	require.NoError(t, err)
	const idle = time.Second
	for i := range 100 {
		server, client := tcpPair(t)
		conn := netidle.Conn(h, server, idle)
		go func() { // keep the reader busy for a while
			chunk := make([]byte, 4<<10)
			for range 64 {
				if _, err := client.Write(chunk); err != nil {
					return
				}
			}
		}()
		readerDone := make(chan error, 1)
		go func() {
			buf := make([]byte, 256)
			for {
				if _, err := conn.Read(buf); err != nil {
					readerDone <- err
					return
				}
			}
		}()
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		byClose := i%2 == 0
		err = nil
		if byClose {
			require.NoError(t, conn.Close())
		} else {
			// Fire the timeout: the reader keeps moving its mark to
			// now, so move the clock on until a look closes the conn.
			for tries := 0; err == nil; tries++ {
				if tries == 100_000 {
					t.Fatalf("hung: round %d: the idle timeout did not close the conn in %d Advances an idle period apart", i, tries)
				}
				clk.Add(idle)
				advanceWithin(t, h, "an idle step")
				select {
				case err = <-readerDone:
				case <-time.After(100 * time.Microsecond):
				}
			}
		}
		if err == nil {
			select {
			case err = <-readerDone:
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: the reader did not return within 10s of the conn being closed", i)
			}
		}
		if byClose {
			assert.ErrorIs(t, err, net.ErrClosed, "round %d", i)
		} else {
			assertTimeout(t, err, "read")
		}
		client.Close()
		conn.Close()
		require.Equal(t, 0, h.Len(), "round %d (closed by %s): the timer of a closed conn is armed",
			i, map[bool]string{true: "Close", false: "the timeout"}[byClose])
	}
}

// pausingConn is a real conn whose Read, once it has data, waits for the
// test before returning it: the test can then fire the timeout, or Close,
// exactly between the data's arrival and the re-arming.
type pausingConn struct {
	net.Conn
	gotData chan int      // Read had this much data
	resume  chan struct{} // ... and may return it
}

func (c *pausingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.gotData <- n
		<-c.resume
	}
	return n, err
}

// TestIdleConn_ReadWithDataAtExpiry fires the timeout, and in a second case
// closes the conn, after c's Read got data but before the wrapper re-arms:
// the data is returned, the conn stays closed, its timer is not left armed.
func TestIdleConn_ReadWithDataAtExpiry(t *testing.T) {
	for _, byClose := range []bool{false, true} {
		name := map[bool]string{false: "expiry", true: "close"}[byClose]
		t.Run(name, func(t *testing.T) {
			h, mock := newMock(t)
			server, client := watchedPair(t, 10*time.Second, "a Read held between its data and the re-arming returning")
			pc := &pausingConn{Conn: server, gotData: make(chan int), resume: make(chan struct{})}
			const idle = time.Second
			conn := netidle.Conn(h, pc, idle)

			type result struct {
				n   int
				err error
			}
			done := make(chan result, 1)
			go func() {
				n, err := conn.Read(make([]byte, 16))
				done <- result{n, err}
			}()
			send(t, client, "late")
			recvWithin(t, 10*time.Second, pc.gotData, "the Read getting the data sent")
			if byClose {
				require.NoError(t, conn.Close())
			} else {
				require.Equal(t, 1, advanceBy(t, h, mock, idle, "idle passed while a Read holds its data"))
			}
			close(pc.resume)
			r := recvWithin(t, 10*time.Second, done, "the held Read returning")
			assert.Equal(t, 4, r.n, "the data that came just before the close")
			assert.NoError(t, r.err, "the Read that returns the data")
			assert.Equal(t, 0, h.Len(), "the Read re-armed the timer of a closed conn")

			_, err := conn.Read(make([]byte, 16))
			if byClose {
				assert.ErrorIs(t, err, net.ErrClosed)
			} else {
				assertTimeout(t, err, "read")
			}
			assert.Equal(t, 0, advanceBy(t, h, mock, time.Hour, "an hour later"))
		})
	}
}

// instantConn is a conn whose Read returns data at once, so that a
// benchmark of IdleConn over it measures the wrapper and the re-arming only.
type instantConn struct{ net.Conn }

func (instantConn) Read(p []byte) (int, error) { return len(p), nil }

// BenchmarkIdleConn_Rearm isolates what keeping the idle timeout costs per
// Read, without the read itself: IdleConn's Read over a conn that returns
// at once, against SetReadDeadline alone on a real TCP conn.
func BenchmarkIdleConn_Rearm(b *testing.B) {
	const idle = 30 * time.Second
	h := startedHierarchy(b)
	b.Run("keep=idleconn", func(b *testing.B) {
		conn := netidle.Conn(h, instantConn{}, idle) // never closed: it has no Close, and 30s do not pass
		buf := make([]byte, 64)
		b.ReportAllocs()
		for b.Loop() {
			conn.Read(buf)
		}
	})
	b.Run("keep=setreaddeadline", func(b *testing.B) {
		server, _ := tcpPair(b)
		b.ReportAllocs()
		for b.Loop() {
			server.SetReadDeadline(time.Now().Add(idle))
		}
	})
}

// years is the hierarchy's clock 150 years after its origin: within the
// range the hierarchy keeps (deadlines up to the largest time.Duration,
// about 292 years, from the origin work: docs/guarantees.md, "Precision
// does not depend on distance").
const years = 150 * 365 * 24 * time.Hour

// heldConn is a net.Conn whose Read waits until the test lets it return
// data, whatever happens to the conn meanwhile (data that arrived just as
// the conn was closed).
type heldConn struct {
	net.Conn
	reading chan struct{}
	data    chan []byte
}

func (c *heldConn) Read(p []byte) (int, error) {
	c.reading <- struct{}{}
	return copy(p, <-c.data), nil
}

func (c *heldConn) Close() error         { return nil }
func (c *heldConn) LocalAddr() net.Addr  { return nil }
func (c *heldConn) RemoteAddr() net.Addr { return nil }

// TestIdleConn_DeadlineStaysAtTheIdleClose: a Read in flight when the hierarchy closes the conn returns its data, and
// IdleDeadline still reports the instant the conn was closed at, not a
// deadline moved past it at which nothing happens.
func TestIdleConn_DeadlineStaysAtTheIdleClose(t *testing.T) {
	h, mock := newMock(t)
	start := mock.Now()
	hc := &heldConn{reading: make(chan struct{}), data: make(chan []byte)}
	c := netidle.Conn(h, hc, 100*time.Millisecond)
	ic := c.(interface{ IdleDeadline() time.Time })
	done := make(chan struct{})
	go func() {
		defer close(done)
		n, err := c.Read(make([]byte, 4))
		assert.Equal(t, 4, n, "the data that arrived as the conn was closed")
		assert.NoError(t, err)
	}()
	recvWithin(t, 5*time.Second, hc.reading, "the Read reaching the conn")
	require.Equal(t, 1, advanceBy(t, h, mock, 100*time.Millisecond, "idle passed, a Read held"), "the idle close")
	hc.data <- []byte("data")
	recvWithin(t, 5*time.Second, done, "the Read returning")
	assert.Equal(t, start.Add(100*time.Millisecond), ic.IdleDeadline(), "IdleDeadline moved after the idle close")
	assert.Equal(t, 0, h.Len(), "the Read left a timer armed for a closed conn")
	_, err := c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
}

// A conn without options (a Timer of its own) wrapped 150 years after the
// origin is closed idle after, not a tick after wrapping.
func TestIdleConn_ClosedAfterIdle150YearsAfterOrigin(t *testing.T) {
	h, mock := newMock(t)
	mock.Add(years)
	local, peer := pipe(t)
	c := netidle.Conn(h, local, time.Hour)
	defer c.Close()
	advanceBy(t, h, mock, time.Millisecond, "a tick after wrapping")
	assert.False(t, peerSeesClosed(t, peer), "closed a tick after wrapping")
	advanceBy(t, h, mock, time.Hour, "an hour later")
	assert.True(t, peerSeesClosed(t, peer), "not closed an hour later")
}

// selfSigned returns a certificate for a TLS server in a test.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"test"}}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// The idle close of a *tls.Conn whose peer reads nothing does not hold the
// advancing goroutine: a tls.Conn's Close sends a close_notify and waits up
// to 5 s for room to send it, so the conn under it is closed first. Over
// net.Pipe, where every write waits for the peer's read.
func TestIdleConn_IdleCloseOfATLSConnDoesNotWaitOnThePeer(t *testing.T) {
	h, mock := newMock(t)
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	srv := tls.Server(a, &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}})
	cli := tls.Client(b, &tls.Config{InsecureSkipVerify: true})
	handshakes := make(chan error, 2)
	go func() { handshakes <- srv.Handshake() }()
	go func() { handshakes <- cli.Handshake() }()
	for range 2 {
		require.NoError(t, recvWithin(t, 10*time.Second, handshakes, "a TLS handshake"))
	}
	c := netidle.Conn(h, srv, time.Second) // the peer reads nothing from now on
	mock.Add(time.Second)
	advanced := make(chan int, 1)
	go func() { advanced <- h.Advance() }()
	select {
	case <-advanced:
	case <-time.After(3 * time.Second): // tls.Conn.Close would wait 5 s
		t.Fatal("the Advance that closed an idle tls.Conn is still running after 3 s: the close waits on the peer")
	}
	_, err := c.Read(make([]byte, 1))
	assertIdleErr(t, err, netidle.ErrIdle, "read after the idle close")
	_, err = b.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the peer's read after the idle close")
}
