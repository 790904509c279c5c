package netidle_test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/netidle"
)

// Tests of idle events (docs/guarantees.md, "Idle events"), on real TCP
// connections over
// 127.0.0.1 unless a test says otherwise. As in conn_test.go, most
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
	advanceBy(t, h, mock, d, what)
	require.Equal(t, want, e.n(), "events after %s", what)
}

func TestIdleEvents_OnReadIdleRepeatsAndKeepsOpen(t *testing.T) {
	h, mock := newMock(t)
	server, client := watchedPair(t, 20*time.Second, "a Read of data already sent")
	const idle = 3 * time.Second
	ev := newEvents(h)
	conn := netidle.Conn(h, server, idle, netidle.OnReadIdle(ev.f)).(idleConn)
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
	h, mock := newMock(t)
	server, client := watchedPair(t, 20*time.Second, "a Read of data already sent")
	const idle, ping = time.Minute, 2 * time.Second
	ev := newEvents(h)
	conn := netidle.Conn(h, server, idle, netidle.OnWriteIdle(ping, ev.f))
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
	advanceBy(t, h, mock, rest-time.Millisecond, "a tick before read idle")
	send(t, conn, "still open")
	receive(t, client, "still open")
	advanceBy(t, h, mock, time.Millisecond, "read idle")
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
	h, mock := newMock(t)
	server, client := watchedPair(t, 20*time.Second, "a Read of the conn closed at its lifetime returning")
	const idle, life = 2 * time.Second, 9 * time.Second
	conn := netidle.Conn(h, server, idle, netidle.MaxLifetime(life)).(idleConn)
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
	advanceBy(t, h, mock, wrapped.Add(life).Sub(mock.Now())-time.Millisecond, "a tick before the lifetime")
	send(t, conn, "open")
	receive(t, client, "open")
	advanceBy(t, h, mock, time.Millisecond, "the lifetime")
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
// steps on a conn with every option, against a model of docs/guarantees.md's "Idle events": an
// event is due when its duration has passed since the later of its last
// data and its last event; the lifetime closes the conn. Steps are 100ms
// and every duration a multiple of it, so each event is due exactly at a
// step.
func TestIdleEvents_Together(t *testing.T) {
	const step = 100 * time.Millisecond
	for seed := range uint64(6) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 15))
			h, mock := newMock(t)
			server, client := watchedPair(t, 20*time.Second, "a Read of data already sent")
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
			conn := netidle.Conn(h, server, idle, netidle.OnReadIdle(record("read")),
				netidle.OnWriteIdle(ping, record("write")), netidle.MaxLifetime(life))
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
		server, client := watchedPair(t, 20*time.Second, "the slow sender's bytes arriving")
		ev := newEvents(h)
		conn := netidle.Conn(h, server, idle, netidle.OnReadIdle(ev.f))
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
		// The 8 MiB before the conn is wrapped: made between the wrap and
		// the Write (under -race, on a loaded machine, tens of ms), it
		// let the write-idle time pass before the Write began.
		data := make([]byte, 8<<20)
		conn := netidle.Conn(h, server, time.Minute, netidle.OnWriteIdle(ping, ev.f))
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
		_, err := conn.Write(data) // about half a second to drain
		require.NoError(t, err)
		wrote := h.Now()
		took := time.Since(began)
		require.Greater(t, took, 3*ping, "the Write was too fast to test anything")
		assert.Zero(t, ev.n(), "write-idle events during a Write of %v whose peer read all along", took)
		at := recvWithin(t, 10*time.Second, ev.ch, "the write-idle event after the slow Write")
		assert.GreaterOrEqual(t, at.Sub(wrote), ping, "the event came before ping after the Write returned")
	})
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
			// The traffic must come every d/2 for its events to be judged:
			// a round in which this goroutine was held up for d or more
			// between two of its calls (a loaded machine) has a correct
			// event during its traffic, and is tried again.
			for attempt := 1; ; attempt++ {
				if realClockRound(t, h, kind, d, late) {
					return
				}
				if attempt == 5 {
					t.Fatalf("the test's traffic stalled for %v or more in each of %d rounds", d, attempt)
				}
			}
		})
	}
}

