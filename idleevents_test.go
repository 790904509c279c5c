package timingwheel_test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel"
)

// Tests of guarantee 15 (idle events), on real TCP connections over
// 127.0.0.1 unless a test says otherwise. As in idleconn_test.go, most
// drive the hierarchy by hand on a clock.Mock, so the test decides when
// each event is due; the end-to-end ones run the driver on the real clock
// and check every event against timestamps taken on the hierarchy's clock.

// events records the instants (on the hierarchy's clock) at which an event
// function ran, and hands each to a channel for tests that wait for one.
type events struct {
	h  *timingwheel.Hierarchy
	mu sync.Mutex
	at []time.Time
	ch chan time.Time
	do func(c net.Conn) // also run, if set
}

func newEvents(h *timingwheel.Hierarchy) *events {
	return &events{h: h, ch: make(chan time.Time, 1024)}
}

func (e *events) f(c net.Conn) {
	now := e.h.Now()
	e.mu.Lock()
	e.at = append(e.at, now)
	e.mu.Unlock()
	select {
	case e.ch <- now:
	default:
	}
	if e.do != nil {
		e.do(c)
	}
}

func (e *events) n() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.at)
}

func (e *events) last() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.at[len(e.at)-1]
}

// step moves the mock clock by d and advances, failing the test if the
// events' count is not then want.
func stepTo(t *testing.T, h *timingwheel.Hierarchy, mock interface{ Add(time.Duration) }, d time.Duration, e *events, want int, what string) {
	t.Helper()
	mock.Add(d)
	advanceWithin(t, h, what)
	require.Equal(t, want, e.n(), "events after %s", what)
}

func TestIdleEvents_OnReadIdleRepeatsAndKeepsOpen(t *testing.T) {
	h, mock := newMockHierarchy(t)
	server, client := tcpPair(t)
	watchdog(t, 20*time.Second, "a Read of data already sent", server, client)
	const idle = 3 * time.Second
	ev := newEvents(h)
	conn := h.IdleConn(server, idle, timingwheel.OnReadIdle(ev.f)).(idleConn)
	wrapped := mock.Now()
	assert.Equal(t, wrapped.Add(idle), conn.IdleDeadline())

	stepTo(t, h, mock, idle-time.Millisecond, ev, 0, "a tick before idle")
	stepTo(t, h, mock, time.Millisecond, ev, 1, "idle after wrapping")
	assert.Equal(t, wrapped.Add(idle), ev.last())
	// Open: it reads and writes, and the next event is idle after this one.
	send(t, conn, "open")
	receive(t, client, "open")
	assert.Equal(t, wrapped.Add(2*idle), conn.IdleDeadline())
	stepTo(t, h, mock, idle-time.Millisecond, ev, 1, "a tick before idle after the event")
	stepTo(t, h, mock, time.Millisecond, ev, 2, "idle after the event")
	assert.Equal(t, wrapped.Add(2*idle), ev.last())

	// A Read with data moves the next event to idle after it.
	mock.Add(time.Second)
	send(t, client, "x")
	receive(t, conn, "x")
	read := mock.Now()
	assert.Equal(t, read.Add(idle), conn.IdleDeadline())
	stepTo(t, h, mock, idle-time.Millisecond, ev, 2, "a tick before idle after the Read")
	stepTo(t, h, mock, time.Millisecond, ev, 3, "idle after the Read")
	assert.Equal(t, read.Add(idle), ev.last())

	// A Read that returns no data leaves it alone.
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(-time.Second)))
	_, err := conn.Read(make([]byte, 1))
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded, "the conn's own read deadline")
	require.NoError(t, conn.SetReadDeadline(time.Time{}))
	stepTo(t, h, mock, idle, ev, 4, "idle after the third event")

	assert.Equal(t, 1, h.Len(), "the conn's one timer")
	require.NoError(t, conn.Close())
	assert.Equal(t, 0, h.Len(), "Close left the timer armed")
	stepTo(t, h, mock, time.Hour, ev, 4, "an hour after Close")
	assertPeerSeesClose(t, client)
}

