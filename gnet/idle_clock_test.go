package gnetwheel

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// The idle conns at the edges of the clock: an idle of the largest
// Duration ("never"), a clock.Mock that goes back between a timer's firing
// and its hop onto the loop, and one that goes back past the hierarchy's
// origin, where marks and bucket spans are negative. What is due given the
// marks in these cases is package idlestate's, pinned by its tests; these
// pin gnet's side: the filing in buckets and the hop onto the loop.

func TestIdleClock_AnIdleOfTheLargestDurationNeverCloses(t *testing.T) {
	forever := time.Duration(math.MaxInt64)
	t.Run("SetIdle", func(t *testing.T) {
		mock, h, idler, loop := mockLoop(t, time.Second)
		c := loop.conn(idler)
		mock.Add(time.Millisecond) // last+idle would wrap past the largest int64
		c.idle.SetIdle(forever)
		settle(mock, h, loop, time.Second)
		if len(loop.closed) != 0 {
			t.Fatalf("an Idle given SetIdle(MaxInt64) was closed within 1s, Err = %v", c.err)
		}
		if d := c.idle.Deadline(); d.Before(mock.Now().Add(100 * 365 * 24 * time.Hour)) {
			t.Errorf("Deadline() = %v, want centuries ahead", d)
		}
	})
	t.Run("Idler", func(t *testing.T) {
		mock, h, idler, loop := mockLoop(t, forever)
		loop.conn(idler)
		mock.Add(time.Second)
		c := loop.conn(idler) // its mark is 1 s after the origin
		settle(mock, h, loop, time.Second)
		if len(loop.closed) != 0 {
			t.Fatalf("a conn of Idler(MaxInt64) was closed within 1s, Err = %v", c.err)
		}
	})
	t.Run("OnReadIdle", func(t *testing.T) {
		calls := 0
		mock, h, idler, loop := mockLoop(t, 10*time.Millisecond, OnReadIdle(func(gnet.Conn) { calls++ }))
		c := loop.conn(idler)
		settle(mock, h, loop, 20*time.Millisecond)
		if calls == 0 {
			t.Fatal("OnReadIdle never ran for a 10ms idle")
		}
		c.idle.SetIdle(forever)
		n := calls
		settle(mock, h, loop, time.Second)
		if calls != n {
			t.Fatalf("OnReadIdle ran %d times in 1s after SetIdle(MaxInt64)", calls-n)
		}
	})
}

// A conn given "forever" after its first data on a real gnet server stays
// open.
type foreverServer struct{ *testServer }

func (s foreverServer) OnTraffic(c gnet.Conn) gnet.Action {
	ss := c.Context().(*session)
	c.Next(-1)
	ss.idle.SetIdle(time.Duration(math.MaxInt64)) // authenticated: never idle-closed
	s.emit(event{kind: "traffic", conn: ss.n})
	return gnet.None
}