// realClockRound is one round of TestIdleEvents_RealClock; it reports
// false, having checked nothing, if the traffic it makes every d/2 stalled
// for d or more.
func realClockRound(t *testing.T, h *timingwheel.Hierarchy, kind string, d, late time.Duration) bool {
	server, client := watchedPair(t, 20*time.Second, "the "+kind+" event")
	ev := newEvents(h)
	var opt netidle.Option
	switch kind {
	case "read":
		opt = netidle.OnReadIdle(ev.f)
	case "write":
		opt = netidle.OnWriteIdle(d, ev.f)
	case "lifetime":
		opt = netidle.MaxLifetime(5 * d)
	}
	idle := d
	if kind != "read" {
		idle = time.Minute
	}
	wrapped := h.Now()
	conn := netidle.Conn(h, server, idle, opt)
	defer conn.Close()
	buf := make([]byte, 1)
	var last time.Time // before the last call that moved data
	prevData := wrapped
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
		if kind != "lifetime" && h.Now().Sub(prevData) >= d {
			t.Logf("the traffic stalled: %v between two calls; again", h.Now().Sub(prevData))
			return false
		}
		prevData = last
		time.Sleep(d / 2)
	}
	if kind == "lifetime" {
		_, err := conn.Read(buf) // blocks until the close
		closed := h.Now()
		assertTimeout(t, err, "read")
		assert.GreaterOrEqual(t, closed.Sub(wrapped), 5*d, "closed before its lifetime")
		assert.Less(t, closed.Sub(wrapped), 5*d+late)
		return true
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
	return true
}

// TestIdleEvents_InBubble runs the driver inside a testing/synctest bubble
// over net.Pipe, where time moves only when every goroutine waits: the
// events come exactly at their deadlines rounded up to the tick, on the
// real driver, with a ping written by f that re-arms.
func TestIdleEvents_InBubble(t *testing.T) {
	inBubble(t, "a conn's events over its 2s lifetime in a bubble", func(t *testing.T) {
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
		conn := netidle.Conn(h, server, idle, netidle.OnReadIdle(reads.f),
			netidle.OnWriteIdle(ping, writes.f), netidle.MaxLifetime(life))
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
			clk := newFakeClock()
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
				var opts []netidle.Option
				idle := time.Hour
				switch kind {
				case "read":
					opts, idle = []netidle.Option{netidle.OnReadIdle(f)}, d
				case "write":
					opts = []netidle.Option{netidle.OnWriteIdle(d, f)}
				case "lifetime":
					opts = []netidle.Option{netidle.MaxLifetime(d)}
				case "all":
					opts, idle = []netidle.Option{netidle.OnReadIdle(f), netidle.OnWriteIdle(d, f), netidle.MaxLifetime(2 * d)}, d
				}
				conn := netidle.Conn(h, server, idle, opts...)
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
	var readEvents, writeEvents atomic.Int64
	closeRace{
		Conns: 16, Readers: 2, Writers: 2, ReadBuf: 4, WriteGap: 6 * time.Millisecond,
		Drain: true, SetDeadlines: true,
		Wrap: func(i int, server net.Conn) (net.Conn, time.Duration, time.Duration) {
			rng := rand.New(rand.NewPCG(uint64(i), 15))
			ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo)) * time.Millisecond }
			idle, ping, life := ms(2, 10), ms(1, 8), ms(20, 80)
			var readIdles atomic.Int64
			conn := netidle.Conn(h, server, idle,
				netidle.OnReadIdle(func(c net.Conn) {
					readEvents.Add(1)
					if readIdles.Add(1) == 3 {
						c.Close() // the third time: give up on the peer
					}
				}),
				netidle.OnWriteIdle(ping, func(c net.Conn) {
					writeEvents.Add(1)
					c.SetWriteDeadline(time.Now().Add(time.Millisecond))
					c.Write([]byte("p"))
				}),
				netidle.MaxLifetime(life))
			return conn, idle, ms(0, 100)
		},
		Expected: func(_ string, err error) bool {
			return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed) ||
				errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe)
		},
	}.Run(t, h)
	t.Logf("read-idle events %d, write-idle events %d", readEvents.Load(), writeEvents.Load())
}

func TestIdleEvents_Listener(t *testing.T) {
	h, mock := newMock(t)
	ln := listen(t)
	reads, writes := newEvents(h), newEvents(h)
	il := netidle.Listener(h, ln, time.Second, netidle.OnReadIdle(reads.f), netidle.OnWriteIdle(700*time.Millisecond, writes.f),
		netidle.MaxLifetime(5*time.Second))
	defer il.Close()
	_, conns := dialAccept(t, ln, il, 3)
	stepTo(t, h, mock, 700*time.Millisecond, writes, 3, "write idle")
	stepTo(t, h, mock, 300*time.Millisecond, reads, 3, "read idle")
	advanceBy(t, h, mock, 4*time.Second, "the lifetime")
	for _, c := range conns {
		_, err := c.Read(make([]byte, 1))
		assertTimeout(t, err, "read")
	}
	assert.Equal(t, 0, h.Len())
}

