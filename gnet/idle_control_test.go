package gnetwheel

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/timingwheel/timingwheel/netidle"
)

// Tests of the Idle's sentinels and of its Pause, Resume and SetIdle, the
// core's IdleControl on a gnet loop. Mock-driven unless they say so.

func TestIdle_ErrIsTheCoresSentinel(t *testing.T) {
	if ErrIdle != netidle.ErrIdle || ErrLifetime != netidle.ErrLifetime {
		t.Fatal("gnetwheel.ErrIdle and ErrLifetime are not the core's values: two sentinels for one meaning")
	}
	mock, h, idler, loop := mockLoop(t, 100*time.Millisecond)
	c := loop.conn(idler)
	step(mock, h, loop, 100*time.Millisecond)
	checkTimeoutErr(t, c.err, netidle.ErrIdle, "an idle close")

	mock, h, idler, loop = mockLoop(t, time.Hour, MaxLifetime(50*time.Millisecond))
	c = loop.conn(idler)
	step(mock, h, loop, 50*time.Millisecond)
	checkTimeoutErr(t, c.err, netidle.ErrLifetime, "a lifetime close")
}

// checkTimeoutErr checks that err is want, os.ErrDeadlineExceeded and a
// net.Error whose Timeout() is true, as the core's idle closes report.
func checkTimeoutErr(t *testing.T, err, want error, what string) {
	t.Helper()
	var ne net.Error
	if !errors.Is(err, want) || !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("Idle.Err() after %s = %v; want errors.Is(err, %v), errors.Is(err, os.ErrDeadlineExceeded), a net.Error with Timeout()", what, err, want)
	}
}

func TestIdle_PausedConnIsNeverClosedForIdleness(t *testing.T) {
	const idle = 100 * time.Millisecond
	mock, h, idler, loop := mockLoop(t, idle)
	c := loop.conn(idler)
	step(mock, h, loop, 40*time.Millisecond)
	c.idle.Pause()
	wantNoTimers(t, h, "h.Len() = %d with the only conn paused, want 0: a paused conn is in no bucket")
	if d := c.idle.Deadline(); !d.IsZero() {
		t.Errorf("Deadline() = %v while paused, want the zero Time", d)
	}
	for range 100 { // ten idles of silence, and traffic that counts for nothing
		step(mock, h, loop, 10*time.Millisecond)
		c.idle.Traffic()
		if len(loop.closed) != 0 {
			t.Fatalf("a paused conn was closed (Err %v)", c.err)
		}
	}
	c.idle.Pause() // twice is fine
	step(mock, h, loop, 5*time.Millisecond)
	resumed := mock.Now()
	c.idle.Resume()
	if d := c.idle.Deadline(); !d.Equal(resumed.Add(idle)) {
		t.Errorf("Deadline() after Resume = Resume%+v, want Resume+%v", d.Sub(resumed), idle)
	}
	step(mock, h, loop, idle-time.Millisecond)
	if len(loop.closed) != 0 {
		t.Fatal("closed before an idle had passed since Resume")
	}
	step(mock, h, loop, time.Millisecond)
	wantCloses(t, loop, 1, c.err, ErrIdle, "an idle after Resume: closes = %d, Err = %v; want one idle close")
	wantNoTimers(t, h, "h.Len() = %d after the close, want 0")
}

