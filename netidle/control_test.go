package netidle_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel/netidle"
)

// Tests of IdleControl (Pause, Resume, SetIdle), of the sentinels ErrIdle
// and ErrLifetime, and of IdlePolicy, on real TCP conns with a Mock, for
// both kinds of conn: without options (a timer each) and with (buckets).

// idleKinds are policies of each kind of conn, closing on idle.
var idleKinds = []struct {
	name string
	opts []netidle.Option
}{
	{"plain", nil},
	{"events", []netidle.Option{netidle.OnWriteIdle(24*time.Hour, func(net.Conn) {})}},
	{"allidle", []netidle.Option{netidle.AllIdle()}},
}

// ControlOf finds a conn's Control on it, or under the conns above it
// that have NetConn (a *tls.Conn), and reports false for a conn this
// package did not wrap, a NetConn that returns nil, or a chain of NetConn
// that never ends.
func TestIdleControl_ControlOfFindsItUnderATLSConn(t *testing.T) {
	h, _ := newMock(t)
	server, client := tcpPair(t)
	c := netidle.Conn(h, server, time.Minute)
	got, ok := netidle.ControlOf(c)
	assert.True(t, ok && got == c.(netidle.Control), "ControlOf of a netidle conn is not the conn itself")
	tc := tls.Server(c, &tls.Config{})
	got, ok = netidle.ControlOf(tc)
	assert.True(t, ok && got == c.(netidle.Control), "ControlOf of a *tls.Conn over a netidle conn is not that conn")
	twice := netidle.Conn(h, c, time.Minute) // the outer one comes first
	got, ok = netidle.ControlOf(tls.Server(twice, &tls.Config{}))
	assert.True(t, ok && got == twice.(netidle.Control), "ControlOf found the inner of two netidle conns")
	for name, nc := range map[string]net.Conn{
		"a bare conn":           client,
		"a *tls.Conn over one":  tls.Client(client, &tls.Config{}),
		"a nil NetConn":         nilNetConn{client},
		"an endless NetConn":    &loopNetConn{Conn: client},
		"a nil net.Conn itself": nil,
	} {
		_, ok := netidle.ControlOf(nc)
		assert.False(t, ok, "ControlOf of %s", name)
	}
}

type nilNetConn struct{ net.Conn }

func (nilNetConn) NetConn() net.Conn { return nil }

type loopNetConn struct{ net.Conn }

func (c *loopNetConn) NetConn() net.Conn { return c }

func TestIdleControl_EveryConnImplementsIt(t *testing.T) {
	h, _ := newMock(t)
	for _, k := range append(idleKinds, struct {
		name string
		opts []netidle.Option
	}{"lifetime", []netidle.Option{netidle.MaxLifetime(time.Hour)}}) {
		server, _ := tcpPair(t)
		c := netidle.Conn(h, server, time.Minute, k.opts...)
		ic, ok := c.(netidle.Control)
		require.True(t, ok, "%s: %T is no IdleControl", k.name, c)
		assert.Same(t, server, ic.NetConn(), k.name)
		for _, iface := range []any{(*io.ReaderFrom)(nil), (*io.WriterTo)(nil)} {
			_ = iface
		}
		_, rf := c.(io.ReaderFrom)
		_, wt := c.(io.WriterTo)
		_, cw := c.(interface{ CloseWrite() error })
		_, cr := c.(interface{ CloseRead() error })
		assert.True(t, rf && wt && cw && cr, "%s: ReaderFrom %v, WriterTo %v, CloseWrite %v, CloseRead %v", k.name, rf, wt, cw, cr)
		require.NoError(t, c.Close())
	}
	assert.Zero(t, h.Len())
}

// assertOpen checks that c, silent, is open: a Read with a short deadline
// of its own times out for that deadline, not for an idle close.
func assertOpen(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Millisecond)))
	_, err := c.Read(make([]byte, 1))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NotErrorIs(t, err, netidle.ErrIdle, "closed for idleness too early")
	require.NoError(t, c.SetReadDeadline(time.Time{}))
}