func TestIdleEvents_BadInput(t *testing.T) {
	h, _ := newMock(t)
	server, _ := tcpPair(t)
	ln := listen(t)
	f := func(net.Conn) {}
	for _, d := range []time.Duration{0, -time.Second} {
		assert.PanicsWithValue(t, "netidle: OnWriteIdle called with "+d.String()+"; the duration must be positive",
			func() { netidle.OnWriteIdle(d, f) })
		assert.PanicsWithValue(t, "netidle: MaxLifetime called with "+d.String()+"; the duration must be positive",
			func() { netidle.MaxLifetime(d) })
	}
	assert.PanicsWithValue(t, "netidle: OnReadIdle called with a nil func", func() { netidle.OnReadIdle(nil) })
	assert.PanicsWithValue(t, "netidle: OnWriteIdle called with a nil func", func() { netidle.OnWriteIdle(time.Second, nil) })
	assert.PanicsWithValue(t, "netidle: Conn called with a nil Option (option 1)",
		func() { netidle.Conn(h, server, time.Second, netidle.MaxLifetime(time.Second), nil) })
	assert.PanicsWithValue(t, "netidle: Listener called with a nil Option (option 0)",
		func() { netidle.Listener(h, ln, time.Second, nil) })
	assert.PanicsWithValue(t, "netidle: Conn called with idle 0s; it must be positive",
		func() { netidle.Conn(h, server, 0, netidle.OnReadIdle(f)) })
	assert.Equal(t, 0, h.Len(), "a panicking call armed a timer")
}

// TestIdleEvents_ReadWriteAllocs checks that Reads and Writes that move
// data, and so count for the events, allocate nothing.
func TestIdleEvents_ReadWriteAllocs(t *testing.T) {
	h, err := timingwheel.New()
	require.NoError(t, err)
	server, client := watchedPair(t, 20*time.Second, "a Read of data already sent")
	f := func(net.Conn) {}
	conn := netidle.Conn(h, server, time.Hour, netidle.OnReadIdle(f), netidle.OnWriteIdle(time.Hour, f),
		netidle.MaxLifetime(time.Hour)).(idleConn)
	const runs = 500
	go io.Copy(io.Discard, client)
	assertReadsAllocFree(t, conn, client, runs)
	buf := make([]byte, 8)
	allocs := testing.AllocsPerRun(runs, func() {
		if n, err := conn.Write(buf); n == 0 || err != nil {
			panic("a Write returned nothing")
		}
	})
	assert.Zero(t, allocs, "allocations per Write with data")
}

// A panic inside f propagates, and the remaining due timers fire on the
// next Advance (docs/guarantees.md, "Bad input"), also for idle events
// ("Idle events"): a conn whose read-idle and write-idle events are due
// together, and whose OnReadIdle function panics, gets its write-idle
// event on the next Advance. It is an event of its own: the panic of the
// other does not move it on by a write-idle period.
func TestIdleEvents_PanicInOnReadKeepsTheDueWriteIdleEvent(t *testing.T) {
	h, mock := newMock(t)
	local, _ := pipe(t)
	pings := newEvents(h)
	c := netidle.Conn(h, local, time.Second,
		netidle.OnReadIdle(func(net.Conn) { panic("boom") }),
		netidle.OnWriteIdle(time.Second, pings.f))
	defer c.Close()
	mock.Add(time.Second)
	require.Equal(t, "boom", advanceRecovering(t, h, "the panicking read-idle event"))
	advanceWithin(t, h, "the Advance after the panic")
	assert.Equal(t, 1, pings.n(), "the write-idle event due with the panicking read-idle one did not run on the next Advance")
}

// The control of the test above: the same conn, with a read-idle function
// that does not panic, gets both events on one Advance.
func TestIdleEvents_BothEventsDueTogetherRunInOneAdvance(t *testing.T) {
	h, mock := newMock(t)
	local, _ := pipe(t)
	reads, pings := newEvents(h), newEvents(h)
	c := netidle.Conn(h, local, time.Second, netidle.OnReadIdle(reads.f), netidle.OnWriteIdle(time.Second, pings.f))
	defer c.Close()
	advanceBy(t, h, mock, time.Second, "both events")
	assert.Equal(t, 1, reads.n())
	assert.Equal(t, 1, pings.n())
}

// Deadlines up to the largest time.Duration from the origin work
// (docs/guarantees.md, "Precision does not depend on distance"), for a
// conn with options too ("Idle connections", "Idle events"): 150 years
// after the origin, a conn just wrapped with idle 1h says so in its
// IdleDeadline, and is not closed a tick later. The conn without options
// is TestIdleConn_ClosedAfterIdle150YearsAfterOrigin.
func TestIdleEvents_ConnWrapped150YearsAfterOriginStaysOpen(t *testing.T) {
	h, mock := newMock(t)
	mock.Add(years)
	local, peer := pipe(t)
	c := netidle.Conn(h, local, time.Hour, netidle.OnWriteIdle(24*time.Hour, func(net.Conn) {})).(idleConn)
	defer c.Close()
	assert.Equal(t, h.Now().Add(time.Hour), c.IdleDeadline(), "IdleDeadline of a conn just wrapped with idle 1h")
	advanceBy(t, h, mock, time.Millisecond, "a tick after wrapping")
	assert.False(t, peerSeesClosed(t, peer), "a conn with idle 1h was closed a tick after it was wrapped")
}

