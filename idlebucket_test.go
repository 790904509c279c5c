package timingwheel

import (
	"fmt"
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

// TestIdleBucket_ClosedConnKeepsNoFunctionAlive: the idle layer holds no reference
// to a closed conn's functions, nor so to what they capture.
func TestIdleBucket_ClosedConnKeepsNoFunctionAlive(t *testing.T) {
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

// The tests below pin the buckets' list heads: sentinels of which only the
// links are used, with a bucket found from its head through the group's
// head maps.

// TestIdleBucket_GroupIs64Bytes: the head maps fit in the group's 64 bytes,
// so that the groups of a hierarchy stay one cache line apart.
func TestIdleBucket_GroupIs64Bytes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are pinned for 64-bit platforms")
	}
	assert.EqualValues(t, 64, unsafe.Sizeof(idleGroup{}))
}

// headContents names what head holds beyond its links (no conn, policy,
// marks, idle, state, group or extension), and says whether it is
// unlinked.
func headContents[X connExtra](head *eventConn[X]) []string {
	var held []string
	add := func(name string, v any, zero bool) {
		if !zero {
			held = append(held, fmt.Sprintf("%s %v", name, v))
		}
	}
	add("conn", head.Conn, head.Conn == nil)
	add("policy", head.p, head.p == nil)
	add("mark", head.mark.v.Load(), head.mark.v.Load() == 0)
	add("idle", head.idle.Load(), head.idle.Load() == 0)
	add("state", head.state.Load(), head.state.Load() == 0)
	add("home", head.home, head.home == 0)
	if e := head.ext(); e != nil {
		add("write mark", e.write.v.Load(), e.write.v.Load() == 0)
		add("lifetime end", e.lifeEnd, e.lifeEnd == 0)
	}
	add("no links", nil, head.next != nil && head.prev != nil)
	return held
}

// assertBareHeads checks the heads of every bucket of g, and of its spare,
// up to the first that holds something.
func assertBareHeads(t *testing.T, when string, g *idleGroup) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	bs := make([]*idleBucket, 0, len(g.buckets)+1)
	for _, b := range g.buckets {
		bs = append(bs, b)
	}
	if g.spare != nil {
		bs = append(bs, g.spare)
	}
	for _, b := range bs {
		if !assert.Empty(t, headContents(&b.plain), "%s, bucket %v: its plain list's head holds more than links", when, b.key) ||
			!assert.Empty(t, headContents(&b.ext), "%s, bucket %v: its extended list's head holds more than links", when, b.key) {
			return
		}
	}
}

// TestIdleBucket_HeadsHoldOnlyLinks: whatever a bucket's span (one tick
// near, 2^level ticks far) and through filing, SetIdle, Close and firing,
// its list heads hold nothing of the bucket, and the conns still find and
// drop their buckets.
func TestIdleBucket_HeadsHoldOnlyLinks(t *testing.T) {
	h, clk := newFake(t, WithShards(1), WithTick(time.Millisecond))
	f := func(net.Conn) {}
	var conns []net.Conn
	for i := range 40 {
		idle := time.Duration(1+i%7) * 10 * time.Millisecond // near: one-tick buckets
		if i%2 == 0 {
			idle = time.Duration(1+i) * time.Hour // far: coarse buckets
		}
		if i%3 == 0 {
			conns = append(conns, h.IdleConn(&nopConn{}, idle, OnReadIdle(f)))
		} else {
			conns = append(conns, h.IdleConn(&nopConn{}, idle, OnWriteIdle(idle/2, f)))
		}
	}
	g := &h.idleW.Load().groups[0]
	require.NotEmpty(t, g.buckets)
	levels := map[uint8]bool{}
	for key := range g.buckets {
		levels[key.level] = true
	}
	require.True(t, levels[0] && len(levels) > 1, "the test wants both near and far buckets: %v", levels)
	assertBareHeads(t, "wrapped", g)
	mustCheck(t, h)
	for i, c := range conns {
		if i%4 == 1 {
			c.(IdleControl).SetIdle(time.Duration(2+i) * time.Minute)
		}
	}
	assertBareHeads(t, "after SetIdle", g)
	mustCheck(t, h)
	for range 50 {
		clk.Add(10 * time.Millisecond)
		h.Advance()
	}
	assertBareHeads(t, "after firing", g)
	mustCheck(t, h)
	for _, c := range conns {
		require.NoError(t, c.Close())
	}
	assertBareHeads(t, "closed", g)
	assert.Equal(t, 0, h.Len(), "a Close that emptied a bucket left its timer armed")
	assert.Empty(t, g.buckets)
	assert.Empty(t, g.plainHeads, "the head maps keep a dropped bucket")
	assert.Empty(t, g.extHeads, "the head maps keep a dropped bucket")
	mustCheck(t, h)
}

