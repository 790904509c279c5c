package timingwheel_test

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel"
)

// Tests of IdleControl (Pause, Resume, SetIdle), of the sentinels ErrIdle
// and ErrLifetime, and of IdlePolicy, on real TCP conns with a Mock, for
// both kinds of conn: without options (a timer each) and with (buckets).

// idleKinds are policies of each kind of conn, closing on idle.
var idleKinds = []struct {
	name string
	opts []timingwheel.IdleOption
}{
	{"plain", nil},
	{"events", []timingwheel.IdleOption{timingwheel.OnWriteIdle(24*time.Hour, func(net.Conn) {})}},
	{"allidle", []timingwheel.IdleOption{timingwheel.AllIdle()}},
}

func TestIdleControl_EveryConnImplementsIt(t *testing.T) {
	h, _ := timingwheel.NewMock(t)
	for _, k := range append(idleKinds, struct {
		name string
		opts []timingwheel.IdleOption
	}{"lifetime", []timingwheel.IdleOption{timingwheel.MaxLifetime(time.Hour)}}) {
		server, _ := timingwheel.TCPPair(t)
		c := h.IdleConn(server, time.Minute, k.opts...)
		ic, ok := c.(timingwheel.IdleControl)
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
	require.NotErrorIs(t, err, timingwheel.ErrIdle, "closed for idleness too early")
	require.NoError(t, c.SetReadDeadline(time.Time{}))
}

// A paused conn is not closed however long it is silent; Resume counts
// idle afresh from its clock reading; never before.
func TestIdleControl_PauseHoldsResumeCountsAfresh(t *testing.T) {
	for _, k := range idleKinds {
		t.Run(k.name, func(t *testing.T) {
			h, mock := timingwheel.NewMock(t)
			server, client := timingwheel.TCPPair(t)
			timingwheel.Watchdog(t, 20*time.Second, "a Read or a close", server, client)
			const idle = time.Second
			c := h.IdleConn(server, idle, k.opts...).(timingwheel.IdleControl)
			defer c.Close()
			c.Pause()
			assert.True(t, c.IdleDeadline().IsZero(), "IdleDeadline of a paused conn: %v", c.IdleDeadline())
			for range 5 {
				mock.Add(idle)
				timingwheel.AdvanceWithin(t, h, "paused")
			}
			timingwheel.Send(t, client, "x") // the conn is open: the peer's data waits for it
			timingwheel.Receive(t, c, "x")
			c.Pause() // a second Pause changes nothing
			mock.Add(10 * time.Hour)
			timingwheel.AdvanceWithin(t, h, "paused 10h")
			c.Resume()
			assert.Equal(t, h.Now().Add(idle), c.IdleDeadline(), "Resume counts idle from now")
			mock.Add(idle - time.Millisecond)
			timingwheel.AdvanceWithin(t, h, "a tick before idle after Resume")
			timingwheel.Send(t, client, "y")
			timingwheel.Receive(t, c, "y") // open; and the Read counts from now
			mock.Add(idle - time.Millisecond)
			timingwheel.AdvanceWithin(t, h, "a tick before idle after the Read")
			assertOpen(t, c)
			mock.Add(time.Millisecond)
			timingwheel.AdvanceWithin(t, h, "idle after the Read")
			timingwheel.AssertPeerSeesClose(t, client)
			_, err := c.Read(make([]byte, 1))
			timingwheel.AssertIdleErr(t, err, timingwheel.ErrIdle, "read")
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
			h, mock := timingwheel.NewMock(t)
			p := h.IdlePolicy(time.Second, k.opts...)
			s1, c1 := timingwheel.TCPPair(t)
			s2, c2 := timingwheel.TCPPair(t)
			timingwheel.Watchdog(t, 20*time.Second, "a Read or a close", s1, c1, s2, c2)
			a := p.Conn(s1).(timingwheel.IdleControl)
			b := p.Conn(s2).(timingwheel.IdleControl)
			defer a.Close()
			defer b.Close()
			a.SetIdle(time.Hour) // after authentication, say
			assert.Equal(t, h.Now().Add(time.Hour), a.IdleDeadline())
			mock.Add(time.Second)
			timingwheel.AdvanceWithin(t, h, "1s")
			timingwheel.AssertPeerSeesClose(t, c2)
			mock.Add(30 * time.Minute)
			timingwheel.AdvanceWithin(t, h, "30m")
			a.SetIdle(time.Minute) // shorter: from now
			mock.Add(time.Minute - time.Millisecond)
			timingwheel.AdvanceWithin(t, h, "a tick before the new idle")
			timingwheel.Send(t, c1, "x")
			timingwheel.Receive(t, a, "x")
			mock.Add(time.Minute)
			timingwheel.AdvanceWithin(t, h, "the new idle after the Read")
			timingwheel.AssertPeerSeesClose(t, c1)
			assert.Panics(t, func() { a.SetIdle(0) })
		})
	}
}

// ErrIdle and ErrLifetime: one sentinel per reason, each also
// os.ErrDeadlineExceeded and a Timeout; OnReadIdle's f closing the conn is
// an idle close.
func TestIdleControl_Sentinels(t *testing.T) {
	h, mock := timingwheel.NewMock(t)
	assert.False(t, errors.Is(timingwheel.ErrIdle, timingwheel.ErrLifetime))
	s1, c1 := timingwheel.TCPPair(t)
	life := h.IdleConn(s1, time.Hour, timingwheel.MaxLifetime(time.Second))
	s2, c2 := timingwheel.TCPPair(t)
	byF := h.IdleConn(s2, time.Second, timingwheel.OnReadIdle(func(c net.Conn) { c.Close() }))
	s3, c3 := timingwheel.TCPPair(t)
	timingwheel.Watchdog(t, 20*time.Second, "a Read or a close", s1, c1, s2, c2, s3, c3)
	plain := h.IdleConn(s3, time.Second)
	blocked := make(chan error, 1)
	go func() { _, err := byF.Read(make([]byte, 1)); blocked <- err }()
	mock.Add(time.Second)
	timingwheel.AdvanceWithin(t, h, "1s")
	timingwheel.AssertPeerSeesClose(t, c1)
	timingwheel.AssertPeerSeesClose(t, c2)
	_, err := life.Read(make([]byte, 1))
	timingwheel.AssertIdleErr(t, err, timingwheel.ErrLifetime, "read after the lifetime")
	_, err = life.Write([]byte("x"))
	timingwheel.AssertIdleErr(t, err, timingwheel.ErrLifetime, "write after the lifetime")
	timingwheel.AssertIdleErr(t, timingwheel.RecvWithin(t, 10*time.Second, blocked, "the Read blocked when f closed the conn"), timingwheel.ErrIdle, "a Read blocked when OnReadIdle's f closed the conn")
	_, err = byF.Write([]byte("x"))
	timingwheel.AssertIdleErr(t, err, timingwheel.ErrIdle, "write after f closed the conn")
	_, err = plain.Read(make([]byte, 1))
	timingwheel.AssertIdleErr(t, err, timingwheel.ErrIdle, "read after the idle close")
	assert.NoError(t, life.Close(), "the first Close after the hierarchy's")
	assert.Zero(t, h.Len())
}

// Read and Write with data, Pause, Resume and SetIdle allocate nothing.
func TestIdleControl_Allocs(t *testing.T) {
	for _, k := range append(idleKinds, struct {
		name string
		opts []timingwheel.IdleOption
	}{"all", []timingwheel.IdleOption{timingwheel.AllIdle(), timingwheel.OnReadIdle(func(net.Conn) {}),
		timingwheel.OnWriteIdle(time.Hour, func(net.Conn) {}), timingwheel.MaxLifetime(time.Hour)}}) {
		t.Run(k.name, func(t *testing.T) {
			h, _ := timingwheel.NewMock(t)
			server, client := timingwheel.TCPPair(t)
			timingwheel.Watchdog(t, 20*time.Second, "Reads of data already sent", server, client)
			c := h.IdleConn(server, time.Minute, k.opts...).(timingwheel.IdleControl)
			defer c.Close()
			const runs = 200
			go io.Copy(io.Discard, client)
			timingwheel.Send(t, client, string(make([]byte, 8*(runs+1))))
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
	h, _ := timingwheel.NewMock(t)
	assert.PanicsWithValue(t, "timingwheel: IdlePolicy called with idle 0s; it must be positive", func() { h.IdlePolicy(0) })
	assert.PanicsWithValue(t, "timingwheel: IdlePolicy called with a nil IdleOption (option 1)", func() {
		h.IdlePolicy(time.Second, timingwheel.AllIdle(), nil)
	})
	p := h.IdlePolicy(time.Second)
	assert.PanicsWithValue(t, "timingwheel: IdlePolicy.Conn called with a nil net.Conn", func() { p.Conn(nil) })
	assert.PanicsWithValue(t, "timingwheel: IdlePolicy.Listener called with a nil net.Listener", func() { p.Listener(nil) })
}
