package netidle_test

import (
	"errors"
	"io"
	"net"
	"os"
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
			server, client := tcpPair(t)
			watchdog(t, 20*time.Second, "a Read or a close", server, client)
			const idle = time.Second
			c := netidle.Conn(h, server, idle, k.opts...).(netidle.Control)
			defer c.Close()
			c.Pause()
			assert.True(t, c.IdleDeadline().IsZero(), "IdleDeadline of a paused conn: %v", c.IdleDeadline())
			for range 5 {
				mock.Add(idle)
				advanceWithin(t, h, "paused")
			}
			send(t, client, "x") // the conn is open: the peer's data waits for it
			receive(t, c, "x")
			c.Pause() // a second Pause changes nothing
			mock.Add(10 * time.Hour)
			advanceWithin(t, h, "paused 10h")
			c.Resume()
			assert.Equal(t, h.Now().Add(idle), c.IdleDeadline(), "Resume counts idle from now")
			mock.Add(idle - time.Millisecond)
			advanceWithin(t, h, "a tick before idle after Resume")
			send(t, client, "y")
			receive(t, c, "y") // open; and the Read counts from now
			mock.Add(idle - time.Millisecond)
			advanceWithin(t, h, "a tick before idle after the Read")
			assertOpen(t, c)
			mock.Add(time.Millisecond)
			advanceWithin(t, h, "idle after the Read")
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
			mock.Add(time.Second)
			advanceWithin(t, h, "1s")
			assertPeerSeesClose(t, c2)
			mock.Add(30 * time.Minute)
			advanceWithin(t, h, "30m")
			a.SetIdle(time.Minute) // shorter: from now
			mock.Add(time.Minute - time.Millisecond)
			advanceWithin(t, h, "a tick before the new idle")
			send(t, c1, "x")
			receive(t, a, "x")
			mock.Add(time.Minute)
			advanceWithin(t, h, "the new idle after the Read")
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
	mock.Add(time.Second)
	advanceWithin(t, h, "1s")
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
			server, client := tcpPair(t)
			watchdog(t, 20*time.Second, "Reads of data already sent", server, client)
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
