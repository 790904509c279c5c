package timingwheel

import (
	"math/rand/v2"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// White-box tests of the buckets that keep the conns of IdleConn with
// options (idlebucket.go). What the conns do is tested black-box, on real
// sockets, in idleevents_test.go; these pin how they are kept.

// nopConn moves data at once and records its Close.
type nopConn struct {
	net.Conn
	closed atomic.Bool
}

func (c *nopConn) Read(p []byte) (int, error)  { return len(p), nil }
func (c *nopConn) Write(p []byte) (int, error) { return len(p), nil }
func (c *nopConn) Close() error                { c.closed.Store(true); return nil }
func (c *nopConn) LocalAddr() net.Addr         { return nil }
func (c *nopConn) RemoteAddr() net.Addr        { return nil }

func TestIdleBucket_ConnIs64Bytes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are pinned for 64-bit platforms")
	}
	assert.EqualValues(t, 64, unsafe.Sizeof(eventConn[noExtra]{}), "a conn with options, its own idle included, is a 64-byte size class")
	assert.EqualValues(t, 80, unsafe.Sizeof(eventConn[lifeExtra]{}), "one with a write-idle event or a lifetime, the 80-byte one")
}

// TestIdleBucket_SpanFiresNoLaterThanTheTimer checks spanFor against what a
// timer for the event would do: a near event's bucket fires on the tick the
// timer would; a far one's fires before the event, after now, and spans at
// most 1/32 of the distance.
func TestIdleBucket_SpanFiresNoLaterThanTheTimer(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for range 20_000 {
		tick := int64(1 + r.IntN(5_000_000))
		now := r.Int64N(1 << 50)
		due := now + r.Int64N(1<<(1+r.IntN(50))) - r.Int64N(3*tick)
		key, at := spanFor(due, now, tick)
		k := ceilDiv(due, tick)
		q := k - now/tick
		if q < fineTicks {
			require.Equal(t, bucketKey{j: k}, key, "due %d now %d tick %d", due, now, tick)
			require.Equal(t, k, at, "a near bucket fires on the event's tick")
			continue
		}
		require.LessOrEqual(t, at, k, "a far bucket fires after its event: due %d now %d tick %d", due, now, tick)
		require.Greater(t, at, now/tick, "a far bucket fires at once: due %d now %d tick %d", due, now, tick)
		require.LessOrEqual(t, int64(1)<<key.level, q/32, "a span wider than 1/32 of the distance")
		require.Equal(t, at>>key.level, key.j)
	}
}

// TestIdleBucket_ConnsShareATimer: conns whose events fall in one tick
// share one timer; Close of the last drops it.
func TestIdleBucket_ConnsShareATimer(t *testing.T) {
	h, _ := newFake(t, WithShards(1))
	f := func(net.Conn) {}
	var conns []net.Conn
	for range 100 {
		conns = append(conns, h.IdleConn(&nopConn{}, time.Second, OnWriteIdle(500*time.Millisecond, f)))
	}
	assert.Equal(t, 1, h.Len(), "100 conns wrapped at one instant, one timer")
	mustCheck(t, h)
	for _, c := range conns[1:] {
		require.NoError(t, c.Close())
	}
	assert.Equal(t, 1, h.Len())
	require.NoError(t, conns[0].Close())
	assert.Equal(t, 0, h.Len(), "the last Close left the bucket's timer armed")
	assert.Empty(t, h.idleW.Load().groups[0].buckets)
	mustCheck(t, h)
}

// TestIdleBucket_PolicySharedByPointer: the conns of one policy (and of
// one IdleListener) hold the policy itself, no copy of its options; a
// conn's SetIdle changes its own idle, not the policy's nor its
// neighbours'; the options decide the conn's extension.
func TestIdleBucket_PolicySharedByPointer(t *testing.T) {
	h, _ := newFake(t)
	f := func(net.Conn) {}
	p := h.IdlePolicy(time.Minute, OnReadIdle(f))
	a := p.Conn(&nopConn{}).(*eventConn[noExtra])
	b := p.Conn(&nopConn{}).(*eventConn[noExtra])
	assert.Same(t, p, a.p, "a conn does not hold its policy")
	assert.Same(t, a.p, b.p, "two conns of one policy hold different policies")
	a.SetIdle(time.Hour)
	assert.Equal(t, int64(time.Hour), a.idle.Load())
	assert.Equal(t, int64(time.Minute), b.idle.Load(), "SetIdle of one conn changed another's idle")
	assert.Equal(t, int64(time.Minute), p.idle, "SetIdle changed the policy")
	w := h.IdlePolicy(time.Minute, OnWriteIdle(time.Second, f)).Conn(&nopConn{})
	_, ok := w.(*eventConn[lifeExtra])
	assert.True(t, ok, "a conn with a write-idle event has no write mark: %T", w)
	l := h.IdlePolicy(time.Minute, MaxLifetime(time.Hour)).Conn(&nopConn{})
	_, ok = l.(*eventConn[lifeExtra])
	assert.True(t, ok, "a conn with a lifetime has no room for its end: %T", l)
	plain := h.IdlePolicy(time.Minute).Conn(&nopConn{})
	_, ok = plain.(*idleConn)
	assert.True(t, ok, "a conn without options is not the one with a timer: %T", plain)
	for _, x := range []net.Conn{a, b, w, l, plain} {
		x.Close()
	}
	assert.Equal(t, 0, h.Len())
	mustCheck(t, h)
}