// The same with OnReadIdle: 150 years after the origin, a conn wrapped with
// idle 1h has no read-idle event in the 3ms after.
func TestIdleEvents_NoReadIdleEventBeforeIdle150YearsAfterOrigin(t *testing.T) {
	h, mock := newMock(t)
	mock.Add(years)
	local, _ := pipe(t)
	reads := newEvents(h)
	c := netidle.Conn(h, local, time.Hour, netidle.OnReadIdle(reads.f))
	defer c.Close()
	for range 3 {
		advanceBy(t, h, mock, time.Millisecond, "a tick")
	}
	assert.Zero(t, reads.n(), "read-idle events 3ms after wrapping a conn with idle 1h")
}

// Order within one Advance (docs/guarantees.md, "Order") holds between idle
// events and plain timers: in an Advance that jumps 2h, a timer due at
// 59m30s runs before a write-idle event due at 1h, whose conn is filed in a
// coarse bucket that fires at the start of its span.
func TestIdleEvents_RunAfterTimersDueEarlierInOneAdvance(t *testing.T) {
	h, mock := newMock(t)
	local, _ := pipe(t)
	var (
		mu    sync.Mutex
		order []string
	)
	rec := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	c := netidle.Conn(h, local, 24*time.Hour, netidle.OnWriteIdle(time.Hour, func(net.Conn) { rec("ping due at 1h") }))
	defer c.Close()
	h.AfterFunc(time.Hour-30*time.Second, func() { rec("timer due at 59m30s") })
	advanceBy(t, h, mock, 2*time.Hour, "a 2h jump")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"timer due at 59m30s", "ping due at 1h"}, order, "callbacks of one Advance out of the order of their deadlines")
}

// The same between the events of two conns: one whose event is due at 1h,
// in a coarse bucket, and one whose event is due at 59m59.9s, in a fine
// one (wrapped later): the earlier event runs first.
func TestIdleEvents_OfTwoConnsRunInDeadlineOrder(t *testing.T) {
	h, mock := newMock(t)
	var (
		mu    sync.Mutex
		order []string
	)
	rec := func(s string) func(net.Conn) {
		return func(net.Conn) { mu.Lock(); order = append(order, s); mu.Unlock() }
	}
	a, _ := pipe(t)
	ca := netidle.Conn(h, a, 24*time.Hour, netidle.OnWriteIdle(time.Hour, rec("a due at 1h")))
	defer ca.Close()
	mock.Add(time.Hour - time.Second)
	b, _ := pipe(t)
	cb := netidle.Conn(h, b, 24*time.Hour, netidle.OnWriteIdle(900*time.Millisecond, rec("b due at 59m59.9s")))
	defer cb.Close()
	advanceBy(t, h, mock, time.Hour, "an hour's jump")
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, order)
	assert.Equal(t, "b due at 59m59.9s", order[0], "order of one Advance: %v", order)
}

// fastConn moves data at once (Read returns a byte, Write takes all) and
// counts its Closes. A fake, so that a stress test spends its time in the
// hierarchy, not in sockets.
type fastConn struct {
	net.Conn
	closes atomic.Int32
}

func (c *fastConn) Read(p []byte) (int, error) {
	if c.closes.Load() > 0 {
		return 0, net.ErrClosed
	}
	return min(len(p), 1), nil
}

func (c *fastConn) Write(p []byte) (int, error) {
	if c.closes.Load() > 0 {
		return 0, net.ErrClosed
	}
	return len(p), nil
}

func (c *fastConn) Close() error         { c.closes.Add(1); return nil }
func (c *fastConn) LocalAddr() net.Addr  { return nil }
func (c *fastConn) RemoteAddr() net.Addr { return nil }