func TestIdleEvents_OnWriteIdleRepeatsAndWritesRearm(t *testing.T) {
	h, mock := newMockHierarchy(t)
	server, client := tcpPair(t)
	watchdog(t, 20*time.Second, "a Read of data already sent", server, client)
	const idle, ping = time.Minute, 2 * time.Second
	ev := newEvents(h)
	conn := h.IdleConn(server, idle, timingwheel.OnWriteIdle(ping, ev.f))
	wrapped := mock.Now()

	stepTo(t, h, mock, ping-time.Millisecond, ev, 0, "a tick before the write idle time")
	stepTo(t, h, mock, time.Millisecond, ev, 1, "write idle after wrapping")
	stepTo(t, h, mock, ping, ev, 2, "write idle after the event")
	assert.Equal(t, wrapped.Add(2*ping), ev.last())

	// Reading does not count as writing; a Write of data does.
	mock.Add(time.Second)
	send(t, client, "in")
	receive(t, conn, "in")
	readIn := mock.Now()
	send(t, conn, "out")
	receive(t, client, "out")
	wrote := mock.Now()
	stepTo(t, h, mock, ping-time.Millisecond, ev, 2, "a tick before write idle after the Write")
	stepTo(t, h, mock, time.Millisecond, ev, 3, "write idle after the Write")
	assert.Equal(t, wrote.Add(ping), ev.last())

	// A Write of nothing does not.
	mock.Add(time.Second)
	n, err := conn.Write(nil)
	require.NoError(t, err)
	require.Zero(t, n)
	stepTo(t, h, mock, ping-time.Second, ev, 4, "write idle after the event, past an empty Write")

	// The event's own ping counts: the next event is ping after it, and
	// the read idle close is unaffected by all this writing.
	ev.do = func(c net.Conn) {
		mock.Add(500 * time.Millisecond) // the ping goes out half a second after the event
		_, err := c.Write([]byte("ping\n"))
		assert.NoError(t, err)
	}
	stepTo(t, h, mock, ping, ev, 5, "write idle: a ping")
	receive(t, client, "ping\n")
	pinged := mock.Now()
	ev.do = nil
	stepTo(t, h, mock, ping-time.Millisecond, ev, 5, "a tick before write idle after the ping")
	stepTo(t, h, mock, time.Millisecond, ev, 6, "write idle after the ping")
	assert.Equal(t, pinged.Add(ping), ev.last())

	rest := readIn.Add(idle).Sub(mock.Now())
	mock.Add(rest - time.Millisecond)
	advanceWithin(t, h, "a tick before read idle")
	send(t, conn, "still open")
	receive(t, client, "still open")
	mock.Add(time.Millisecond)
	advanceWithin(t, h, "read idle")
	_, err = conn.Read(make([]byte, 1))
	assertTimeout(t, err, "read")
	_, err = conn.Write([]byte("x"))
	assertTimeout(t, err, "write")
	events := ev.n()
	assert.Equal(t, 0, h.Len(), "the timer of a conn closed for read idle is armed")
	stepTo(t, h, mock, time.Hour, ev, events, "an hour after the close")
	assert.NoError(t, conn.Close())
}

func TestIdleEvents_MaxLifetimeClosesBusyConn(t *testing.T) {
	h, mock := newMockHierarchy(t)
	server, client := tcpPair(t)
	watchdog(t, 20*time.Second, "a Read of the conn closed at its lifetime returning", server, client)
	const idle, life = 2 * time.Second, 9 * time.Second
	conn := h.IdleConn(server, idle, timingwheel.MaxLifetime(life)).(idleConn)
	wrapped := mock.Now()

	// Heartbeats keep it from going idle; the lifetime closes it anyway.
	for mock.Now().Add(time.Second).Before(wrapped.Add(life)) {
		mock.Add(time.Second)
		require.Equal(t, 1, h.Len(), "closed before its lifetime, at %v", mock.Now().Sub(wrapped))
		advanceWithin(t, h, "a heartbeat")
		send(t, client, "x")
		receive(t, conn, "x")
		send(t, conn, "y")
		receive(t, client, "y")
	}
	mock.Add(wrapped.Add(life).Sub(mock.Now()) - time.Millisecond)
	advanceWithin(t, h, "a tick before the lifetime")
	send(t, conn, "open")
	receive(t, client, "open")
	mock.Add(time.Millisecond)
	advanceWithin(t, h, "the lifetime")
	assert.Equal(t, 0, h.Len())
	assertPeerSeesClose(t, client)
	_, err := conn.Read(make([]byte, 1))
	assertTimeout(t, err, "read")
	_, err = conn.Write([]byte("x"))
	assertTimeout(t, err, "write")
	assert.Equal(t, wrapped.Add(life), conn.IdleDeadline(), "the deadline it was closed for")
	assert.NoError(t, conn.Close(), "the first Close after the hierarchy closed the conn")
	assert.ErrorIs(t, conn.Close(), net.ErrClosed, "a second Close")
}

