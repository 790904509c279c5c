package timingwheel_test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel"
)

// Review tests of the bucketed idle events: black-box,
// on net.Pipe or real TCP, the hierarchy driven by hand on a clock.Mock.
// Each names the section of docs/guarantees.md it checks.

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

// Guarantee 9 (with 15): a panic inside f propagates, and "the remaining due
// timers fire on the next Advance". A conn whose read-idle and write-idle
// events are due together, and whose OnReadIdle function panics, must
// still get its write-idle event on the next Advance: it is a separate
// event (it was a separate timer before the buckets), and bucket.fire's own
// comment says the conn that panicked keeps its events. fire moves the
// write mark (mark.due) before calling onRead, so the panic loses the ping
// for a whole write-idle period.
func TestIdleReview_PanicInOnReadKeepsTheDueWriteIdleEvent(t *testing.T) {
	h, mock := newMockHierarchy(t)
	local, _ := pipe(t)
	pings := newEvents(h)
	c := h.IdleConn(local, time.Second,
		timingwheel.OnReadIdle(func(net.Conn) { panic("boom") }),
		timingwheel.OnWriteIdle(time.Second, pings.f))
	defer c.Close()
	mock.Add(time.Second)
	require.Equal(t, "boom", advanceRecovering(t, h, "the panicking read-idle event"))
	advanceWithin(t, h, "the Advance after the panic")
	assert.Equal(t, 1, pings.n(), "the write-idle event due with the panicking read-idle one did not run on the next Advance")
}

// The control: the same conn, with a read-idle function that does not
// panic, gets both events on one Advance.
func TestIdleReview_BothEventsDueTogetherRun(t *testing.T) {
	h, mock := newMockHierarchy(t)
	local, _ := pipe(t)
	reads, pings := newEvents(h), newEvents(h)
	c := h.IdleConn(local, time.Second, timingwheel.OnReadIdle(reads.f), timingwheel.OnWriteIdle(time.Second, pings.f))
	defer c.Close()
	mock.Add(time.Second)
	advanceWithin(t, h, "both events")
	assert.Equal(t, 1, reads.n())
	assert.Equal(t, 1, pings.n())
}

// years is the hierarchy's clock 150 years after its origin: within the
// range the hierarchy keeps (guarantee 2: deadlines up to the largest
// time.Duration, about 292 years, from the origin work).
const years = 150 * 365 * 24 * time.Hour

// Guarantee 11/15 after a long run of the clock: marks are held doubled
// (the low bit freezes them), so encodeMark clamps them to ±2^62 ns, 146
// years from the origin. 150 years after the origin a freshly wrapped conn
// with options has its read mark stored at 146 years: its idle deadline is
// four years in the past, and the next Advance closes it (a conn without
// options, a plain Timer, is fine: see the control below).
func TestIdleReview_ConnWrapped150YearsAfterOriginIsClosedAtOnce(t *testing.T) {
	h, mock := newMockHierarchy(t)
	mock.Add(years)
	local, peer := pipe(t)
	c := h.IdleConn(local, time.Hour, timingwheel.OnWriteIdle(24*time.Hour, func(net.Conn) {})).(idleConn)
	defer c.Close()
	assert.Equal(t, h.Now().Add(time.Hour), c.IdleDeadline(), "IdleDeadline of a conn just wrapped with idle 1h")
	mock.Add(time.Millisecond)
	advanceWithin(t, h, "a tick after wrapping")
	assert.False(t, peerSeesClosed(t, peer), "a conn with idle 1h was closed a tick after it was wrapped")
}

// The same, with OnReadIdle: the event runs at every Advance, as the mark
// can never get past 146 years, and Reads cannot push it back.
func TestIdleReview_ReadIdleEventEveryAdvance150YearsAfterOrigin(t *testing.T) {
	h, mock := newMockHierarchy(t)
	mock.Add(years)
	local, _ := pipe(t)
	reads := newEvents(h)
	c := h.IdleConn(local, time.Hour, timingwheel.OnReadIdle(reads.f))
	defer c.Close()
	for range 3 {
		mock.Add(time.Millisecond)
		advanceWithin(t, h, "a tick")
	}
	assert.Zero(t, reads.n(), "read-idle events 3ms after wrapping a conn with idle 1h")
}