func TestIdle_PauseSuspendsTheReadAndWriteIdleEvents(t *testing.T) {
	const readIdle, writeIdle = 100 * time.Millisecond, 30 * time.Millisecond
	var reads, writes []time.Duration
	var start time.Time
	var mock interface{ Now() time.Time }
	m, h, idler, loop := mockLoop(t, readIdle,
		OnReadIdle(func(gnet.Conn) { reads = append(reads, mock.Now().Sub(start)) }),
		OnWriteIdle(writeIdle, func(gnet.Conn) { writes = append(writes, mock.Now().Sub(start)) }))
	mock, start = m, m.Now()
	c := loop.conn(idler)
	step(m, h, loop, 10*time.Millisecond)
	c.idle.Pause()
	for range 50 {
		step(m, h, loop, 10*time.Millisecond)
		c.idle.Write([]byte("x")) // writes while paused push nothing
	}
	if len(reads)+len(writes) != 0 {
		t.Fatalf("idle events while paused: read idle at %v, write idle at %v", reads, writes)
	}
	wantNoTimers(t, h, "h.Len() = %d with the conn paused and written to, want 0: a paused conn arms nothing")
	resumed := m.Now().Sub(start)
	c.idle.Resume()
	for m.Now().Sub(start) < resumed+readIdle {
		step(m, h, loop, time.Millisecond)
	}
	wantWrites := []time.Duration{resumed + writeIdle, resumed + 2*writeIdle, resumed + 3*writeIdle}
	if len(reads) != 1 || reads[0] != resumed+readIdle || !equalDurations(writes, wantWrites) {
		t.Errorf("after Resume at %v: read idle at %v, write idle at %v; want read idle at %v, write idle at %v",
			resumed, reads, writes, resumed+readIdle, wantWrites)
	}
	if len(loop.closed) != 0 {
		t.Error("closed: OnReadIdle must keep it open")
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestIdle_PauseCancelsAWriteIdleOnItsWayToTheLoop(t *testing.T) {
	const writeIdle = 50 * time.Millisecond
	calls := 0
	mock, h, idler, loop := mockLoop(t, time.Hour, OnWriteIdle(writeIdle, func(gnet.Conn) { calls++ }))
	c := loop.conn(idler)
	mock.Add(writeIdle)
	h.Advance() // the bucket fires for the write-idle event: its scan is queued for the loop
	if len(loop.queued) != 1 {
		t.Fatalf("queued %d tasks, want the write-idle callback", len(loop.queued))
	}
	c.idle.Pause() // on the loop, before the callback lands
	loop.runQueued()
	if calls != 0 {
		t.Fatal("OnWriteIdle ran for a conn paused after its timer fired")
	}
	c.idle.Resume()
	step(mock, h, loop, writeIdle)
	if calls != 1 {
		t.Fatalf("OnWriteIdle ran %d times a write idle after Resume, want once", calls)
	}
}

func TestIdle_PausedConnStillEndsAtItsLifetime(t *testing.T) {
	const life = 200 * time.Millisecond
	mock, h, idler, loop := mockLoop(t, 50*time.Millisecond, MaxLifetime(life))
	c := loop.conn(idler)
	c.idle.Pause()
	step(mock, h, loop, life-time.Millisecond)
	if len(loop.closed) != 0 {
		t.Fatalf("closed (Err %v) before its lifetime", c.err)
	}
	step(mock, h, loop, time.Millisecond)
	wantCloses(t, loop, 1, c.err, ErrLifetime, "at its lifetime, paused: closes = %d, Err = %v; want a lifetime close")
	wantNoTimers(t, h, "h.Len() = %d, want 0")
}

func TestIdle_OnReadIdleMayPauseItsConn(t *testing.T) {
	const idle = 100 * time.Millisecond
	calls := 0
	var x *Idle
	mock, h, idler, loop := mockLoop(t, idle, OnReadIdle(func(gnet.Conn) { calls++; x.Pause() }))
	c := loop.conn(idler)
	x = c.idle
	for range 50 {
		step(mock, h, loop, 10*time.Millisecond)
	}
	if calls != 1 {
		t.Fatalf("OnReadIdle ran %d times; want once: its f paused the conn", calls)
	}
	wantNoTimers(t, h, "h.Len() = %d with the conn paused, want 0")
}

func TestIdle_SetIdleMakesDTheIdleFromNow(t *testing.T) {
	const idle = 100 * time.Millisecond
	for _, d := range []time.Duration{20 * time.Millisecond, 300 * time.Millisecond} {
		for _, traffic := range []bool{false, true} {
			mock, h, idler, loop := mockLoop(t, idle)
			c := loop.conn(idler)
			step(mock, h, loop, 40*time.Millisecond)
			from := mock.Now()
			c.idle.SetIdle(d)
			if got := c.idle.Deadline(); !got.Equal(from.Add(d)) {
				t.Errorf("SetIdle(%v): Deadline() = SetIdle%+v, want SetIdle+%v", d, got.Sub(from), d)
			}
			if traffic { // from then on, traffic counts d too
				step(mock, h, loop, d/2)
				c.idle.Traffic()
				from = mock.Now()
			}
			step(mock, h, loop, d-time.Millisecond)
			if len(loop.closed) != 0 {
				t.Fatalf("SetIdle(%v), traffic %v: closed before %v had passed", d, traffic, d)
			}
			step(mock, h, loop, time.Millisecond)
			if len(loop.closed) != 1 || !errors.Is(c.err, ErrIdle) {
				t.Fatalf("SetIdle(%v), traffic %v: %v after, closes = %d, Err = %v; want one idle close, then and not later",
					d, traffic, mock.Now().Sub(from), len(loop.closed), c.err)
			}
		}
	}
}

func TestIdle_SetIdleOnAPausedConnTakesEffectAtResume(t *testing.T) {
	mock, h, idler, loop := mockLoop(t, 100*time.Millisecond)
	c := loop.conn(idler)
	c.idle.Pause()
	c.idle.SetIdle(20 * time.Millisecond)
	step(mock, h, loop, time.Second)
	if len(loop.closed) != 0 || h.Len() != 0 {
		t.Fatalf("SetIdle on a paused conn: closes = %d, h.Len() = %d; want it left paused", len(loop.closed), h.Len())
	}
	c.idle.Resume()
	step(mock, h, loop, 19*time.Millisecond)
	if len(loop.closed) != 0 {
		t.Fatal("closed before the new idle had passed since Resume")
	}
	step(mock, h, loop, time.Millisecond)
	if len(loop.closed) != 1 {
		t.Fatalf("closes = %d the new idle after Resume, want 1", len(loop.closed))
	}
}

func TestIdle_SetIdleOfNonPositivePanics(t *testing.T) {
	_, _, idler, loop := mockLoop(t, time.Second)
	c := loop.conn(idler)
	for _, d := range []time.Duration{0, -time.Second} {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, "SetIdle") || !strings.Contains(msg, d.String()) {
					t.Errorf("SetIdle(%v) panicked with %q; want a message naming SetIdle and %v", d, msg, d)
				}
			}()
			c.idle.SetIdle(d)
		}()
	}
}