// TestIdleEvents_Together runs random scripts of reads, writes and clock
// steps on a conn with every option, against a model of guarantee 15: an
// event is due when its duration has passed since the later of its last
// data and its last event; the lifetime closes the conn. Steps are 100ms
// and every duration a multiple of it, so each event is due exactly at a
// step.
func TestIdleEvents_Together(t *testing.T) {
	const step = 100 * time.Millisecond
	for seed := range uint64(6) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 15))
			h, mock := newMockHierarchy(t)
			server, client := tcpPair(t)
			watchdog(t, 20*time.Second, "a Read of data already sent", server, client)
			idle := time.Duration(5+rng.IntN(20)) * step
			ping := time.Duration(3+rng.IntN(20)) * step
			life := time.Duration(30+rng.IntN(60)) * step
			type event struct {
				kind string
				at   time.Duration
			}
			var got, want []event
			var mu sync.Mutex
			start := mock.Now()
			record := func(kind string) func(net.Conn) {
				return func(net.Conn) {
					mu.Lock()
					got = append(got, event{kind, mock.Now().Sub(start)})
					mu.Unlock()
				}
			}
			conn := h.IdleConn(server, idle, timingwheel.OnReadIdle(record("read")),
				timingwheel.OnWriteIdle(ping, record("write")), timingwheel.MaxLifetime(life))
			var readMark, writeMark time.Duration // the model
			for now := step; ; now += step {
				mock.Add(step)
				if now < life && rng.IntN(4) == 0 {
					send(t, client, "r")
					receive(t, conn, "r")
					readMark = now
				}
				if now < life && rng.IntN(5) == 0 {
					send(t, conn, "w")
					receive(t, client, "w")
					writeMark = now
				}
				advanceWithin(t, h, "a step")
				if now >= life {
					break
				}
				if now-readMark >= idle {
					want = append(want, event{"read", now})
					readMark = now
				}
				if now-writeMark >= ping {
					want = append(want, event{"write", now})
					writeMark = now
				}
			}
			mu.Lock()
			assert.Equal(t, want, got, "idle %v, ping %v, lifetime %v", idle, ping, life)
			mu.Unlock()
			_, err := conn.Read(make([]byte, 1))
			assertTimeout(t, err, "read")
			assert.Equal(t, 0, h.Len(), "closed at its lifetime, with a timer armed")
		})
	}
}