// The control: a conn without options (a Timer of its own) 150 years on.
func TestIdleReview_PlainConn150YearsAfterOrigin(t *testing.T) {
	h, mock := newMockHierarchy(t)
	mock.Add(years)
	local, peer := pipe(t)
	c := h.IdleConn(local, time.Hour)
	defer c.Close()
	mock.Add(time.Millisecond)
	advanceWithin(t, h, "a tick after wrapping")
	assert.False(t, peerSeesClosed(t, peer), "closed a tick after wrapping")
	mock.Add(time.Hour)
	advanceWithin(t, h, "an hour later")
	assert.True(t, peerSeesClosed(t, peer), "not closed an hour later")
}

// backThenRead wraps local with opts on a clock at origin+10h, sets the
// clock back to origin+5h, has the conn read a byte from peer there, and
// returns the conn.
func backThenRead(t *testing.T, opts ...timingwheel.IdleOption) (h *timingwheel.Hierarchy, mock interface {
	Add(time.Duration)
}, c idleConn, peer net.Conn) {
	t.Helper()
	hh, m := newMockHierarchy(t)
	origin := m.Now()
	m.Add(10 * time.Hour)
	local, p := pipe(t)
	c = hh.IdleConn(local, time.Hour, opts...).(idleConn)
	t.Cleanup(func() { c.Close() })
	m.Set(origin.Add(5 * time.Hour)) // the clock goes back 5h
	go p.Write([]byte{1})
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, err := c.Read(make([]byte, 1))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	return hh, m, c, p
}

// Guarantees 6 and 11: after the clock went back, a Read that returned
// data starts the idle count again from the clock's reading: the conn is
// closed idle after it (as a conn without options is, see the control).
// A conn with options keeps its mark at the later instant (marks only move
// forward), so it stays open 5 hours past its idle deadline, and
// IdleDeadline says so.
func TestIdleReview_ReadAfterClockWentBackDoesNotRearm(t *testing.T) {
	h, mock, c, peer := backThenRead(t, timingwheel.OnWriteIdle(24*time.Hour, func(net.Conn) {}))
	assert.Equal(t, h.Now().Add(time.Hour), c.IdleDeadline(), "IdleDeadline after a Read, the clock having gone back")
	mock.Add(time.Hour)
	advanceWithin(t, h, "idle after the Read")
	assert.True(t, peerSeesClosed(t, peer), "not closed idle (1h) after its last Read")
}

func TestIdleReview_ReadAfterClockWentBackRearmsPlainConn(t *testing.T) {
	h, mock, c, peer := backThenRead(t)
	assert.Equal(t, h.Now().Add(time.Hour), c.IdleDeadline(), "IdleDeadline after a Read, the clock having gone back")
	mock.Add(time.Hour - time.Millisecond)
	advanceWithin(t, h, "a tick before idle after the Read")
	assert.False(t, peerSeesClosed(t, peer), "closed before idle after its last Read")
	mock.Add(time.Millisecond)
	advanceWithin(t, h, "idle after the Read")
	assert.True(t, peerSeesClosed(t, peer), "not closed idle (1h) after its last Read")
}

// Guarantee 3 (order within one Advance) for idle events: a coarse bucket
// fires at the start of its span, and its conns' events that are due by
// the Advance's clock run there, before plain timers due earlier than the
// events. Here a write-idle event due at 1h runs, in an Advance that jumps
// 2h, before a timer due at 59m30s: the timer's callback sees the ping
// already sent. Before the buckets each conn's events had their own timer.
func TestIdleReview_EventsOfACoarseBucketRunBeforeEarlierTimers(t *testing.T) {
	h, mock := newMockHierarchy(t)
	local, _ := pipe(t)
	var (
		mu    sync.Mutex
		order []string
	)
	rec := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	c := h.IdleConn(local, 24*time.Hour, timingwheel.OnWriteIdle(time.Hour, func(net.Conn) { rec("ping due at 1h") }))
	defer c.Close()
	h.AfterFunc(time.Hour-30*time.Second, func() { rec("timer due at 59m30s") })
	mock.Add(2 * time.Hour)
	advanceWithin(t, h, "a 2h jump")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"timer due at 59m30s", "ping due at 1h"}, order, "callbacks of one Advance out of the order of their deadlines")
}