func TestIdle_PauseResumeAndSetIdleAllocateNothing(t *testing.T) {
	for _, opts := range [][]IdleOption{nil, {OnWriteIdle(time.Second, func(gnet.Conn) {}), MaxLifetime(time.Hour)}} {
		mock, h, idler, loop := mockLoop(t, time.Minute, opts...)
		c := loop.conn(idler)
		other := loop.conn(idler) // c's bucket stays in use
		if a := testing.AllocsPerRun(1000, func() { c.idle.Pause(); c.idle.Resume() }); a != 0 {
			t.Errorf("%d options: Pause+Resume allocate %v times, want 0", len(opts), a)
		}
		if a := testing.AllocsPerRun(1000, func() { c.idle.SetIdle(time.Hour); c.idle.SetIdle(time.Minute) }); a != 0 {
			t.Errorf("%d options: SetIdle allocates %v times, want 0", len(opts), a)
		}
		// With time passing: each Resume and SetIdle files the conn in a
		// bucket of its own, which the one it leaves frees.
		other.idle.Close()
		if a := testing.AllocsPerRun(50, func() {
			mock.Add(time.Millisecond) // a Mock's Add sleeps a millisecond
			c.idle.Pause()
			c.idle.Resume()
			c.idle.SetIdle(time.Minute)
		}); a != 0 {
			t.Errorf("%d options: Pause, Resume, SetIdle with the clock moving allocate %v times, want 0", len(opts), a)
		}
		_ = h
	}
}

