package timingwheel

import (
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// IdleConn returns c wrapped so that the hierarchy closes it once idle has
// passed since it was wrapped or since the last Read that returned data,
// whichever is later. The close comes no sooner than that, and at most a
// tick plus the driver's wake-up after: the hierarchy must be driven, by
// [Hierarchy.Start] or by the caller's own [Hierarchy.Advance] loop.
// h.IdleConn(c, idle, opts...) is h.IdlePolicy(idle, opts...).Conn(c): see
// [IdlePolicy] to share one policy among many conns.
//
// Only reading re-arms the timeout: a Read that returns data (n > 0) pushes
// the deadline back to idle from then, while a Read that returns no data
// (an error, or an empty buffer) and every Write leave it where it is. So a
// peer that only receives, never sends, is closed as idle — unless
// [AllIdle] is given, which makes data written count too, or the server
// pauses the conn while it serves a request (see [IdleControl]). Re-arming
// allocates nothing and takes no lock of the conn's own.
//
// Once the hierarchy has closed the conn, its Read and Write return an error
// e with errors.Is(e, [ErrIdle]) (or [ErrLifetime], for [MaxLifetime]) and
// errors.Is(e, os.ErrDeadlineExceeded), and e is a [net.Error] whose
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
// returns what c's second Close does. The conn's other methods, its own
// deadlines included, are c's.
//
// The conn implements [IdleControl] (NetConn, IdleDeadline, SetIdle,
// Pause, Resume). It also hides nothing a server relies on: CloseWrite
// and CloseRead (half-close; an error wrapping errors.ErrUnsupported if c
// has neither), io.ReaderFrom and io.WriterTo, so that io.Copy to or from
// it keeps the sendfile and splice paths c has, and syscall.Conn (an error
// wrapping errors.ErrUnsupported if c is not one). Data moved by ReadFrom
// and WriteTo counts as traffic once per MiB: each 1 MiB piece is
// one call of the kernel's path and is recorded when it returns, so a
// copy that moves less than 1 MiB per idle period (a silent peer under
// a long io.Copy) is closed as idle. A Write of more than 1 MiB counts
// each 1 MiB piece the same way when written data counts. A Read or
// Write of the RawConn that SyscallConn returns counts as data moved.
//
// What this gives over net/http's Server.IdleTimeout: the close is the
// hierarchy's, one timer per tick for all conns instead of one runtime
// timer per conn; it applies to any protocol, not only HTTP; a conn's idle
// can change after it was accepted (SetIdle); and the conn can carry idle
// events and a lifetime. What it does not: net/http knows when a request
// starts and ends, this wrapper only sees bytes, so a server that must not
// close a conn in the middle of a slow request pauses it on
// http.StateActive and resumes it on http.StateIdle (see [IdleControl]);
// and it does not replace ReadHeaderTimeout or WriteTimeout, which bound
// one request, not the silence between them.
//
// Options add idle events (see [IdleOption]): [OnReadIdle] calls a function
// instead of closing, [OnWriteIdle] calls one when nothing has been written
// for a while (to send a ping), [MaxLifetime] closes the conn at an age
// whatever its traffic, and [AllIdle] makes data moved either way count.
// What is said above holds with options too; an OnReadIdle conn is closed
// for being idle only if f closes it.
//
// Every method is safe for concurrent use, as c's are. IdleConn panics if c
// is nil, idle <= 0, or an option is nil.
func (h *Hierarchy) IdleConn(c net.Conn, idle time.Duration, opts ...IdleOption) net.Conn {
	p := h.idlePolicy("IdleConn", idle, opts)
	if c == nil {
		panic("timingwheel: IdleConn called with a nil net.Conn")
	}
	return p.wrap(c)
}

// IdleListener returns l wrapped so that every conn its Accept returns is
// wrapped by [Hierarchy.IdleConn] with idle and opts, its timeout (and the
// options' events and lifetime) counted from the Accept: it is
// h.IdlePolicy(idle, opts...).Listener(l), and its conns share the policy.
// Its other methods are l's. IdleListener panics if l is nil, idle <= 0,
// or an option is nil.
func (h *Hierarchy) IdleListener(l net.Listener, idle time.Duration, opts ...IdleOption) net.Listener {
	p := h.idlePolicy("IdleListener", idle, opts)
	if l == nil {
		panic("timingwheel: IdleListener called with a nil net.Listener")
	}
	return &idleListener{Listener: l, p: p}
}

// Bits of idleConn.state.
const (
	idleTimedOut = 1 << iota // the hierarchy closed the conn for being idle
	idleClosed               // Close was called
	idlePaused               // Pause was called, Resume not yet
)

// idleConn is the conn of a policy without options: it holds a Timer of
// its own, re-armed by each Read with data. It must not be copied: the
// hierarchy links its timer in place.
type idleConn struct {
	net.Conn
	idle  atomic.Int64 // ns; SetIdle changes it
	state atomic.Uint32
	t     Timer
}

func (p *IdlePolicy) newIdleConn(c net.Conn) *idleConn {
	ic := &idleConn{Conn: c}
	ic.idle.Store(p.idle)
	ic.t.Init(p.h, ic.expire) // the one allocation besides ic: the method value
	ic.t.Reset(time.Duration(p.idle))
	return ic
}

// Read reads from c and, if that returned data, re-arms the idle timeout.
func (c *idleConn) Read(p []byte) (int, error) {
	if c.state.Load()&idleTimedOut != 0 {
		return 0, c.closedErr("read")
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.movedIn()
	}
	if err != nil && c.state.Load()&idleTimedOut != 0 {
		err = c.closedErr("read") // c failed because the hierarchy closed it
	}
	return n, err
}

// movedIn re-arms the timer for data read. Only an armed timer is
// re-armed: once it has fired (the conn is being closed) or Close or Pause
// stopped it, the Read leaves it, and its deadline, as they are.
func (c *idleConn) movedIn() { c.t.touch(time.Duration(c.idle.Load())) }

// movedOut does nothing: written data does not count.
func (c *idleConn) movedOut()       {}
func (c *idleConn) countsOut() bool { return false }

func (c *idleConn) wrapped() net.Conn { return c.Conn }

// closedErr returns the error of op once the hierarchy closed the conn.
func (c *idleConn) closedErr(op string) error {
	if c.state.Load()&idleTimedOut == 0 {
		return nil
	}
	return closedError(c.Conn, op, ErrIdle)
}

// Write writes to c. It does not re-arm the idle timeout.
func (c *idleConn) Write(p []byte) (int, error) {
	if c.state.Load()&idleTimedOut != 0 {
		return 0, c.closedErr("write")
	}
	n, err := c.Conn.Write(p)
	if err != nil && c.state.Load()&idleTimedOut != 0 {
		err = c.closedErr("write")
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
// a Read or Write that fails because of the close reports the timeout. A
// paused conn is not closed (a Pause that stopped the timer too late).
func (c *idleConn) expire() {
	if c.state.CompareAndSwap(0, idleTimedOut) {
		c.Conn.Close()
	}
}

// NetConn returns the conn that was wrapped.
func (c *idleConn) NetConn() net.Conn { return c.Conn }

// IdleDeadline returns when the conn is to be closed for being idle, or
// was; the zero Time while it is paused.
func (c *idleConn) IdleDeadline() time.Time {
	if c.state.Load()&(idlePaused|idleTimedOut) == idlePaused {
		return time.Time{}
	}
	return c.t.Deadline()
}

// SetIdle makes d the idle from now on: the timer is re-armed for d after
// now, unless the conn is paused (Resume arms it with d), closed or being
// closed.
func (c *idleConn) SetIdle(d time.Duration) {
	checkSetIdle(d)
	c.idle.Store(int64(d))
	c.t.touch(d)
}

// Pause stops the timer until Resume. Pause, Resume and Close may race:
// each changes the state first, then the timer, then re-reads the state
// and, if a later change disagrees with what it did to the timer, undoes
// it; the timer thus ends as the last change of the state says.
func (c *idleConn) Pause() {
	for {
		s := c.state.Load()
		if s&(idleTimedOut|idleClosed|idlePaused) != 0 {
			return
		}
		if c.state.CompareAndSwap(s, s|idlePaused) {
			break
		}
	}
	c.t.Stop()
	if c.running() { // a Resume came after this Pause's change
		c.t.Reset(time.Duration(c.idle.Load()))
		if !c.running() {
			c.t.Stop()
		}
	}
}

// Resume re-arms the timer for idle from now.
func (c *idleConn) Resume() {
	for {
		s := c.state.Load()
		if s&(idleTimedOut|idleClosed) != 0 {
			return
		}
		if c.state.CompareAndSwap(s, s&^idlePaused) {
			break
		}
	}
	c.t.Reset(time.Duration(c.idle.Load()))
	if !c.running() { // a Pause or Close came after this Resume's change
		c.t.Stop()
	}
}

// running reports whether the conn's timer should be armed: it is neither
// paused nor closed.
func (c *idleConn) running() bool {
	return c.state.Load()&(idleTimedOut|idleClosed|idlePaused) == 0
}

// ReadFrom copies r to c (sendfile, splice), as c's own ReadFrom does.
func (c *idleConn) ReadFrom(r io.Reader) (int64, error) { return readFrom(c, r) }

// WriteTo copies c to w (splice), counting as data read per MiB.
func (c *idleConn) WriteTo(w io.Writer) (int64, error) { return writeTo(c, w) }

// CloseWrite shuts down the writing side of c.
func (c *idleConn) CloseWrite() error { return closeWrite(c) }

// CloseRead shuts down the reading side of c.
func (c *idleConn) CloseRead() error { return closeRead(c) }

// SyscallConn returns c's raw conn, whose Read and Write count as traffic.
func (c *idleConn) SyscallConn() (syscall.RawConn, error) { return syscallConn(c) }

var _ IdleControl = (*idleConn)(nil)

func checkSetIdle(d time.Duration) {
	if d <= 0 {
		panic("timingwheel: IdleControl.SetIdle called with " + d.String() + "; the idle must be positive")
	}
}