// Idle connections and idle events under load (docs/guarantees.md, "Idle
// connections", "Idle events"), on the real driver: conns wrapped from many
// goroutines with short idles, Reads and Writes racing their events, events
// that close other conns of the same instant (likely the same bucket) and
// that wrap new conns, and Close racing all of it. Once every conn is
// closed, no timer is left armed (h.Len() == 0) and the hierarchy keeps no
// reference to any conn (weak pointers to what it wrapped are cleared by
// the collector). A conn's events never overlap.
func TestIdleEvents_StressCloseRacesEventsAndFiling(t *testing.T) {
	for _, opts := range []struct {
		name string
		o    []timingwheel.Option
	}{
		{"ordered, 4 shards", []timingwheel.Option{timingwheel.WithShards(4)}},
		{"parallel, 8 shards", []timingwheel.Option{timingwheel.WithShards(8), timingwheel.WithParallelCallbacks()}},
		{"one shard, tiny levels", []timingwheel.Option{timingwheel.WithShards(1), timingwheel.WithLevels(2, 2)}},
		{"100us tick", []timingwheel.Option{timingwheel.WithTick(100 * time.Microsecond), timingwheel.WithShards(3)}},
	} {
		t.Run(opts.name, func(t *testing.T) {
			h, err := timingwheel.New(opts.o...)
			require.NoError(t, err)
			h.Start()
			defer h.Stop()
			const workers, perWorker = 8, 150
			var (
				mu      sync.Mutex
				all     []net.Conn
				fakes   []*fastConn
				overlap atomic.Int32
			)
			wrap := func(idle time.Duration, extra ...netidle.Option) net.Conn {
				fc := &fastConn{}
				var inEvent atomic.Int32
				guard := func(f func(net.Conn)) func(net.Conn) {
					return func(c net.Conn) {
						if inEvent.Add(1) != 1 {
							overlap.Add(1)
						}
						f(c)
						inEvent.Add(-1)
					}
				}
				o := append([]netidle.Option{
					netidle.OnReadIdle(guard(func(c net.Conn) {})),
					netidle.OnWriteIdle(time.Millisecond, guard(func(c net.Conn) { c.Write([]byte{0}) })),
				}, extra...)
				c := netidle.Conn(h, fc, idle, o...)
				mu.Lock()
				all = append(all, c)
				fakes = append(fakes, fc)
				mu.Unlock()
				return c
			}
			stop := time.Now().Add(1500 * time.Millisecond)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					var mine []net.Conn
					for i := range perWorker {
						var c net.Conn
						switch i % 4 {
						case 0:
							c = wrap(time.Duration(1+i%3) * time.Millisecond)
						case 1:
							c = wrap(2*time.Millisecond, netidle.MaxLifetime(time.Duration(1+w)*time.Millisecond))
						case 2: // its read-idle event closes the conn wrapped before it, and wraps a new one
							prev := mine[len(mine)-1]
							c = netidle.Conn(h, &fastConn{}, time.Millisecond, netidle.OnReadIdle(func(c net.Conn) {
								prev.Close()
								if time.Now().Before(stop) {
									n := wrap(time.Millisecond)
									go func() { time.Sleep(time.Millisecond); n.Close() }()
								}
								c.Close()
							}))
							mu.Lock()
							all = append(all, c)
							mu.Unlock()
						default:
							c = wrap(time.Hour, netidle.MaxLifetime(24*time.Hour))
						}
						mine = append(mine, c)
						if i%8 == 0 {
							time.Sleep(100 * time.Microsecond)
						}
					}
					buf := make([]byte, 1)
					for j := 0; time.Now().Before(stop); j++ {
						c := mine[j%len(mine)]
						c.Read(buf)
						c.Write(buf)
						if j%50 == 0 {
							time.Sleep(50 * time.Microsecond)
						}
						if j%997 == 0 {
							c.Close()
						}
					}
					for _, c := range mine {
						c.Close()
					}
				})
			}
			waitWithin(t, 20*time.Second, &wg, "the workers (wrap, Read, Write, Close)")
			// Conns wrapped by events until stop: let those events end,
			// then close everything that is left.
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			for _, c := range all {
				c.Close()
			}
			refs := make([]func() bool, 0, len(fakes))
			for _, fc := range fakes {
				refs = append(refs, weakRef(fc))
			}
			all, fakes = nil, nil
			mu.Unlock()
			assert.Zero(t, overlap.Load(), "a conn's events overlapped")
			stopWithin(t, h, "the driver")
			assert.Equal(t, 0, h.Len(), "timers left armed once every conn was closed")
			alive := 0
			for range 3 {
				runtime.GC()
				alive = 0
				for _, r := range refs {
					if r() {
						alive++
					}
				}
				if alive == 0 {
					break
				}
			}
			assert.Zero(t, alive, "conns still referenced once closed (of %d)", len(refs))
		})
	}
}

// Never early (docs/guarantees.md, "Never early, at most one tick late";
// with a Mock, as "Request deadlines" words it, on the first Advance whose
// clock has reached the deadline rounded up to the tick), for idle events
// too ("Idle events"): a coarse bucket fires at the start of its span,
// before its conns' ticks, and the events it finds due by the raw clock
// still wait for their tick: with a 1ms tick, a write-idle event due at
// 100.5ms (its tick: 101ms) does not run at 100.7ms, and runs at 101ms, as
// a plain Timer's callback would.
func TestIdleEvents_EventFromACoarseBucketWaitsForItsTick(t *testing.T) {
	h, mock := newMock(t)
	local, _ := pipe(t)
	pings := newEvents(h)
	c := netidle.Conn(h, local, time.Hour, netidle.OnWriteIdle(100*time.Millisecond+500*time.Microsecond, pings.f))
	defer c.Close()
	advanceBy(t, h, mock, 100*time.Millisecond+700*time.Microsecond, "100.7ms")
	assert.Equal(t, 0, pings.n(), "a ping due at 100.5ms (its tick: 101ms) ran at 100.7ms")
	advanceBy(t, h, mock, 300*time.Microsecond, "101ms")
	assert.Equal(t, 1, pings.n(), "no ping at its tick, 101ms")
}