// A paused conn is not closed however long it is silent; Resume counts
// idle afresh from its clock reading; never before.
func TestIdleControl_PauseHoldsResumeCountsAfresh(t *testing.T) {
	for _, k := range idleKinds {
		t.Run(k.name, func(t *testing.T) {
			h, mock := newMock(t)
			server, client := watchedPair(t, 20*time.Second, "a Read or a close")
			const idle = time.Second
			c := netidle.Conn(h, server, idle, k.opts...).(netidle.Control)
			defer c.Close()
			c.Pause()
			assert.True(t, c.IdleDeadline().IsZero(), "IdleDeadline of a paused conn: %v", c.IdleDeadline())
			for range 5 {
				advanceBy(t, h, mock, idle, "paused")
			}
			send(t, client, "x") // the conn is open: the peer's data waits for it
			receive(t, c, "x")
			c.Pause() // a second Pause changes nothing
			advanceBy(t, h, mock, 10*time.Hour, "paused 10h")
			c.Resume()
			assert.Equal(t, h.Now().Add(idle), c.IdleDeadline(), "Resume counts idle from now")
			advanceBy(t, h, mock, idle-time.Millisecond, "a tick before idle after Resume")
			send(t, client, "y")
			receive(t, c, "y") // open; and the Read counts from now
			advanceBy(t, h, mock, idle-time.Millisecond, "a tick before idle after the Read")
			assertOpen(t, c)
			advanceBy(t, h, mock, time.Millisecond, "idle after the Read")
			assertPeerSeesClose(t, client)
			_, err := c.Read(make([]byte, 1))
			assertIdleErr(t, err, netidle.ErrIdle, "read")
			c.Resume() // after the close: nothing
			c.Pause()
			assert.Zero(t, h.Len())
		})
	}
}

// SetIdle lengthens and shortens the idle from now on, for one conn only.
func TestIdleControl_SetIdle(t *testing.T) {
	for _, k := range idleKinds {
		t.Run(k.name, func(t *testing.T) {
			h, mock := newMock(t)
			p := netidle.NewPolicy(h, time.Second, k.opts...)
			s1, c1 := tcpPair(t)
			s2, c2 := tcpPair(t)
			watchdog(t, 20*time.Second, "a Read or a close", s1, c1, s2, c2)
			a := p.Conn(s1).(netidle.Control)
			b := p.Conn(s2).(netidle.Control)
			defer a.Close()
			defer b.Close()
			a.SetIdle(time.Hour) // after authentication, say
			assert.Equal(t, h.Now().Add(time.Hour), a.IdleDeadline())
			advanceBy(t, h, mock, time.Second, "1s")
			assertPeerSeesClose(t, c2)
			advanceBy(t, h, mock, 30*time.Minute, "30m")
			a.SetIdle(time.Minute) // shorter: from now
			advanceBy(t, h, mock, time.Minute-time.Millisecond, "a tick before the new idle")
			send(t, c1, "x")
			receive(t, a, "x")
			advanceBy(t, h, mock, time.Minute, "the new idle after the Read")
			assertPeerSeesClose(t, c1)
			assert.Panics(t, func() { a.SetIdle(0) })
		})
	}
}

// ErrIdle and ErrLifetime: one sentinel per reason, each also
// os.ErrDeadlineExceeded and a Timeout; OnReadIdle's f closing the conn is
// an idle close.
func TestIdleControl_Sentinels(t *testing.T) {
	h, mock := newMock(t)
	assert.False(t, errors.Is(netidle.ErrIdle, netidle.ErrLifetime))
	s1, c1 := tcpPair(t)
	life := netidle.Conn(h, s1, time.Hour, netidle.MaxLifetime(time.Second))
	s2, c2 := tcpPair(t)
	byF := netidle.Conn(h, s2, time.Second, netidle.OnReadIdle(func(c net.Conn) { c.Close() }))
	s3, c3 := tcpPair(t)
	watchdog(t, 20*time.Second, "a Read or a close", s1, c1, s2, c2, s3, c3)
	plain := netidle.Conn(h, s3, time.Second)
	blocked := make(chan error, 1)
	go func() { _, err := byF.Read(make([]byte, 1)); blocked <- err }()
	advanceBy(t, h, mock, time.Second, "1s")
	assertPeerSeesClose(t, c1)
	assertPeerSeesClose(t, c2)
	_, err := life.Read(make([]byte, 1))
	assertIdleErr(t, err, netidle.ErrLifetime, "read after the lifetime")
	_, err = life.Write([]byte("x"))
	assertIdleErr(t, err, netidle.ErrLifetime, "write after the lifetime")
	assertIdleErr(t, recvWithin(t, 10*time.Second, blocked, "the Read blocked when f closed the conn"), netidle.ErrIdle, "a Read blocked when OnReadIdle's f closed the conn")
	_, err = byF.Write([]byte("x"))
	assertIdleErr(t, err, netidle.ErrIdle, "write after f closed the conn")
	_, err = plain.Read(make([]byte, 1))
	assertIdleErr(t, err, netidle.ErrIdle, "read after the idle close")
	assert.NoError(t, life.Close(), "the first Close after the hierarchy's")
	assert.Zero(t, h.Len())
}

