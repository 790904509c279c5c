package conformance

import (
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel/internal/demotest"
	"github.com/timingwheel/timingwheel/netidle"
	"golang.org/x/net/nettest"
)

// TestIdleConn runs nettest.TestConn, the standard conformance suite for
// net.Conn implementations, on both ends of a loopback TCP connection and of
// a net.Pipe, each wrapped by a netidle.Policy: without options, with each
// option alone and with all of them, and paused (with an idle of a tick:
// a paused conn must not be closed, and Read and Write behave as c's).
// The driver runs on the real clock. The events fire while the suite runs (a millisecond apart) but do nothing, so they
// must not disturb the conn; the idle close and the lifetime are far off,
// as the suite needs its conns open.
func TestIdleConn(t *testing.T) {
	h := demotest.StartHierarchy(t)
	var events atomic.Int64
	nop := func(net.Conn) { events.Add(1) }
	options := []struct {
		name string
		opts []netidle.Option
	}{
		{"none", nil},
		{"OnReadIdle", []netidle.Option{netidle.OnReadIdle(nop)}},
		{"OnWriteIdle", []netidle.Option{netidle.OnWriteIdle(time.Millisecond, nop)}},
		{"MaxLifetime", []netidle.Option{netidle.MaxLifetime(time.Hour)}},
		{"AllIdle", []netidle.Option{netidle.AllIdle()}},
		{"all", []netidle.Option{netidle.OnReadIdle(nop), netidle.OnWriteIdle(time.Millisecond, nop),
			netidle.MaxLifetime(time.Hour), netidle.AllIdle()}},
		{"paused", nil},
		{"paused-all", []netidle.Option{netidle.OnReadIdle(nop), netidle.OnWriteIdle(time.Millisecond, nop),
			netidle.MaxLifetime(time.Hour), netidle.AllIdle()}},
	}
	for _, o := range options {
		idle := time.Hour
		switch o.name {
		case "OnReadIdle", "all", "paused-all":
			idle = time.Millisecond // events, not a close
		}
		pause := strings.HasPrefix(o.name, "paused")
		wrap := func(c1, c2 net.Conn) (net.Conn, net.Conn) {
			p := netidle.NewPolicy(h, idle, o.opts...) // one policy, two conns
			w1, w2 := p.Conn(c1), p.Conn(c2)
			if pause {
				// Paused, then an idle of a millisecond (a close, but the
				// conns are paused): set after the Pause, so that a
				// machine that stalls between the wrap and the Pause does
				// not close them first.
				for _, w := range []net.Conn{w1, w2} {
					w.(netidle.Control).Pause()
					w.(netidle.Control).SetIdle(time.Millisecond)
				}
			}
			return w1, w2
		}
		t.Run("options="+o.name+"/transport=tcp", func(t *testing.T) {
			nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
				ln, err := nettest.NewLocalListener("tcp4")
				if err != nil {
					return nil, nil, nil, err
				}
				defer ln.Close()
				accepted := make(chan net.Conn, 1)
				errc := make(chan error, 1)
				go func() {
					c, err := ln.Accept()
					if err != nil {
						errc <- err
						return
					}
					accepted <- c
				}()
				d, err := net.DialTimeout("tcp4", ln.Addr().String(), 10*time.Second)
				if err != nil {
					return nil, nil, nil, err
				}
				var a net.Conn
				select {
				case a = <-accepted:
				case err := <-errc:
					d.Close()
					return nil, nil, nil, err
				case <-time.After(10 * time.Second):
					d.Close()
					t.Fatal("hung: Accept of a dialled connection did not return within 10s")
				}
				c1, c2 = wrap(a, d)
				return c1, c2, func() { c1.Close(); c2.Close() }, nil
			})
		})
		t.Run("options="+o.name+"/transport=pipe", func(t *testing.T) {
			nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
				p1, p2 := net.Pipe()
				c1, c2 = wrap(p1, p2)
				return c1, c2, func() { c1.Close(); c2.Close() }, nil
			})
		})
	}
	t.Logf("idle events that ran during the suite: %d", events.Load())
	if events.Load() == 0 {
		t.Error("no idle event ran: the suite did not test conns with events firing")
	}
	if n := h.Len(); n != 0 {
		t.Errorf("%d timers armed after every conn was closed", n)
	}
}