// The same for MaxLifetime: a lifetime ending at 100.5ms (its tick: 101ms)
// does not close the conn at 100.7ms, and closes it at 101ms.
func TestIdleEvents_LifetimeFromACoarseBucketWaitsForItsTick(t *testing.T) {
	h, mock := newMock(t)
	local, peer := pipe(t)
	c := netidle.Conn(h, local, time.Hour, netidle.MaxLifetime(100*time.Millisecond+500*time.Microsecond))
	defer c.Close()
	advanceBy(t, h, mock, 100*time.Millisecond+700*time.Microsecond, "100.7ms")
	assert.False(t, peerSeesClosed(t, peer), "a lifetime ending at 100.5ms (its tick: 101ms) closed the conn at 100.7ms")
	advanceBy(t, h, mock, 300*time.Microsecond, "101ms")
	assert.True(t, peerSeesClosed(t, peer), "not closed at its lifetime's tick, 101ms")
}

// The same through a fine bucket: a Write moves the write mark by half a
// tick after the conn was filed, so the bucket fires a tick before the
// event's tick, with the clock past the (unrounded) event; the event waits
// for its tick.
func TestIdleEvents_EventAfterAWriteWaitsForItsTick(t *testing.T) {
	h, mock := newMock(t)
	local, peer := pipe(t)
	pings := newEvents(h)
	c := netidle.Conn(h, local, time.Hour, netidle.OnWriteIdle(10*time.Millisecond, pings.f))
	defer c.Close()
	mock.Add(500 * time.Microsecond)
	go io.ReadFull(peer, make([]byte, 1))
	_, err := c.Write([]byte{1}) // the next ping is due at 10.5ms: tick 11
	require.NoError(t, err)
	advanceBy(t, h, mock, 10*time.Millisecond+200*time.Microsecond, "10.7ms")
	assert.Equal(t, 0, pings.n(), "a ping due at 10.5ms (its tick: 11ms) ran at 10.7ms")
	advanceBy(t, h, mock, 300*time.Microsecond, "11ms")
	assert.Equal(t, 1, pings.n(), "no ping at its tick, 11ms")
}

// Idle conns and their events against a model, on a Mock
// (docs/guarantees.md, "Never early, at most one tick late", "Precision
// does not depend on distance", "Clock anomalies", "Idle connections",
// "Idle events"): conns with random idles, write idles and lifetimes
// (whole ticks, from a tick to hours), Reads and Writes at random
// instants, the clock stepping a tick, a few, jumping hours, or stepping
// back; after each Advance every conn has had exactly the events and the
// close the model says, neither early nor late. A Read or Write with the
// clock behind its mark counts from the clock, as a Reset would. After the
// clock went back, what a callback arms for a tick the shards have passed
// waits for the next Advance ("Callbacks may call back"), so there the
// model is checked once Advance has nothing left to run. The hierarchies
// are tiny and large, with one shard and many.
func TestIdleEvents_MatchModelThroughClockJumps(t *testing.T) {
	for _, o := range [][]timingwheel.Option{
		{timingwheel.WithShards(1)},
		{timingwheel.WithShards(4), timingwheel.WithLevels(2, 2)},
		{timingwheel.WithShards(3), timingwheel.WithParallelCallbacks(), timingwheel.WithLevels(10, 3, 7)},
	} {
		mock := newFakeClock() // as a Mock, but moving it does not sleep
		h, err := timingwheel.New(append([]timingwheel.Option{timingwheel.WithClock(mock)}, o...)...)
		require.NoError(t, err)
		r := rand.New(rand.NewPCG(uint64(len(o)), 11))
		ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
		randDur := func() time.Duration {
			switch r.IntN(4) {
			case 0:
				return ms(1 + r.Int64N(5))
			case 1:
				return ms(1 + r.Int64N(200))
			case 2:
				return ms(1 + r.Int64N(20_000))
			default:
				return ms(1 + r.Int64N(3*3600_000))
			}
		}
		var conns []*ctlModel
		var now, high time.Duration // the clock, and the furthest it has been
		for step := range 1500 {
			if r.IntN(10) == 0 || len(conns) < 20 {
				onRead, idle := r.IntN(2) == 0, randDur()
				var wi, life time.Duration
				if r.IntN(3) > 0 {
					wi = randDur()
				}
				if r.IntN(3) == 0 {
					life = randDur()
				}
				if !onRead && wi == 0 && life == 0 {
					life = 1 << 62
				}
				conns = append(conns, newCtlModel(h, now, onRead, r.IntN(3) == 0, idle, wi, life))
			}
			for range r.IntN(5) {
				m := conns[r.IntN(len(conns))]
				if m.closed {
					continue
				}
				buf := []byte{1}
				if r.IntN(2) == 0 {
					if n, _ := m.c.Read(buf); n > 0 {
						m.read = now
					}
				} else if n, _ := m.c.Write(buf); n > 0 {
					m.wrote(now)
				}
			}
			var d time.Duration
			switch x := r.IntN(20); {
			case x < 12:
				d = ms(1)
			case x < 18:
				d = ms(1 + r.Int64N(100))
			case x < 19:
				d = ms(r.Int64N(3 * 3600_000))
			case r.IntN(3) > 0:
				d = ms(r.Int64N(30 * 24 * 3600_000))
			default: // back, a little or a lot
				d = -min(now, ms(1+r.Int64N([]int64{5, 200, 3 * 3600_000}[r.IntN(3)])))
			}
			moveClock(t, h, mock, &now, &high, d, fmt.Sprintf("step %d", step))
			for i, m := range conns {
				if m.closed {
					continue
				}
				// What a jump reaches happens in the order of the instants,
				// as timers fire ("Order"): each event restarts its count
				// from the clock's reading, so it comes once per jump; at one
				// instant the lifetime's end comes first, then the idle close,
				// then the events.
				m.due(now)
				m.check(t, fmt.Sprintf("step %d (at %v) conn %d (idle %v, write idle %v, all idle %v, life %v)", step, now, i, m.idle, m.wi, m.all, m.life))
			}
			if r.IntN(30) == 0 { // close some
				closeSome(r, conns)
			}
		}
		for _, m := range conns {
			m.c.Close()
		}
		assert.Equal(t, 0, h.Len(), "timers armed once every conn is closed")
	}
}