// Read and Write with data, Pause, Resume and SetIdle allocate nothing.
func TestIdleControl_Allocs(t *testing.T) {
	for _, k := range append(idleKinds, struct {
		name string
		opts []netidle.Option
	}{"all", []netidle.Option{netidle.AllIdle(), netidle.OnReadIdle(func(net.Conn) {}),
		netidle.OnWriteIdle(time.Hour, func(net.Conn) {}), netidle.MaxLifetime(time.Hour)}}) {
		t.Run(k.name, func(t *testing.T) {
			h, _ := newMock(t)
			server, client := watchedPair(t, 20*time.Second, "Reads of data already sent")
			c := netidle.Conn(h, server, time.Minute, k.opts...).(netidle.Control)
			defer c.Close()
			const runs = 200
			go io.Copy(io.Discard, client)
			send(t, client, string(make([]byte, 8*(runs+1))))
			buf := make([]byte, 8)
			ops := map[string]func(){
				"Read":    func() { c.Read(buf) },
				"Write":   func() { c.Write(buf) },
				"Pause":   c.Pause,
				"Resume":  c.Resume,
				"SetIdle": func() { c.SetIdle(time.Hour) },
				"PauseResume": func() {
					c.Pause()
					c.Resume()
				},
			}
			for name, op := range ops {
				assert.Zero(t, testing.AllocsPerRun(runs/len(ops), op), "%s: allocations per %s", k.name, name)
			}
		})
	}
}

// IdleConn is IdlePolicy(...).Conn; the panics name the method.
func TestIdlePolicy_BadInput(t *testing.T) {
	h, _ := newMock(t)
	assert.PanicsWithValue(t, "netidle: NewPolicy called with idle 0s; it must be positive", func() { netidle.NewPolicy(h, 0) })
	assert.PanicsWithValue(t, "netidle: NewPolicy called with a nil Option (option 1)", func() {
		netidle.NewPolicy(h, time.Second, netidle.AllIdle(), nil)
	})
	p := netidle.NewPolicy(h, time.Second)
	assert.PanicsWithValue(t, "netidle: Policy.Conn called with a nil net.Conn", func() { p.Conn(nil) })
	assert.PanicsWithValue(t, "netidle: Policy.Listener called with a nil net.Listener", func() { p.Listener(nil) })
}

// raceKinds are the conns the look's races are tried on: without options,
// and with each option that the old bucket mechanism judged without a lock.
var raceKinds = []struct {
	name string
	opts []netidle.Option
}{
	{"plain", nil},
	{"allidle", []netidle.Option{netidle.AllIdle()}},
	{"writeidle", []netidle.Option{netidle.OnWriteIdle(time.Hour, func(net.Conn) {})}},
	{"lifetime", []netidle.Option{netidle.MaxLifetime(time.Hour)}},
}

// lookReadings are the clock readings of an Advance at which the races
// below are tried: the Advance's own, and each the conn's look may take.
const lookReadings = 8