// TestIdleEvents_SlowPeer runs the driver on the real clock against peers
// that are slow but make progress: one sends a byte a quarter of idle
// apart, one reads a large Write slowly, for longer than the write-idle
// time. Neither conn has an event while its peer makes progress; the write
// side has its first one no sooner than ping after the Write returned.
func TestIdleEvents_SlowPeer(t *testing.T) {
	h := startedHierarchy(t)
	const idle, ping = 100 * time.Millisecond, 40 * time.Millisecond

	t.Run("sender", func(t *testing.T) {
		server, client := tcpPair(t)
		watchdog(t, 20*time.Second, "the slow sender's bytes arriving", server, client)
		ev := newEvents(h)
		conn := h.IdleConn(server, idle, timingwheel.OnReadIdle(ev.f))
		defer conn.Close()
		go func() {
			for range 25 { // two and a half idle periods
				time.Sleep(idle / 10)
				if _, err := client.Write([]byte("x")); err != nil {
					return
				}
			}
		}()
		buf := make([]byte, 1)
		for range 25 {
			_, err := conn.Read(buf)
			require.NoError(t, err)
		}
		assert.Zero(t, ev.n(), "read-idle events while the peer sent a byte every %v", idle/10)
	})

	t.Run("reader", func(t *testing.T) {
		server, client := tcpPair(t)
		// Small socket buffers, so that the Write waits for the reader.
		require.NoError(t, server.(*net.TCPConn).SetWriteBuffer(64<<10))
		require.NoError(t, client.(*net.TCPConn).SetReadBuffer(64<<10))
		watchdog(t, 20*time.Second, "the slow reader draining a large Write", server, client)
		ev := newEvents(h)
		conn := h.IdleConn(server, time.Minute, timingwheel.OnWriteIdle(ping, ev.f))
		defer conn.Close()
		go func() { // drains 64 KiB every 4ms: progress, but slower than the Write
			buf := make([]byte, 64<<10)
			for {
				time.Sleep(4 * time.Millisecond)
				if _, err := client.Read(buf); err != nil {
					return
				}
			}
		}()
		began := time.Now()
		_, err := conn.Write(make([]byte, 8<<20)) // about half a second to drain
		require.NoError(t, err)
		wrote := h.Now()
		took := time.Since(began)
		require.Greater(t, took, 3*ping, "the Write was too fast to test anything")
		assert.Zero(t, ev.n(), "write-idle events during a Write of %v whose peer read all along", took)
		at := recvWithin(t, 10*time.Second, ev.ch, "the write-idle event after the slow Write")
		assert.GreaterOrEqual(t, at.Sub(wrote), ping, "the event came before ping after the Write returned")
	})
}

// startedHierarchy returns a hierarchy on the real clock with its driver
// running until the test ends.
func startedHierarchy(t *testing.T) *timingwheel.Hierarchy {
	t.Helper()
	h, err := timingwheel.New()
	require.NoError(t, err)
	h.Start()
	t.Cleanup(func() { stopWithin(t, h, 10*time.Second) })
	return h
}

// TestIdleEvents_RealClock checks each event end to end, with the driver
// on the real clock: never before its duration has passed since the last
// Read (Write) with data, measured from the hierarchy's clock just before
// that call, and within a generous bound after.
func TestIdleEvents_RealClock(t *testing.T) {
	h := startedHierarchy(t)
	const d = 30 * time.Millisecond
	late := 2 * time.Second // a tick plus the driver's and the scheduler's wake-up, generously
	for _, kind := range []string{"read", "write", "lifetime"} {
		t.Run(kind, func(t *testing.T) {
			server, client := tcpPair(t)
			watchdog(t, 20*time.Second, "the "+kind+" event", server, client)
			ev := newEvents(h)
			var opt timingwheel.IdleOption
			switch kind {
			case "read":
				opt = timingwheel.OnReadIdle(ev.f)
			case "write":
				opt = timingwheel.OnWriteIdle(d, ev.f)
			case "lifetime":
				opt = timingwheel.MaxLifetime(5 * d)
			}
			idle := d
			if kind != "read" {
				idle = time.Minute
			}
			wrapped := h.Now()
			conn := h.IdleConn(server, idle, opt)
			defer conn.Close()
			buf := make([]byte, 1)
			var last time.Time // before the last call that moved data
			for range 4 {
				switch kind {
				case "read":
					send(t, client, "x")
					time.Sleep(time.Millisecond) // let it arrive
					last = h.Now()
					_, err := conn.Read(buf)
					require.NoError(t, err)
				case "write", "lifetime":
					last = h.Now()
					_, err := conn.Write([]byte("y"))
					require.NoError(t, err)
				}
				time.Sleep(d / 2)
			}
			if kind == "lifetime" {
				_, err := conn.Read(buf) // blocks until the close
				closed := h.Now()
				assertTimeout(t, err, "read")
				assert.GreaterOrEqual(t, closed.Sub(wrapped), 5*d, "closed before its lifetime")
				assert.Less(t, closed.Sub(wrapped), 5*d+late)
				return
			}
			// Repeated while the silence lasts: the k-th event is at least
			// k·d after the last data (strict), and each comes soon after
			// the previous one's d has passed.
			prev := last
			for k := 1; k <= 3; k++ {
				at := recvWithin(t, 10*time.Second, ev.ch, kind+"-idle event")
				t.Logf("%s event %d: %v after the last data, %v after the previous event", kind, k, at.Sub(last), at.Sub(prev))
				assert.GreaterOrEqual(t, at.Sub(last), time.Duration(k)*d, "event %d early", k)
				assert.Less(t, at.Sub(prev), d+late, "event %d late", k)
				prev = at
			}
		})
	}
}