// Each conn runs its own event function at its own idle: many distinct
// closures, idles that differ, the same closure on two hierarchies, and
// collections in between never give a conn another's function, idle or
// hierarchy.
func TestIdleEvents_EachConnRunsItsOwnFunctionAndIdle(t *testing.T) {
	m1, m2 := clock.NewMock(), clock.NewMock()
	h1, err := timingwheel.New(timingwheel.WithClock(m1))
	require.NoError(t, err)
	h2, err := timingwheel.New(timingwheel.WithClock(m2), timingwheel.WithShards(1))
	require.NoError(t, err)
	type rec struct {
		i int
		c net.Conn
		h *timingwheel.Hierarchy
	}
	var (
		mu  sync.Mutex
		got []rec
	)
	shared := func(c net.Conn) { mu.Lock(); got = append(got, rec{-1, c, nil}); mu.Unlock() }
	want := map[net.Conn]int{}
	idleOf := map[net.Conn]time.Duration{}
	for i := range 60 {
		h := h1
		if i%3 == 0 {
			h = h2
		}
		idle := time.Duration(1+i%7) * time.Second
		var c net.Conn
		if i%2 == 0 {
			c = netidle.Conn(h, &fastConn{}, idle, netidle.OnReadIdle(func(c net.Conn) {
				mu.Lock()
				got = append(got, rec{i, c, h})
				mu.Unlock()
			}))
		} else {
			c = netidle.Conn(h, &fastConn{}, idle, netidle.OnReadIdle(shared))
		}
		want[c] = i
		idleOf[c] = idle
		if i%10 == 0 {
			runtime.GC() // let dead closures go: their memory may be reused
		}
	}
	for _, step := range []*clock.Mock{m1, m2} {
		step.Add(time.Second)
	}
	for s := 1; s <= 7; s++ {
		mu.Lock()
		got = nil
		mu.Unlock()
		advanceWithin(t, h1, "h1")
		advanceWithin(t, h2, "h2")
		mu.Lock()
		for _, r := range got {
			i, ok := want[r.c]
			require.True(t, ok, "an event with a conn nobody wrapped")
			if r.i >= 0 {
				assert.Equal(t, i, r.i, "conn %d's event ran conn %d's function", i, r.i)
			}
			assert.Zero(t, time.Duration(s)*time.Second%idleOf[r.c], "conn %d (idle %v) had an event at %ds", i, idleOf[r.c], s)
		}
		n := 0
		for c, i := range want {
			if time.Duration(s)*time.Second%idleOf[c] == 0 {
				n++
				_ = i
			}
		}
		assert.Len(t, got, n, "events at %ds", s)
		mu.Unlock()
		m1.Add(time.Second)
		m2.Add(time.Second)
	}
	for c := range want {
		c.Close()
	}
	assert.Zero(t, h1.Len())
	assert.Zero(t, h2.Len())
}