// TestIdleControl_PausedInTheLookIsNotClosed (issue 39, 1): a Pause that
// returns while the Advance that closes the conn for idleness is under way
// (the hook runs it at one of the Advance's clock readings) either comes
// before the look, which then finds the conn paused and leaves it open, or
// waits for the look and finds the conn closed. It never returns with the
// conn paused and open (IdleDeadline zero) to see it closed by that
// Advance.
func TestIdleControl_PausedInTheLookIsNotClosed(t *testing.T) {
	for _, k := range raceKinds {
		for reading := 1; reading <= lookReadings; reading++ {
			t.Run(fmt.Sprintf("%s/reading=%d", k.name, reading), func(t *testing.T) {
				h, clk := newHooked(t)
				server, _ := watchedPair(t, 20*time.Second, "a Read or a close")
				const idle = time.Second
				c := netidle.Conn(h, server, idle, k.opts...).(netidle.Control)
				defer c.Close()
				clk.Add(idle)
				var pausedOpen bool
				var done <-chan struct{}
				clk.arm(reading, func() {
					var dl time.Time
					var returned bool
					returned, done = raced(200*time.Millisecond, func() { c.Pause(); dl = c.IdleDeadline() })
					pausedOpen = returned && dl.IsZero()
				})
				advanceWithin(t, h, "idle passed, a Pause at one of the Advance's readings")
				clk.disarm()
				if done != nil {
					recvWithin(t, 10*time.Second, done, "the Pause to return")
				}
				if pausedOpen {
					assertOpen(t, c) // Pause returned, paused and open: the Advance must not close it
				}
				if c.IdleDeadline().IsZero() {
					assertOpen(t, c)
				}
			})
		}
	}
}

// TestIdleControl_SetIdleInTheLookTakesEffectAtOnce (issue 39, 3): idle 1h
// with a write-idle event every second, so the conn's timer fires every
// second; at 10s, SetIdle(5s) starts at one of the Advance's clock
// readings and is held at its own reading (where it has taken the new idle
// and not yet the new start) while the Advance goes on, up to 200ms. The
// look judges the conn by the old idle from the old start (1h: not due) or
// by the new one from the SetIdle (5s from 10s: not due), never by the new
// idle from the old start: the conn is open at 10s and until 15s, and
// closed at 15s. With OnReadIdle, its f runs at 15s, not at 10s.
func TestIdleControl_SetIdleInTheLookTakesEffectAtOnce(t *testing.T) {
	for _, readIdle := range []bool{false, true} {
		for reading := 1; reading <= lookReadings; reading++ {
			t.Run(fmt.Sprintf("onreadidle=%v/reading=%d", readIdle, reading), func(t *testing.T) {
				h, clk := newHooked(t)
				server, _ := watchedPair(t, 20*time.Second, "a Read or a close")
				var events atomic.Int32
				opts := []netidle.Option{netidle.OnWriteIdle(time.Second, func(net.Conn) {})}
				if readIdle {
					opts = append(opts, netidle.OnReadIdle(func(net.Conn) { events.Add(1) }))
				}
				c := netidle.Conn(h, server, time.Hour, opts...).(netidle.Control)
				defer c.Close()
				for range 9 {
					clk.Add(time.Second)
					advanceWithin(t, h, "a second")
				}
				clk.Add(time.Second)
				release := make(chan struct{})
				var done <-chan struct{}
				clk.arm(reading, func() {
					reached := make(chan struct{})
					clk.arm(1, func() { // SetIdle's reading, or the Advance's next if SetIdle waits for the look
						close(reached)
						select {
						case <-release:
						case <-time.After(200 * time.Millisecond):
						}
					})
					_, done = raced(0, func() { c.SetIdle(5 * time.Second) })
					select {
					case <-reached:
					case <-time.After(200 * time.Millisecond):
					}
				})
				advanceWithin(t, h, "10s, a SetIdle(5s) started at one of the Advance's readings")
				close(release)
				if done != nil {
					recvWithin(t, 10*time.Second, done, "the SetIdle to return")
				} else {
					c.SetIdle(5 * time.Second) // the Advance took fewer readings: right after it
				}
				clk.disarm()
				assert.Equal(t, int32(0), events.Load(), "a read-idle event at 10s: the new idle judged from the old start")
				assertOpen(t, c)
				clk.Add(5*time.Second - time.Millisecond)
				advanceWithin(t, h, "a tick before 15s")
				assert.Equal(t, int32(0), events.Load(), "a read-idle event before 15s")
				assertOpen(t, c)
				clk.Add(time.Millisecond)
				advanceWithin(t, h, "15s")
				if readIdle {
					assert.Equal(t, int32(1), events.Load(), "no read-idle event at 15s")
					return
				}
				_, err := c.Read(make([]byte, 1))
				assertIdleErr(t, err, netidle.ErrIdle, "read")
			})
		}
	}
}