// TestIdleEvents_InBubble runs the driver inside a testing/synctest bubble
// over net.Pipe, where time moves only when every goroutine waits: the
// events come exactly at their deadlines rounded up to the tick, on the
// real driver, with a ping written by f that re-arms.
func TestIdleEvents_InBubble(t *testing.T) {
	bubbleWithin(t, 20*time.Second, "a conn's events over its 2s lifetime in a bubble", func(t *testing.T) {
		h, err := timingwheel.New()
		require.NoError(t, err)
		h.Start()
		defer h.Stop()
		server, client := net.Pipe()
		defer client.Close()
		const idle, ping, life = 700 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second
		reads, writes := newEvents(h), newEvents(h)
		writes.do = func(c net.Conn) {
			// net.Pipe has no buffer: the peer below is always reading, and
			// a deadline keeps f from blocking the driver if it is not.
			c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
			c.Write([]byte("p"))
		}
		start := time.Now()
		conn := h.IdleConn(server, idle, timingwheel.OnReadIdle(reads.f),
			timingwheel.OnWriteIdle(ping, writes.f), timingwheel.MaxLifetime(life))
		go io.Copy(io.Discard, client)
		time.Sleep(life + time.Second)
		_, err = conn.Read(make([]byte, 1))
		var ne net.Error
		assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
		assert.True(t, errors.As(err, &ne) && ne.Timeout(), "closed at its lifetime: %v", err)
		since := func(e *events) []time.Duration {
			var out []time.Duration
			for _, at := range e.at {
				out = append(out, at.Sub(start))
			}
			return out
		}
		ms := time.Millisecond
		assert.Equal(t, []time.Duration{700 * ms, 1400 * ms}, since(reads))
		assert.Equal(t, []time.Duration{300 * ms, 600 * ms, 900 * ms, 1200 * ms, 1500 * ms, 1800 * ms}, since(writes))
		assert.Equal(t, 0, h.Len())
		conn.Close()
	})
}

// TestIdleEvents_CloseRacesEvent aims Close at the moment each event fires,
// over many rounds: whichever wins, once both are done no timer of the conn
// is armed and no event runs again.
func TestIdleEvents_CloseRacesEvent(t *testing.T) {
	rounds := 60
	if testing.Short() {
		rounds = 20
	}
	for _, kind := range []string{"read", "write", "lifetime", "all"} {
		t.Run(kind, func(t *testing.T) {
			clk := &manualClock{now: time.Unix(1e9, 0)}
			h, err := timingwheel.New(timingwheel.WithClock(clk))
			require.NoError(t, err)
			const d = time.Second
			for i := range rounds {
				server, client := tcpPair(t)
				var fired atomic.Int64
				f := func(c net.Conn) {
					fired.Add(1)
					c.Write([]byte("p")) // unread by the peer, but a socket buffer takes it
				}
				var opts []timingwheel.IdleOption
				idle := time.Hour
				switch kind {
				case "read":
					opts, idle = []timingwheel.IdleOption{timingwheel.OnReadIdle(f)}, d
				case "write":
					opts = []timingwheel.IdleOption{timingwheel.OnWriteIdle(d, f)}
				case "lifetime":
					opts = []timingwheel.IdleOption{timingwheel.MaxLifetime(d)}
				case "all":
					opts, idle = []timingwheel.IdleOption{timingwheel.OnReadIdle(f), timingwheel.OnWriteIdle(d, f), timingwheel.MaxLifetime(2 * d)}, d
				}
				conn := h.IdleConn(server, idle, opts...)
				clk.Add(time.Duration(1+i%2) * d)
				done := make(chan struct{})
				go func() { defer close(done); h.Advance() }()
				time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				err := conn.Close()
				recvWithin(t, 10*time.Second, done, "an Advance racing Close returning")
				if err != nil {
					assert.ErrorIs(t, err, net.ErrClosed, "round %d: Close", i)
				}
				require.Equal(t, 0, h.Len(), "round %d: a timer of the closed conn is armed", i)
				before := fired.Load()
				clk.Add(time.Hour)
				advanceWithin(t, h, "an hour after Close")
				require.Equal(t, before, fired.Load(), "round %d: an event ran after Close", i)
				client.Close()
			}
		})
	}
}