// controlServer is the test server whose conns start paused, as a conn
// serving a request, and obey one-byte commands: 'r' resumes the conn,
// 'p' pauses it, 'i' sets its idle to longIdle (each on the loop, in
// OnTraffic). Each command is an event stamped with the clock read before
// the call.
type controlServer struct{ *testServer }

const longIdle = 300 * time.Millisecond

func (s controlServer) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	out, act := s.testServer.OnOpen(c)
	c.Context().(*session).idle.Pause()
	return out, act
}

func (s controlServer) OnTraffic(c gnet.Conn) gnet.Action {
	ss := c.Context().(*session)
	buf, _ := c.Next(-1)
	for _, b := range buf {
		at := s.w.h.Now()
		switch b {
		case 'r':
			ss.idle.Resume()
		case 'p':
			ss.idle.Pause()
		case 'i':
			ss.idle.SetIdle(longIdle)
		default:
			continue
		}
		ss.lastRead = at
		s.emit(event{kind: string(b), conn: ss.n, at: at})
	}
	return gnet.None
}

// TestIdle_PauseResumeAndSetIdleOnARealServer runs them on a gnet server
// on 127.0.0.1, as a server would around a request. Each assertion holds
// whatever the load: a paused conn is never closed for idleness, however
// long it is silent, and a resumed one only once its idle (the Idler's, or
// the one SetIdle gave it) has passed since the Resume, on the server's
// clock.
func TestIdle_PauseResumeAndSetIdleOnARealServer(t *testing.T) {
	const idle = 50 * time.Millisecond
	s := newIdleServer(t, idle)
	srv := runServer(t, controlServer{s}, s)
	conns := openConns(t, s, srv.addr, 3)
	paused, quick, long := conns[0], conns[1], conns[2]
	send := func(c net.Conn, cmd byte) {
		t.Helper()
		if _, err := c.Write([]byte{cmd}); err != nil {
			t.Fatal(err)
		}
	}
	send(quick, 'r')
	send(long, 'i') // paused: takes effect at Resume
	s.waitFor(t, "i", 2, 5*time.Second)
	send(long, 'r')
	// The quick conn is closed an idle after its Resume, while the paused
	// one, silent for much longer, stays open.
	r := s.waitFor(t, "r", 1, 5*time.Second)
	e := s.waitFor(t, "close", 1, 5*time.Second)
	if got := e.at.Sub(r.at); got < idle {
		t.Errorf("the resumed conn closed %v after Resume, before its idle %v", got, idle)
	}
	checkTimeoutErr(t, e.err, netidle.ErrIdle, "an idle close")
	time.Sleep(4 * idle)
	rl := s.waitFor(t, "r", 2, 5*time.Second)
	e = s.waitFor(t, "close", 2, 5*time.Second)
	if got := e.at.Sub(rl.at); got < longIdle {
		t.Errorf("the conn given SetIdle(%v) closed %v after Resume, before that idle", longIdle, got)
	}
	for ev, ok := s.poll(); ok; ev, ok = s.poll() {
		if ev.kind == "close" {
			t.Fatalf("conn %d, paused since it opened, was closed (Err %v)", ev.conn, ev.err)
		}
	}
	// Resumed and paused again in one OnTraffic (one write of two bytes
	// is read at once): never closed while silent, then closed an idle
	// after the next Resume.
	if _, err := paused.Write([]byte("rp")); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "p", 0, 5*time.Second)
	time.Sleep(4 * idle)
	send(paused, 'r')
	r = s.waitFor(t, "r", 0, 5*time.Second)
	for ev, ok := s.poll(); ok; ev, ok = s.poll() {
		if ev.kind == "close" {
			t.Fatalf("conn %d, paused again, was closed (Err %v)", ev.conn, ev.err)
		}
	}
	e = s.waitFor(t, "close", 0, 5*time.Second)
	if got := e.at.Sub(r.at); got < idle {
		t.Errorf("conn 0 closed %v after its last Resume, before its idle %v", got, idle)
	}
}