func TestIdleClock_SetIdleOfTheLargestDurationOnARealServerKeepsTheConn(t *testing.T) {
	s := newIdleServer(t, 10*time.Second)
	srv := runServer(t, foreverServer{s}, s)
	conns := openConns(t, s, srv.addr, 1)
	time.Sleep(5 * time.Millisecond) // the clock is past the hierarchy's origin
	for _, c := range conns {
		if _, err := c.Write([]byte("auth")); err != nil {
			t.Fatal(err)
		}
	}
	a := s.waitFor(t, "traffic", -1, 5*time.Second)
	end := time.After(200 * time.Millisecond)
	for {
		if e, ok := s.poll(); ok && e.kind == "close" {
			t.Fatalf("closed %v after SetIdle(MaxInt64), Idle.Err() = %v", e.at.Sub(a.at), e.err)
		}
		select {
		case <-end:
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// A firing whose hop reaches the loop after the clock went back before
// its deadline does not act then; it comes again once the clock passes the
// deadline, as the hierarchy's own timers do (the core's guarantee 6).
func TestIdleClock_LifetimeAndWriteIdleComeAgainAfterTheClockWentBackBeforeTheHop(t *testing.T) {
	t.Run("MaxLifetime", func(t *testing.T) {
		mock, h, idler, loop := mockLoop(t, 10*time.Hour, MaxLifetime(100*time.Millisecond))
		c := loop.conn(idler)
		mock.Add(100 * time.Millisecond)
		h.Advance() // the lifetime fires: its close is on its way to the loop
		mock.Set(mock.Now().Add(-50 * time.Millisecond))
		loop.runQueued() // it lands with the clock 50 ms before the lifetime's end
		if len(loop.closed) != 0 {
			t.Fatal("closed for its lifetime 50ms before the lifetime's end")
		}
		settle(mock, h, loop, 40*time.Millisecond)
		if len(loop.closed) != 0 {
			t.Fatal("closed for its lifetime before the clock reached its end again")
		}
		settle(mock, h, loop, 20*time.Millisecond)
		if len(loop.closed) != 1 || !errors.Is(c.err, ErrLifetime) {
			t.Fatalf("closes = %d, Err = %v, 10ms after the clock passed the lifetime's end again; want ErrLifetime (h.Len() = %d)",
				len(loop.closed), c.err, h.Len())
		}
	})
	t.Run("OnWriteIdle", func(t *testing.T) {
		calls := 0
		mock, h, idler, loop := mockLoop(t, 10*time.Hour, OnWriteIdle(100*time.Millisecond, func(gnet.Conn) { calls++ }))
		loop.conn(idler)
		mock.Add(100 * time.Millisecond)
		h.Advance()
		mock.Set(mock.Now().Add(-50 * time.Millisecond))
		loop.runQueued()
		if calls != 0 {
			t.Fatal("OnWriteIdle ran 50ms before its deadline")
		}
		settle(mock, h, loop, 60*time.Millisecond)
		if calls != 1 {
			t.Fatalf("OnWriteIdle ran %d times by 10ms after the clock passed its deadline again, want 1", calls)
		}
		settle(mock, h, loop, time.Second)
		if calls != 11 {
			t.Fatalf("OnWriteIdle(100ms) ran %d times in 1.06s of write silence after the clock went back, want 11", calls)
		}
	})
}

// With the clock before the hierarchy's origin (a clock.Mock set back), a
// near deadline and a far one never share a bucket: a conn is closed
// within a bucket's grain of its deadline, not when a far bucket fires.
func TestIdleClock_ABucketBeforeTheOriginHoldsOnlyItsOwnSpan(t *testing.T) {
	for _, idle := range []time.Duration{3010 * time.Millisecond, 4010 * time.Millisecond} {
		mock, h, idler, loop := mockLoop(t, 50*time.Millisecond)
		mock.Add(time.Second) // the hierarchy's origin is 1 s back
		far := loop.conn(idler)
		far.idle.SetIdle(idle) // in a far bucket (64 ms spans)
		mock.Set(mock.Now().Add(-1100 * time.Millisecond))
		near := loop.conn(idler) // due 50 ms before the origin: a near bucket
		settle(mock, h, loop, 70*time.Millisecond)
		if len(loop.closed) != 1 || loop.closed[0] != near {
			t.Fatalf("beside a conn of idle %v: closes = %d 20ms after a 50ms idle passed, want the near conn's",
				idle, len(loop.closed))
		}
	}
}

// Traffic after the clock went back (a clock.Mock set back) moves the
// deadline earlier than the bucket the conn sits in: the conn is filed
// again, and closed (or its OnReadIdle comes) within a bucket's grain of
// the idle after that traffic, as Deadline says, not when the old bucket
// fires.
func TestIdleClock_TrafficAfterTheClockWentBackFilesTheConnAgain(t *testing.T) {
	const idle = 100 * time.Millisecond
	for _, readIdle := range []bool{false, true} {
		var opts []IdleOption
		events := 0
		if readIdle {
			opts = append(opts, OnReadIdle(func(gnet.Conn) { events++ }))
		}
		mock, h, idler, loop := mockLoop(t, idle, opts...)
		mock.Add(10 * time.Second)
		c := loop.conn(idler) // its bucket fires 100 ms from now
		step(mock, h, loop, 50*time.Millisecond)
		mock.Set(mock.Now().Add(-time.Second)) // the clock goes back 1 s
		h.Advance()
		c.idle.Traffic()
		last := mock.Now()
		if d := c.idle.Deadline(); !d.Equal(last.Add(idle)) {
			t.Fatalf("readIdle=%v: Deadline() = last%+v, want last+%v", readIdle, d.Sub(last), idle)
		}
		settle(mock, h, loop, idle-10*time.Millisecond)
		if len(loop.closed) != 0 || events != 0 {
			t.Fatalf("readIdle=%v: closed or read idle before idle had passed since the traffic", readIdle)
		}
		settle(mock, h, loop, 20*time.Millisecond)
		if got := len(loop.closed) + events; got != 1 {
			t.Fatalf("readIdle=%v: %d idle closes or events by 10ms after the deadline the traffic set, want 1", readIdle, got)
		}
	}
}