// TestIdleEvents_Concurrent reads, writes, sets deadlines and closes conns
// with every option, from several goroutines, while the driver fires
// events of a few milliseconds whose functions ping and sometimes close.
// Every error is a timeout or a closed conn, and once all are closed the
// hierarchy holds no timer.
func TestIdleEvents_Concurrent(t *testing.T) {
	h := startedHierarchy(t)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, 8*n)
	expected := func(err error) bool {
		return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed) ||
			errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe)
	}
	var readEvents, writeEvents atomic.Int64
	for i := range n {
		server, client := tcpPair(t)
		rng := rand.New(rand.NewPCG(uint64(i), 15))
		ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo)) * time.Millisecond }
		idle, ping, life := ms(2, 10), ms(1, 8), ms(20, 80)
		var readIdles atomic.Int64
		conn := h.IdleConn(server, idle,
			timingwheel.OnReadIdle(func(c net.Conn) {
				readEvents.Add(1)
				if readIdles.Add(1) == 3 {
					c.Close() // the third time: give up on the peer
				}
			}),
			timingwheel.OnWriteIdle(ping, func(c net.Conn) {
				writeEvents.Add(1)
				c.SetWriteDeadline(time.Now().Add(time.Millisecond))
				c.Write([]byte("p"))
			}),
			timingwheel.MaxLifetime(life))
		closeAfter := ms(0, 100)
		wg.Go(func() { // the peer: sends at random gaps, and drains
			go io.Copy(io.Discard, client)
			rng := rand.New(rand.NewPCG(uint64(i), 2))
			for {
				time.Sleep(time.Duration(rng.Int64N(int64(idle))) * 3 / 2)
				if _, err := client.Write([]byte("x")); err != nil {
					return
				}
			}
		})
		for range 2 {
			wg.Go(func() { // readers
				buf := make([]byte, 4)
				for {
					if _, err := conn.Read(buf); err != nil {
						if !expected(err) {
							errs <- err
						}
						return
					}
				}
			})
			wg.Go(func() { // writers
				rng := rand.New(rand.NewPCG(uint64(i), 3))
				for {
					if _, err := conn.Write([]byte("y")); err != nil {
						if !expected(err) {
							errs <- err
						}
						return
					}
					time.Sleep(time.Duration(rng.IntN(6000)) * time.Microsecond)
				}
			})
		}
		wg.Go(func() { // deadlines
			for {
				if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
					return // closed
				}
				time.Sleep(time.Millisecond)
			}
		})
		wg.Go(func() { // and Close, racing with it all
			time.Sleep(closeAfter)
			conn.Close()
			client.Close()
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("hung: readers, writers, deadline setters or closers still running after 20s")
	}
	t.Logf("read-idle events %d, write-idle events %d", readEvents.Load(), writeEvents.Load())
	close(errs)
	for err := range errs {
		t.Errorf("unexpected error: %v", err)
	}
	assert.Equal(t, 0, h.Len(), "timers left armed after every conn was closed")
}