// Same with the conn's own events against each other, across conns: a
// conn whose event is due at 1h in a coarse bucket, and one whose event is
// due at 59m59.9s in a fine one (wrapped later).
func TestIdleReview_EventsOfTwoConnsOutOfOrderInOneAdvance(t *testing.T) {
	h, mock := newMockHierarchy(t)
	var (
		mu    sync.Mutex
		order []string
	)
	rec := func(s string) func(net.Conn) {
		return func(net.Conn) { mu.Lock(); order = append(order, s); mu.Unlock() }
	}
	a, _ := pipe(t)
	ca := h.IdleConn(a, 24*time.Hour, timingwheel.OnWriteIdle(time.Hour, rec("a due at 1h")))
	defer ca.Close()
	mock.Add(time.Hour - time.Second)
	b, _ := pipe(t)
	cb := h.IdleConn(b, 24*time.Hour, timingwheel.OnWriteIdle(900*time.Millisecond, rec("b due at 59m59.9s")))
	defer cb.Close()
	mock.Add(time.Hour)
	advanceWithin(t, h, "an hour's jump")
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

// Guarantees 11 and 15 under load, on the real driver: conns wrapped from
// many goroutines with short idles, Reads and Writes racing their events,
// events that close other conns of the same instant (likely the same
// bucket) and that wrap new conns, and Close racing all of it. Once every
// conn is closed, no timer is left armed (h.Len() == 0) and the hierarchy
// keeps no reference to any conn (weak pointers to what it wrapped are
// cleared by the collector). A conn's events never overlap.
func TestIdleReview_StressCloseRacesEventsAndFiling(t *testing.T) {
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
			wrap := func(idle time.Duration, extra ...timingwheel.IdleOption) net.Conn {
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
				o := append([]timingwheel.IdleOption{
					timingwheel.OnReadIdle(guard(func(c net.Conn) {})),
					timingwheel.OnWriteIdle(time.Millisecond, guard(func(c net.Conn) { c.Write([]byte{0}) })),
				}, extra...)
				c := h.IdleConn(fc, idle, o...)
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
							c = wrap(2*time.Millisecond, timingwheel.MaxLifetime(time.Duration(1+w)*time.Millisecond))
						case 2: // its read-idle event closes the conn wrapped before it, and wraps a new one
							prev := mine[len(mine)-1]
							c = h.IdleConn(&fastConn{}, time.Millisecond, timingwheel.OnReadIdle(func(c net.Conn) {
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
							c = wrap(time.Hour, timingwheel.MaxLifetime(24*time.Hour))
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
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("hung: the workers (wrap, Read, Write, Close) did not finish within 20s")
			}
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
			stopWithin(t, h, 10*time.Second)
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

// weakRef returns a function that reports whether p is still reachable.
func weakRef[T any](p *T) func() bool {
	w := weak.Make(p)
	return func() bool { return w.Value() != nil }
}

// Guarantee 1 (and 15, 13's wording: with a Mock, on the first Advance at
// or after the deadline rounded up to the tick): a deadline D fires on the
// first Advance whose clock has reached due(D), D rounded up to the tick,
// and on no Advance before. A coarse bucket fires at the start of its span,
// before its conns' ticks, and fire compares the marks with the raw clock,
// not with the tick: an Advance at 100.7ms (tick 100) runs a write-idle
// event due at 100.5ms, whose tick is 101. A Timer (a conn without the
// buckets) would fire it at 101ms.
func TestIdleReview_EventFromACoarseBucketWaitsForItsTick(t *testing.T) {
	h, mock := newMockHierarchy(t)
	local, _ := pipe(t)
	pings := newEvents(h)
	c := h.IdleConn(local, time.Hour, timingwheel.OnWriteIdle(100*time.Millisecond+500*time.Microsecond, pings.f))
	defer c.Close()
	mock.Add(100*time.Millisecond + 700*time.Microsecond)
	advanceWithin(t, h, "100.7ms")
	assert.Equal(t, 0, pings.n(), "a ping due at 100.5ms (its tick: 101ms) ran at 100.7ms")
	mock.Add(300 * time.Microsecond)
	advanceWithin(t, h, "101ms")
	assert.Equal(t, 1, pings.n(), "no ping at its tick, 101ms")
}

// The same for MaxLifetime: closed at 100.7ms for a lifetime ending at
// 100.5ms, whose tick is 101ms.
func TestIdleReview_LifetimeFromACoarseBucketWaitsForItsTick(t *testing.T) {
	h, mock := newMockHierarchy(t)
	local, peer := pipe(t)
	c := h.IdleConn(local, time.Hour, timingwheel.MaxLifetime(100*time.Millisecond+500*time.Microsecond))
	defer c.Close()
	mock.Add(100*time.Millisecond + 700*time.Microsecond)
	advanceWithin(t, h, "100.7ms")
	assert.False(t, peerSeesClosed(t, peer), "a lifetime ending at 100.5ms (its tick: 101ms) closed the conn at 100.7ms")
	mock.Add(300 * time.Microsecond)
	advanceWithin(t, h, "101ms")
	assert.True(t, peerSeesClosed(t, peer), "not closed at its lifetime's tick, 101ms")
}

// The same through a fine bucket: a Write moves the write mark by half a
// tick after the conn was filed, so the bucket fires a tick before the
// event's tick, with the clock past the (unrounded) event.
func TestIdleReview_EventAfterAWriteWaitsForItsTick(t *testing.T) {
	h, mock := newMockHierarchy(t)
	local, peer := pipe(t)
	pings := newEvents(h)
	c := h.IdleConn(local, time.Hour, timingwheel.OnWriteIdle(10*time.Millisecond, pings.f))
	defer c.Close()
	mock.Add(500 * time.Microsecond)
	go io.ReadFull(peer, make([]byte, 1))
	_, err := c.Write([]byte{1}) // the next ping is due at 10.5ms: tick 11
	require.NoError(t, err)
	mock.Add(10*time.Millisecond + 200*time.Microsecond)
	advanceWithin(t, h, "10.7ms")
	assert.Equal(t, 0, pings.n(), "a ping due at 10.5ms (its tick: 11ms) ran at 10.7ms")
	mock.Add(300 * time.Microsecond)
	advanceWithin(t, h, "11ms")
	assert.Equal(t, 1, pings.n(), "no ping at its tick, 11ms")
}

// Guarantees 1, 2, 6, 11 and 15 against a model, on a Mock: conns with
// random idles, write idles and lifetimes (whole ticks, from a tick to
// hours), Reads and Writes at random instants, the clock stepping a tick,
// a few, jumping hours, or stepping back; after each Advance every conn has
// had exactly the events and the close the model says, neither early nor
// late. A Read or Write with the clock behind its mark counts from the
// clock, as a Reset would. After the clock went back, what a callback
// arms for a tick the shards have passed waits for the next Advance
// (guarantee 5), so there the model is checked once Advance has nothing
// left to run. The hierarchies are tiny and large, with one shard and many.
func TestIdleReview_ModelOfEventsWithJumps(t *testing.T) {
	for _, o := range [][]timingwheel.Option{
		{timingwheel.WithShards(1)},
		{timingwheel.WithShards(4), timingwheel.WithLevels(2, 2)},
		{timingwheel.WithShards(3), timingwheel.WithParallelCallbacks(), timingwheel.WithLevels(10, 3, 7)},
	} {
		mock := clock.NewMock()
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
		type model struct {
			c                     net.Conn
			fc                    *fastConn
			onRead                bool
			idle, wi, life        time.Duration
			read, write, end      time.Duration // instants since the start
			closed                bool
			reads, writes         atomic.Int32
			wantReads, wantWrites int32
		}
		var conns []*model
		var now, high time.Duration // the clock, and the furthest it has been
		for step := range 1500 {
			if r.IntN(10) == 0 || len(conns) < 20 {
				m := &model{fc: &fastConn{}, onRead: r.IntN(2) == 0, idle: randDur(), read: now, write: now, end: 1<<63 - 1}
				var opts []timingwheel.IdleOption
				if m.onRead {
					opts = append(opts, timingwheel.OnReadIdle(func(net.Conn) { m.reads.Add(1) }))
				}
				if r.IntN(3) > 0 {
					m.wi = randDur()
					opts = append(opts, timingwheel.OnWriteIdle(m.wi, func(net.Conn) { m.writes.Add(1) }))
				}
				if r.IntN(3) == 0 {
					m.life = randDur()
					m.end = now + m.life
					opts = append(opts, timingwheel.MaxLifetime(m.life))
				}
				if len(opts) == 0 {
					opts = append(opts, timingwheel.MaxLifetime(1<<62))
				}
				m.c = h.IdleConn(m.fc, m.idle, opts...)
				conns = append(conns, m)
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
				} else if n, _ := m.c.Write(buf); n > 0 && m.wi > 0 {
					m.write = now
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
			wasBehind := now < high
			now += d
			high = max(high, now)
			mock.Add(d)
			advanceWithin(t, h, fmt.Sprintf("step %d", step))
			for wasBehind && h.Advance() > 0 {
			}
			for i, m := range conns {
				if m.closed {
					continue
				}
				// What a jump reaches happens in the order of the instants,
				// as timers fire (guarantee 3): each event restarts its count
				// from the clock's reading, so it comes once per jump; at one
				// instant the lifetime's end comes first, then the idle close,
				// then the events.
				for !m.closed {
					next := min(m.end, m.read+m.idle)
					if m.wi > 0 {
						next = min(next, m.write+m.wi)
					}
					if next > now {
						break
					}
					switch {
					case next == m.end:
						m.closed = true
					case !m.onRead && next == m.read+m.idle:
						m.closed = true
					default:
						if m.onRead && next == m.read+m.idle {
							m.wantReads++
							m.read = now
						}
						if m.wi > 0 && next == m.write+m.wi {
							m.wantWrites++
							m.write = now
						}
					}
				}
				require.Equal(t, m.closed, m.fc.closes.Load() > 0, "step %d (at %v) conn %d (idle %v, write idle %v, life %v): closed", step, now, i, m.idle, m.wi, m.life)
				require.Equal(t, m.wantReads, m.reads.Load(), "step %d (at %v) conn %d (idle %v): read-idle events", step, now, i, m.idle)
				require.Equal(t, m.wantWrites, m.writes.Load(), "step %d (at %v) conn %d (write idle %v): write-idle events", step, now, i, m.wi)
			}
			if r.IntN(30) == 0 { // close some
				for _, m := range conns {
					if !m.closed && r.IntN(3) == 0 {
						m.c.Close()
						m.closed = true
						m.fc.closes.Store(1)
					}
				}
			}
		}
		for _, m := range conns {
			m.c.Close()
		}
		assert.Equal(t, 0, h.Len(), "timers armed once every conn is closed")
	}
}

// The config cache (keyed by values and func words, 8 weak entries): many
// distinct closures, idles that differ, the same closure on two
// hierarchies and collections in between never give a conn another's
// function, idle or hierarchy.
func TestIdleReview_ConfigCacheNeverMixesConns(t *testing.T) {
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
			c = h.IdleConn(&fastConn{}, idle, timingwheel.OnReadIdle(func(c net.Conn) {
				mu.Lock()
				got = append(got, rec{i, c, h})
				mu.Unlock()
			}))
		} else {
			c = h.IdleConn(&fastConn{}, idle, timingwheel.OnReadIdle(shared))
		}
		want[c] = i
		idleOf[c] = idle
		if i%10 == 0 {
			runtime.GC() // let dead configs go: their func words may be reused
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