// TestIdleBucket_CacheKeepsNoReference: the config cache holds no reference
// to a closed conn's functions, nor so to what they capture.
func TestIdleBucket_CacheKeepsNoReference(t *testing.T) {
	h, _ := newFake(t)
	type state struct{ pings int }
	s := &state{}
	ref := weak.Make(s)
	c := h.IdleConn(&nopConn{}, time.Minute, OnWriteIdle(time.Second, func(net.Conn) { s.pings++ }))
	require.NoError(t, c.Close())
	c, s = nil, nil
	runtime.GC()
	runtime.GC()
	assert.Nil(t, ref.Value(), "the hierarchy keeps what a closed conn's function captured")
}

// TestIdleBucket_FarEventOnItsTick: an event hours away goes through coarse
// buckets and still comes on its tick, not before, whether the clock steps
// or jumps there.
func TestIdleBucket_FarEventOnItsTick(t *testing.T) {
	for _, step := range []time.Duration{0, time.Minute, 997 * time.Millisecond} {
		h, clk := newFake(t)
		var pings atomic.Int32
		start := clk.Now()
		c := h.IdleConn(&nopConn{}, 10*time.Hour, OnWriteIdle(7*time.Hour+3*time.Millisecond+1, func(net.Conn) { pings.Add(1) }))
		ping := start.Add(7*time.Hour + 4*time.Millisecond) // the tick of 7h3ms+1ns
		for now := start; step > 0 && now.Before(ping.Add(-step)); now = now.Add(step) {
			clk.Set(now)
			h.Advance()
			require.Zero(t, pings.Load(), "step %v: pinged at %v", step, now.Sub(start))
			mustCheck(t, h)
		}
		clk.Set(ping.Add(-time.Millisecond))
		h.Advance()
		require.Zero(t, pings.Load(), "step %v: pinged a tick early", step)
		mustCheck(t, h)
		clk.Set(ping)
		h.Advance()
		require.EqualValues(t, 1, pings.Load(), "step %v: no ping on its tick", step)
		mustCheck(t, h)
		closeAt := start.Add(10 * time.Hour) // nothing read since the start
		clk.Set(closeAt.Add(-time.Millisecond))
		h.Advance()
		require.False(t, c.(*eventConn[lifeExtra]).Conn.(*nopConn).closed.Load(), "step %v: closed early", step)
		clk.Set(closeAt)
		h.Advance()
		require.True(t, c.(*eventConn[lifeExtra]).Conn.(*nopConn).closed.Load(), "step %v: not closed on its tick", step)
		assert.Equal(t, 0, h.Len())
		mustCheck(t, h)
	}
}

// TestIdleBucket_PanickingEventKeepsTheOthers: a panicking function stops
// neither its own conn's events nor those of the conns in its bucket.
func TestIdleBucket_PanickingEventKeepsTheOthers(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	var ran atomic.Int32
	boom := h.IdleConn(&nopConn{}, time.Hour, OnWriteIdle(time.Second, func(net.Conn) { panic("boom") }))
	var others []net.Conn
	for range 3 {
		others = append(others, h.IdleConn(&nopConn{}, time.Hour, OnWriteIdle(time.Second, func(net.Conn) { ran.Add(1) })))
	}
	clk.Add(time.Second)
	func() {
		defer func() { assert.Equal(t, "boom", recover()) }()
		h.Advance()
	}()
	mustCheck(t, h)
	h.Advance()
	assert.EqualValues(t, 3, ran.Load(), "the conns after the panicking one lost their event")
	clk.Add(time.Second)
	func() {
		defer func() { assert.Equal(t, "boom", recover()) }()
		h.Advance()
	}()
	h.Advance()
	assert.EqualValues(t, 6, ran.Load())
	for _, c := range append(others, boom) {
		c.Close()
	}
	assert.Equal(t, 0, h.Len())
	mustCheck(t, h)
}

// gatedConn's Read blocks until release is closed, then returns data.
type gatedConn struct {
	nopConn
	entered chan struct{}
	release chan struct{}
}

func (c *gatedConn) Read(p []byte) (int, error) {
	close(c.entered)
	<-c.release
	return len(p), nil
}

// TestIdleBucket_DeadlineStaysAtTheIdleClose: a Read in flight when the
// hierarchy closed a conn with options returns its data, and does not
// move IdleDeadline past the close (the idle close froze the read mark).
func TestIdleBucket_DeadlineStaysAtTheIdleClose(t *testing.T) {
	h, clk := newFake(t)
	gc := &gatedConn{entered: make(chan struct{}), release: make(chan struct{})}
	c := h.IdleConn(gc, time.Second, OnWriteIdle(time.Hour, func(net.Conn) {}))
	want := c.(interface{ IdleDeadline() time.Time }).IdleDeadline()
	done := make(chan struct{})
	go func() {
		defer close(done)
		n, _ := c.Read(make([]byte, 4))
		assert.Equal(t, 4, n, "the Read in flight lost its data")
	}()
	<-gc.entered
	clk.Add(time.Second)
	h.Advance()
	require.True(t, gc.closed.Load(), "not closed at its idle deadline")
	clk.Add(time.Second)
	close(gc.release)
	<-done
	assert.Equal(t, want, c.(interface{ IdleDeadline() time.Time }).IdleDeadline(), "IdleDeadline moved after the idle close")
	assert.Equal(t, 0, h.Len())
	mustCheck(t, h)
}