func TestIdleEvents_Listener(t *testing.T) {
	h, mock := newMockHierarchy(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	reads, writes := newEvents(h), newEvents(h)
	il := h.IdleListener(ln, time.Second, timingwheel.OnReadIdle(reads.f), timingwheel.OnWriteIdle(700*time.Millisecond, writes.f),
		timingwheel.MaxLifetime(5*time.Second))
	defer il.Close()
	var clients, conns []net.Conn
	for range 3 {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		require.NoError(t, err)
		defer c.Close()
		clients = append(clients, c)
	}
	watchdog(t, 10*time.Second, "Accept of a dialled connection", il, clients[0], clients[1], clients[2])
	for range clients {
		c, err := il.Accept()
		require.NoError(t, err)
		defer c.Close()
		conns = append(conns, c)
	}
	stepTo(t, h, mock, 700*time.Millisecond, writes, 3, "write idle")
	stepTo(t, h, mock, 300*time.Millisecond, reads, 3, "read idle")
	mock.Add(4 * time.Second)
	advanceWithin(t, h, "the lifetime")
	for _, c := range conns {
		_, err := c.Read(make([]byte, 1))
		assertTimeout(t, err, "read")
	}
	assert.Equal(t, 0, h.Len())
}

func TestIdleEvents_BadInput(t *testing.T) {
	h, _ := newMockHierarchy(t)
	server, _ := tcpPair(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	f := func(net.Conn) {}
	for _, d := range []time.Duration{0, -time.Second} {
		assert.PanicsWithValue(t, "timingwheel: OnWriteIdle called with "+d.String()+"; the duration must be positive",
			func() { timingwheel.OnWriteIdle(d, f) })
		assert.PanicsWithValue(t, "timingwheel: MaxLifetime called with "+d.String()+"; the duration must be positive",
			func() { timingwheel.MaxLifetime(d) })
	}
	assert.PanicsWithValue(t, "timingwheel: OnReadIdle called with a nil func", func() { timingwheel.OnReadIdle(nil) })
	assert.PanicsWithValue(t, "timingwheel: OnWriteIdle called with a nil func", func() { timingwheel.OnWriteIdle(time.Second, nil) })
	assert.PanicsWithValue(t, "timingwheel: IdleConn called with a nil IdleOption (option 1)",
		func() { h.IdleConn(server, time.Second, timingwheel.MaxLifetime(time.Second), nil) })
	assert.PanicsWithValue(t, "timingwheel: IdleListener called with a nil IdleOption (option 0)",
		func() { h.IdleListener(ln, time.Second, nil) })
	assert.PanicsWithValue(t, "timingwheel: IdleConn called with idle 0s; it must be positive",
		func() { h.IdleConn(server, 0, timingwheel.OnReadIdle(f)) })
	assert.Equal(t, 0, h.Len(), "a panicking call armed a timer")
}

// TestIdleEvents_ReadWriteAllocs checks that Reads and Writes that move
// data, and so count for the events, allocate nothing.
func TestIdleEvents_ReadWriteAllocs(t *testing.T) {
	h, err := timingwheel.New()
	require.NoError(t, err)
	server, client := tcpPair(t)
	watchdog(t, 20*time.Second, "a Read of data already sent", server, client)
	f := func(net.Conn) {}
	conn := h.IdleConn(server, time.Hour, timingwheel.OnReadIdle(f), timingwheel.OnWriteIdle(time.Hour, f),
		timingwheel.MaxLifetime(time.Hour)).(idleConn)
	const runs = 500
	go io.Copy(io.Discard, client)
	send(t, client, string(make([]byte, 2*8*(runs+1))))
	buf := make([]byte, 8)
	before := conn.IdleDeadline()
	allocs := testing.AllocsPerRun(runs, func() {
		if n, err := conn.Read(buf); n == 0 || err != nil {
			panic("a Read of buffered data returned nothing")
		}
	})
	assert.Zero(t, allocs, "allocations per Read with data")
	assert.True(t, conn.IdleDeadline().After(before), "the Reads did not count")
	allocs = testing.AllocsPerRun(runs, func() {
		if n, err := conn.Write(buf); n == 0 || err != nil {
			panic("a Write returned nothing")
		}
	})
	assert.Zero(t, allocs, "allocations per Write with data")
}