// TestIdleControl_IdleDeadlineStaysAfterTheClose (issue 39, 4): once the
// hierarchy closed a conn for idleness at +10ms, its IdleDeadline stays
// +10ms, whatever SetIdle, Pause and Resume come after.
func TestIdleControl_IdleDeadlineStaysAfterTheClose(t *testing.T) {
	for _, k := range raceKinds {
		t.Run(k.name, func(t *testing.T) {
			h, mock := newMock(t)
			local, _ := pipe(t)
			start := mock.Now()
			c := netidle.Conn(h, local, 10*time.Millisecond, k.opts...).(netidle.Control)
			defer c.Close()
			advanceBy(t, h, mock, 10*time.Millisecond, "idle passed")
			_, err := c.Read(make([]byte, 1))
			assertIdleErr(t, err, netidle.ErrIdle, "read")
			want := start.Add(10 * time.Millisecond)
			require.Equal(t, want, c.IdleDeadline(), "the deadline the conn was closed for")
			mock.Add(time.Millisecond)
			c.SetIdle(3 * time.Millisecond)
			assert.Equal(t, want, c.IdleDeadline(), "IdleDeadline after SetIdle on a closed conn")
			c.Pause()
			c.Resume()
			assert.Equal(t, want, c.IdleDeadline(), "IdleDeadline after Pause and Resume on a closed conn")
		})
	}
}

// SetIdle restarts the idle close's count and leaves the write-idle event
// where it is ("The write-idle event and the lifetime are left as they
// are"), with AllIdle too.
func TestIdleControl_SetIdleLeavesTheWriteIdleEvent(t *testing.T) {
	for _, all := range []bool{false, true} {
		t.Run(fmt.Sprintf("AllIdle %v", all), func(t *testing.T) {
			h, mock := newMock(t)
			e := newEvents(h)
			start := mock.Now()
			opts := []netidle.Option{netidle.OnWriteIdle(3*time.Second, e.f)}
			if all {
				opts = append(opts, netidle.AllIdle())
			}
			c := netidle.Conn(h, &fastConn{}, 10*time.Second, opts...).(netidle.Control)
			defer c.Close()
			advanceBy(t, h, mock, 2*time.Second, "to 2s")
			c.SetIdle(20 * time.Second)
			assert.Equal(t, start.Add(22*time.Second), c.IdleDeadline(), "the idle close counted afresh from SetIdle")
			advanceBy(t, h, mock, time.Second, "to 3s")
			require.Equal(t, 1, e.n(), "the write-idle event due at 3s")
			assert.Equal(t, start.Add(3*time.Second), e.last(), "the write-idle event's instant")
		})
	}
}

// A Close while OnReadIdle's f runs is the idle close, whether f or
// another goroutine calls it: Read and Write report ErrIdle, and
// IdleDeadline is the deadline of the event f ran for, not one counted from
// the event.
func TestIdleControl_CloseWhileOnReadIdleRunsIsTheIdleCloseForItsDeadline(t *testing.T) {
	for _, who := range []string{"f", "another goroutine"} {
		t.Run(who, func(t *testing.T) {
			h, mock := newMock(t)
			start := mock.Now()
			inF, release := make(chan struct{}), make(chan struct{})
			c := netidle.Conn(h, &fastConn{}, 10*time.Second, netidle.OnReadIdle(func(c net.Conn) {
				if who == "f" {
					c.Close()
					return
				}
				close(inF)
				<-release
			})).(netidle.Control)
			mock.Add(10 * time.Second)
			advanced := make(chan int, 1)
			go func() { advanced <- h.Advance() }()
			if who != "f" {
				recvWithin(t, 10*time.Second, inF, "OnReadIdle's f")
				require.NoError(t, c.Close())
				close(release)
			}
			recvWithin(t, 10*time.Second, advanced, "the Advance running the event")
			_, err := c.Read(make([]byte, 1))
			assertIdleErr(t, err, netidle.ErrIdle, "read after the Close")
			assert.Equal(t, start.Add(10*time.Second), c.IdleDeadline(), "the deadline the conn was closed for")
			assert.Equal(t, 0, h.Len(), "timers armed after the Close")
		})
	}
}