// TestIdleEvents_PauseOrCloseInTheLookCancelsTheEvent (issue 39, 2): an
// event whose function has not started when Pause or Close returns does
// not run, as Timer.Stop cancels a callback that has not started. The
// Pause or Close runs at one of the clock readings of the Advance whose
// look finds the event due; if it returns while that Advance is still
// inside the reading (it did not wait for the look), the event must not
// run after it.
func TestIdleEvents_PauseOrCloseInTheLookCancelsTheEvent(t *testing.T) {
	for _, ev := range []string{"readidle", "writeidle"} {
		for _, op := range []string{"Pause", "Close"} {
			for reading := 1; reading <= lookReadings; reading++ {
				t.Run(fmt.Sprintf("%s/%s/reading=%d", ev, op, reading), func(t *testing.T) {
					h, clk := newHooked(t)
					server, _ := watchedPair(t, 20*time.Second, "a Read or a close")
					var ran atomic.Int32
					f := func(net.Conn) { ran.Add(1) }
					opt := netidle.OnReadIdle(f)
					idle := time.Second
					if ev == "writeidle" {
						opt, idle = netidle.OnWriteIdle(time.Second, f), time.Hour
					}
					c := netidle.Conn(h, server, idle, opt).(netidle.Control)
					defer c.Close()
					clk.Add(time.Second)
					var returnedFirst bool
					var ranBefore int32
					var done <-chan struct{}
					clk.arm(reading, func() {
						ranBefore = ran.Load()
						returnedFirst, done = raced(200*time.Millisecond, func() {
							if op == "Pause" {
								c.Pause()
							} else {
								c.Close()
							}
						})
					})
					advanceWithin(t, h, "the event due, a "+op+" at one of the Advance's readings")
					clk.disarm()
					if done != nil {
						recvWithin(t, 10*time.Second, done, "the "+op+" to return")
					} else if op == "Pause" { // the Advance took fewer readings: right after it
						c.Pause()
					} else {
						c.Close()
					}
					if returnedFirst {
						assert.Equal(t, ranBefore, ran.Load(), "the event's function ran after %s returned", op)
					}
					n := ran.Load()
					clk.Add(time.Hour)
					advanceWithin(t, h, "an hour after the "+op)
					assert.Equal(t, n, ran.Load(), "an event after %s returned", op)
				})
			}
		}
	}
}

// stuckConn is a conn whose Write blocks until the conn is closed, as one
// to a peer that reads nothing; each Write sends on started as it begins.
type stuckConn struct {
	fastConn
	started chan struct{}
	gone    chan struct{}
	once    sync.Once
}

func newStuckConn() *stuckConn {
	return &stuckConn{started: make(chan struct{}, 1), gone: make(chan struct{})}
}

func (c *stuckConn) Write(p []byte) (int, error) {
	c.started <- struct{}{}
	<-c.gone
	return 0, net.ErrClosed
}

func (c *stuckConn) Close() error {
	c.once.Do(func() { close(c.gone) })
	return c.fastConn.Close()
}

// With AllIdle and OnWriteIdle, the idle close counts from the last data
// moved either way, not from where the write-idle event restarts its own
// count (after it ran, or after a look found a Write in progress): a conn
// that moves nothing is closed once idle has passed although its
// write-idle events (which write nothing) kept running, and so is one
// whose Write has been blocked since it was wrapped ("one whose peer stops
// reading is closed once idle has passed").
func TestIdleEvents_AllIdleCloseIsNotPostponedByTheWriteIdleEvent(t *testing.T) {
	for _, blocked := range []bool{false, true} {
		t.Run(fmt.Sprintf("write blocked %v", blocked), func(t *testing.T) {
			h, mock := newMock(t)
			sc := newStuckConn()
			e := newEvents(h)
			start := mock.Now()
			c := netidle.Conn(h, sc, 10*time.Second, netidle.AllIdle(), netidle.OnWriteIdle(3*time.Second, e.f))
			defer c.Close()
			writeErr := make(chan error, 1)
			if blocked {
				go func() {
					_, err := c.Write([]byte("stuck"))
					writeErr <- err
				}()
				recvWithin(t, 10*time.Second, sc.started, "the Write's start")
			}
			for range 9 {
				advanceBy(t, h, mock, time.Second, "a second")
			}
			require.Zero(t, sc.closes.Load(), "closed at 9s, before idle (10s) passed")
			advanceBy(t, h, mock, time.Second, "to 10s")
			require.EqualValues(t, 1, sc.closes.Load(), "open at 10s: idle passed with no data moved either way")
			assert.Equal(t, start.Add(10*time.Second), c.(netidle.Control).IdleDeadline(), "the deadline it was closed for")
			if blocked {
				assert.Zero(t, e.n(), "write-idle events while a Write was in progress")
				assertIdleErr(t, recvWithin(t, 10*time.Second, writeErr, "the blocked Write's return"), netidle.ErrIdle, "the blocked Write")
			} else {
				assert.Equal(t, 3, e.n(), "write-idle events at 3, 6 and 9s")
			}
		})
	}
}