// TestIdleBucket_EitherListKeepsItsBucket: conns with and without the
// extension whose events fall in one tick share a bucket, one in each of
// its lists; the bucket is dropped when both lists are empty, whichever
// empties first.
func TestIdleBucket_EitherListKeepsItsBucket(t *testing.T) {
	f := func(net.Conn) {}
	for _, plainFirst := range []bool{true, false} {
		h, _ := newFake(t, WithShards(1))
		plain := h.IdleConn(&nopConn{}, time.Second, OnReadIdle(f))
		ext := h.IdleConn(&nopConn{}, time.Second, MaxLifetime(time.Hour))
		require.Equal(t, 1, h.Len(), "two conns due on one tick, two timers")
		first, second := ext, plain
		if plainFirst {
			first, second = plain, ext
		}
		require.NoError(t, first.Close())
		assert.Equal(t, 1, h.Len(), "plain first %v: the bucket was dropped with conns in its other list", plainFirst)
		mustCheck(t, h)
		require.NoError(t, second.Close())
		assert.Equal(t, 0, h.Len(), "plain first %v: the bucket outlived its conns", plainFirst)
		mustCheck(t, h)
	}
}

// BenchmarkIdleBucketSetIdle: SetIdle of a conn alone in its bucket takes
// it out, which drops the bucket (its timer stopped, it becomes the spare),
// and files it in a new one (the spare, armed again): a bucket dropped and
// made per op.
func BenchmarkIdleBucketSetIdle(b *testing.B) {
	for _, kind := range []string{"plain", "ext"} {
		b.Run("conn="+kind, func(b *testing.B) {
			h, _ := newFake(b, WithShards(1))
			opt := OnReadIdle(func(net.Conn) {})
			if kind == "ext" {
				opt = OnWriteIdle(time.Hour, func(net.Conn) {})
			}
			c := h.IdleConn(&nopConn{}, time.Minute, opt).(IdleControl)
			b.ReportAllocs()
			d := time.Minute
			for b.Loop() {
				d ^= time.Second // another bucket each time
				c.SetIdle(d)
			}
		})
	}
}

// BenchmarkIdleBucketWrapClose: wrapping a conn whose event falls in a
// tick of its own makes a bucket, and closing it drops the bucket.
func BenchmarkIdleBucketWrapClose(b *testing.B) {
	h, _ := newFake(b, WithShards(1))
	opt := OnReadIdle(func(net.Conn) {})
	nc := &nopConn{}
	b.ReportAllocs()
	for b.Loop() {
		h.IdleConn(nc, time.Minute, opt).Close()
	}
}

// BenchmarkIdleBucketFire: 1,000 conns whose read-idle events come every
// 1 to 100 ms, over a millisecond tick; each op is an Advance by a tick,
// which fires a bucket, runs its conns' events and files them again, in
// new buckets or ones already made.
func BenchmarkIdleBucketFire(b *testing.B) {
	h, clk := newFake(b, WithShards(1), WithTick(time.Millisecond))
	opt := OnReadIdle(func(net.Conn) {})
	for i := range 1000 {
		h.IdleConn(&nopConn{}, time.Duration(1+i%100)*time.Millisecond, opt)
	}
	b.ReportAllocs()
	for b.Loop() {
		clk.Add(time.Millisecond)
		h.Advance()
	}
}
