package timingwheel

import (
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// IdleConn returns c wrapped so that the hierarchy closes it once idle has
// passed since it was wrapped or since the last Read that returned data,
// whichever is later. The close comes no sooner than that, and at most a
// tick plus the driver's wake-up after: the hierarchy must be driven, by
// [Hierarchy.Start] or by the caller's own [Hierarchy.Advance] loop.
//
// Only reading re-arms the timeout: a Read that returns data (n > 0) pushes
// the deadline back to idle from then, while a Read that returns no data
// (an error, or an empty buffer) and every Write leave it where it is. So a
// peer that only receives, never sends, is closed as idle. Re-arming
// allocates nothing and takes no lock of the conn's own: it is one
// [Timer.Reset].
//
// Once the hierarchy has closed the conn, its Read and Write return an error
// e with errors.Is(e, os.ErrDeadlineExceeded), and e is a [net.Error] whose
// Timeout() is true: the error a reader already checks for with
// SetReadDeadline. That includes a Read or Write that was blocked when the
// timeout hit. A Read whose data arrived from c just as the timeout hit
// still returns that data, with a nil error; the next Read reports the
// timeout.
//
// Close stops the timer (or, with options, takes the conn out of the
// timer it shares), so the hierarchy keeps no reference to a closed conn,
// and closes c. (A conn dropped without Close is held by the hierarchy
// until it closes it for being idle.) The first Close returns c.Close()'s
// error, or nil if the hierarchy has closed c already; a later Close
// returns what c's second Close does. The conn's other methods, its own deadlines included, are c's.
// The returned conn also has two methods outside net.Conn, reached by a type
// assertion to an interface:
//
//	NetConn() net.Conn       // c itself, as tls.Conn.NetConn; reading from it does not re-arm the timeout
//	IdleDeadline() time.Time // when the conn is (or was) to be closed for being idle, on the hierarchy's clock
//
// (With [OnReadIdle], IdleDeadline is when the next read-idle event is due;
// once the hierarchy has closed the conn, the deadline it closed it for:
// idle after the last Read, or the end of its [MaxLifetime].)
//
// Options add idle events (see [IdleOption]): [OnReadIdle] calls a function
// instead of closing, [OnWriteIdle] calls one when nothing has been written
// for a while (to send a ping), and [MaxLifetime] closes the conn at an age
// whatever its traffic. What is said above holds with options too; an
// OnReadIdle conn is closed for being idle only if f closes it.
//
// Every method is safe for concurrent use, as c's are. IdleConn panics if c
// is nil, idle <= 0, or an option is nil.
func (h *Hierarchy) IdleConn(c net.Conn, idle time.Duration, opts ...IdleOption) net.Conn {
	if h == nil {
		panic("timingwheel: IdleConn called on a nil Hierarchy")
	}
	if c == nil {
		panic("timingwheel: IdleConn called with a nil net.Conn")
	}
	checkIdle("IdleConn", idle)
	cfg := idleOptions("IdleConn", opts)
	return h.wrapIdle(c, idle, &cfg)
}

// wrapIdle wraps c for IdleConn and for IdleListener's Accept.
func (h *Hierarchy) wrapIdle(c net.Conn, idle time.Duration, cfg *idleConfig) net.Conn {
	if cfg.set {
		return h.newEventConn(c, idle, cfg)
	}
	ic := &idleConn{Conn: c, idle: idle}
	ic.t.Init(h, ic.expire) // the one allocation besides ic: the method value
	ic.t.Reset(idle)
	return ic
}

// IdleListener returns l wrapped so that every conn its Accept returns is
// wrapped by [Hierarchy.IdleConn] with idle and opts, its timeout (and the
// options' events and lifetime) counted from the Accept. Its other methods
// are l's. IdleListener panics if l is nil, idle <= 0, or an option is nil.
func (h *Hierarchy) IdleListener(l net.Listener, idle time.Duration, opts ...IdleOption) net.Listener {
	if h == nil {
		panic("timingwheel: IdleListener called on a nil Hierarchy")
	}
	if l == nil {
		panic("timingwheel: IdleListener called with a nil net.Listener")
	}
	checkIdle("IdleListener", idle)
	return &idleListener{Listener: l, h: h, idle: idle, cfg: idleOptions("IdleListener", opts)}
}

func checkIdle(method string, idle time.Duration) {
	if idle <= 0 {
		panic(fmt.Sprintf("timingwheel: %s called with idle %v; it must be positive", method, idle))
	}
}

type idleListener struct {
	net.Listener
	h    *Hierarchy
	idle time.Duration
	cfg  idleConfig
}

// Accept waits for the next connection and returns it wrapped by IdleConn.
func (l *idleListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	return l.h.wrapIdle(c, l.idle, &l.cfg), nil
}

// Bits of idleConn.state.
const (
	idleTimedOut = 1 << iota // the hierarchy closed the conn for being idle
	idleClosed               // Close was called
)

// idleConn is the conn returned by Hierarchy.IdleConn. It must not be
// copied: the hierarchy links its timer in place.
type idleConn struct {
	net.Conn
	idle  time.Duration
	state atomic.Uint32 // idleTimedOut | idleClosed
	t     Timer
}

// Read reads from c and, if that returned data, re-arms the idle timeout.
func (c *idleConn) Read(p []byte) (int, error) {
	if c.state.Load()&idleTimedOut != 0 {
		return 0, c.timeoutError("read")
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		// Only an armed timer is re-armed: once it has fired (the conn is
		// being closed) or Close stopped it, the conn is done, and its
		// deadline stays the one it was closed at.
		c.t.touch(c.idle)
	}
	if err != nil && c.state.Load()&idleTimedOut != 0 {
		err = c.timeoutError("read") // c failed because the hierarchy closed it
	}
	return n, err
}

// Write writes to c. It does not re-arm the idle timeout.
func (c *idleConn) Write(p []byte) (int, error) {
	if c.state.Load()&idleTimedOut != 0 {
		return 0, c.timeoutError("write")
	}
	n, err := c.Conn.Write(p)
	if err != nil && c.state.Load()&idleTimedOut != 0 {
		err = c.timeoutError("write")
	}
	return n, err
}

// Close stops the idle timeout and closes c.
func (c *idleConn) Close() error {
	old := c.state.Or(idleClosed)
	if old&idleClosed != 0 {
		return c.Conn.Close() // a second Close: c's answer, typically net.ErrClosed
	}
	c.t.Stop()
	if old&idleTimedOut != 0 {
		return nil // the hierarchy has closed c (or is closing it) already
	}
	return c.Conn.Close()
}

// expire is the timer's callback. The flag goes up before c is closed, so
// a Read or Write that fails because of the close reports the timeout.
func (c *idleConn) expire() {
	if c.state.CompareAndSwap(0, idleTimedOut) {
		c.Conn.Close()
	}
}

// NetConn returns the conn that was wrapped.
func (c *idleConn) NetConn() net.Conn { return c.Conn }

// IdleDeadline returns when the conn is to be closed for being idle, or was.
func (c *idleConn) IdleDeadline() time.Time { return c.t.Deadline() }

// timeoutError is the error of a Read or Write after the idle timeout: the
// one package net returns when a deadline set by SetDeadline has passed.
func (c *idleConn) timeoutError(op string) error { return timeoutError(c.Conn, op) }

// timeoutError is the error of op on c after the hierarchy closed it.
func timeoutError(c net.Conn, op string) error {
	e := &net.OpError{Op: op, Err: os.ErrDeadlineExceeded}
	if a := c.LocalAddr(); a != nil {
		e.Net, e.Source = a.Network(), a
	}
	if a := c.RemoteAddr(); a != nil {
		e.Addr = a
	}
	return e
}
