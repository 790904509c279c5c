package netidle

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/internal/idlestate"
)

// Conn returns c wrapped so that the hierarchy closes it once idle has
// passed since it was wrapped or since the last Read that returned data,
// whichever is later. The close comes no sooner than that, and at most a
// tick plus the driver's wake-up after: the hierarchy must be driven, by
// [timingwheel.Hierarchy.Start] or by the caller's own Advance loop.
// Conn(h, c, idle, opts...) is NewPolicy(h, idle, opts...).Conn(c): see
// [Policy] to share one policy among many conns.
//
// Only reading counts: a Read that returns data (n > 0) pushes the close
// back to idle from then, while a Read that returns no data (an error, or
// an empty buffer) and every Write leave it where it is. So a peer that
// only receives, never sends, is closed as idle — unless [AllIdle] is
// given, which makes data written count too, or the server pauses the conn
// while it serves a request (see [Control]). A Read or Write that moves
// data reads the clock and stores it in a word of the conn's own: no lock,
// no timer touched, no allocation. The conn's one timer fires at the
// earliest deadline its marks allowed when it was armed, looks at the
// marks, closes the conn or runs the events that are due, and is armed
// again for what remains; so a busy conn's timer fires about once per idle
// period, and a Read costs the same on any number of cores.
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
// Close stops the conn's timer, so the hierarchy keeps no reference to a
// closed conn, and closes c. (A conn dropped without Close is held by the
// hierarchy as long as one of its timers is armed: until its idle close,
// or for good with OnReadIdle, whose event re-arms, or while it is paused
// with an idle event or a MaxLifetime armed.) The first Close returns
// c.Close()'s error, or nil if the hierarchy has closed c already; a later
// Close returns what c's second Close does. The conn's other methods, its
// own deadlines included, are c's.
//
// The conn implements [Control] (NetConn, IdleDeadline, SetIdle, Pause,
// Resume). It also hides nothing a server relies on: CloseWrite and
// CloseRead (half-close; an error wrapping errors.ErrUnsupported if c has
// neither), io.ReaderFrom and io.WriterTo, so that io.Copy to or from it
// keeps the sendfile and splice paths c has, and syscall.Conn (an error
// wrapping errors.ErrUnsupported if c is not one). Data moved by ReadFrom
// and WriteTo counts as traffic as it moves, as a Read or Write of it
// would: a splice from a socket moves what the socket has received, and
// counts it, before it waits for more; sendfile moves a file in pieces of
// 256 KiB, each counted. That holds for io.Copy(conn, src) from a file or a
// TCP or Unix stream conn, which reaches ReadFrom through src's WriteTo.
// With AllIdle, a Write of more than 256 KiB to a stream socket is written,
// and counted, in pieces of that size. A Read or Write of the RawConn that
// SyscallConn returns counts as data moved.
//
// The idle close closes c on the goroutine that advances the hierarchy, so
// c's Close must not wait on the peer. For a conn with a NetConn method,
// such as a *tls.Conn (whose Close sends a close_notify alert, and waits for
// room to send it), the conn under it is closed first: an idle peer gets
// no close_notify, and the hierarchy's other timers are not held up. An
// http.Server, though, finds TLS only in a *tls.Conn it is given: serve TLS
// over the netidle conns (srv.ServeTLS of a [Listener]), not netidle over
// TLS (see [Control]).
//
// What this gives over net/http's Server.IdleTimeout: the close is the
// hierarchy's, one wheel for all conns instead of one runtime timer per
// conn; it applies to any protocol, not only HTTP; a conn's idle can change
// after it was accepted (SetIdle); and the conn can carry idle events and a
// lifetime. What it does not: net/http knows when a request starts and
// ends, this wrapper only sees bytes, so a server that must not close a
// conn in the middle of a slow request pauses it on http.StateActive and
// resumes it on http.StateIdle and http.StateHijacked (see [Control]); and
// it does not replace ReadTimeout (a paused conn whose request body stalls
// is closed by nothing else), ReadHeaderTimeout or WriteTimeout, which
// bound one request, not the silence between them.
//
// Options add idle events (see [Option]): [OnReadIdle] calls a function
// instead of closing, [OnWriteIdle] calls one when nothing has been written
// for a while (to send a ping), [MaxLifetime] closes the conn at an age
// whatever its traffic, and [AllIdle] makes data moved either way count.
// What is said above holds with options too; an OnReadIdle conn is closed
// for being idle only if f closes it.
//
// Every method is safe for concurrent use, as c's are. Conn panics if h or
// c is nil, idle <= 0, or an option is nil.
func Conn(h *timingwheel.Hierarchy, c net.Conn, idle time.Duration, opts ...Option) net.Conn {
	checkArgs("Conn", h, idle)
	o := noOptions
	if len(opts) > 0 {
		o = new(options)
		o.apply("Conn", opts)
	}
	if c == nil {
		panic("netidle: Conn called with a nil net.Conn")
	}
	return wrap(h, c, int64(idle), o)
}

// fixErr returns the error of op once the hierarchy closed c (the reason
// an operation failed), else err.
func (c *conn) fixErr(op string, err error) error {
	if err != nil {
		if e := c.closedErr(op); e != nil {
			return e
		}
	}
	return err
}

// Listener returns l wrapped so that every conn its Accept returns is
// wrapped by [Conn] with idle and opts, its timeout (and the options'
// events and lifetime) counted from the Accept: it is NewPolicy(h, idle,
// opts...).Listener(l), and its conns share the policy. Its other methods
// are l's. Listener panics if h or l is nil, idle <= 0, or an option is
// nil.
func Listener(h *timingwheel.Hierarchy, l net.Listener, idle time.Duration, opts ...Option) net.Listener {
	p := newPolicy("Listener", h, idle, opts)
	if l == nil {
		panic("netidle: Listener called with a nil net.Listener")
	}
	return &listener{Listener: l, p: p}
}

// Bits of conn.state.
const (
	timedOut  = 1 << iota // the hierarchy closed the conn (or OnReadIdle's f did)
	lifeEnded             // with timedOut: closed at the end of its lifetime
	closed                // Close was called
	paused                // Pause was called, Resume not yet
	inReadEv              // OnReadIdle's f is running: a Close is an idle close
	writer    = 1 << 8    // added for each Write in progress, with a write-idle event
)

// conn is the conn of every policy, with or without options. It must not
// be copied: the hierarchy links its timer in place.
//
// Read and Write store the clock's reading in rd and wr: the marks. The
// timer is armed for the earliest of the deadlines the marks gave when it
// was armed (the idle close or read-idle event, the write-idle event, the
// lifetime's end); as the marks only move forward (but for the clock going
// back, see recordBehind), the timer is never later than the earliest
// deadline due. When it fires, fire judges each deadline by the marks and
// the clock, closes the conn or runs the events due, and arms the timer
// again for the next.
//
// mu orders the timer's look (fire), Pause, Resume, SetIdle and Close: each
// decides under it, so a Pause that returned is seen by the next look, and
// a look that decided to close or to run an event did so before any later
// Pause or Close. Read and Write never take it.
//
// A conn is 128 bytes, a size class of whole cache lines, so it starts on
// a line and has two. The first holds what a Read and Write only read
// (the wrapped conn, h, state, the options; with OnWriteIdle a Write also
// adds itself to state while it runs) and what only the control
// methods and the look write: other cores' Reads keep it in their caches.
// The second holds the marks, which every Read or Write with data writes,
// and the timer, which the look re-arms. o is the options, shared by the
// conns of a policy (noOptions for a Conn without any).
type conn struct {
	net.Conn
	h     *timingwheel.Hierarchy
	state atomic.Uint32 // timedOut | closed | ..., plus writer per Write in progress
	mu    sync.Mutex
	o     *options
	idle  atomic.Int64 // ns; SetIdle changes it under mu
	// end is the end of the lifetime (an Elapsed reading, as the marks;
	// idlestate.Never without MaxLifetime) and, once the hierarchy closed the conn,
	// the deadline it closed it for. Guarded by mu.
	end int64
	rd  atomic.Int64 // h.Elapsed() at the last Read with data, read-idle event, Resume or SetIdle
	wr  atomic.Int64 // the same for Writes with data and write-idle events
	t   timingwheel.Timer
}

// wrap returns c wrapped, idle (ns) and p's options counted from now.
func wrap(h *timingwheel.Hierarchy, c net.Conn, idle int64, o *options) net.Conn {
	ic := &conn{Conn: c, h: h, o: o}
	ic.t.Init(h, ic.fire) // the one allocation besides ic: the method value
	ic.idle.Store(idle)
	now := ic.now()
	ic.rd.Store(now)
	ic.wr.Store(now)
	ic.end = idlestate.End(now, o.drawLifetime())
	ic.mu.Lock()
	ic.armLocked()
	ic.mu.Unlock()
	return ic
}

// Read reads from c and, if that returned data, records it.
func (c *conn) Read(b []byte) (int, error) {
	if c.state.Load()&timedOut != 0 {
		return 0, c.closedErr("read")
	}
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.record(&c.rd)
	}
	return n, c.fixErr("read", err)
}

// Write writes to c and, if that wrote data and written data counts,
// records it. While it runs, the conn is not write idle. With AllIdle, a
// large Write to a stream socket is written in pieces of writePiece bytes,
// each recorded.
func (c *conn) Write(b []byte) (int, error) {
	if c.state.Load()&timedOut != 0 {
		return 0, c.closedErr("write")
	}
	if !c.o.countsOut() {
		n, err := c.Conn.Write(b)
		return n, c.fixErr("write", err)
	}
	w := c.o.writeIdle > 0
	if w {
		c.state.Add(writer)
	}
	var n int
	var err error
	if !c.o.allIdle || len(b) <= writePiece || !isStream(c.Conn) {
		n, err = c.Conn.Write(b)
		if n > 0 {
			c.movedOut() // before the Write stops counting as in progress
		}
	} else {
		for len(b) > 0 && err == nil {
			var k int
			k, err = c.Conn.Write(b[:min(len(b), writePiece)])
			n += k
			b = b[k:]
			if k > 0 {
				c.movedOut()
			}
		}
	}
	if w {
		c.state.Add(^uint32(writer - 1)) // minus writer
	}
	return n, c.fixErr("write", err)
}

// isStream reports whether c is a stream socket, whose Write may be cut in
// pieces: a TCP conn, or a Unix conn of network "unix" (not a datagram
// or seqpacket one, whose Write is one message).
func isStream(c net.Conn) bool {
	switch c := c.(type) {
	case *net.TCPConn:
		return true
	case *net.UnixConn:
		for _, a := range []net.Addr{c.LocalAddr(), c.RemoteAddr()} { // a client's own address may be unnamed
			if a != nil && a.Network() == "unix" {
				return true
			}
		}
	}
	return false
}

// movedIn records data read (not through Read: a copy path).
func (c *conn) movedIn() { c.record(&c.rd) }

// movedOut records data written, if written data counts: in rd with
// AllIdle (data moved either way: the idle close's mark), in wr with
// OnWriteIdle. wr is also where the write-idle event restarts its count
// (after an event, or a look that found a Write in progress), which is not
// data moved: so AllIdle's mark is not wr.
func (c *conn) movedOut() {
	o := c.o
	if !o.countsOut() {
		return
	}
	now := c.now()
	if o.allIdle {
		c.mark(&c.rd, now)
	}
	if o.writeIdle > 0 {
		c.mark(&c.wr, now)
	}
}

// closedErr returns the error of op once the hierarchy closed the conn,
// nil before.
func (c *conn) closedErr(op string) error {
	s := c.state.Load()
	switch {
	case s&timedOut == 0:
		return nil
	case s&lifeEnded != 0:
		return closedError(c.Conn, op, ErrLifetime)
	}
	return closedError(c.Conn, op, ErrIdle)
}

// Close stops the conn's timer and closes c. Called while OnReadIdle's f
// runs (by f, or by any goroutine meanwhile), it is an idle close: Read
// and Write report ErrIdle, and IdleDeadline the deadline of the event f
// runs for (rd moves past it only once f has returned).
func (c *conn) Close() error {
	c.mu.Lock()
	old := c.state.Load()
	if old&(closed|timedOut) == 0 && old&inReadEv != 0 {
		c.end = idlestate.SatAdd(c.idleMark(), c.idle.Load())
		c.state.Or(timedOut)
	}
	c.state.Or(closed)
	c.mu.Unlock()
	if old&closed != 0 {
		return c.Conn.Close() // a second Close: c's answer, typically net.ErrClosed
	}
	c.t.Stop() // the hierarchy keeps no reference to c
	if old&timedOut != 0 {
		return nil // the hierarchy has closed c already
	}
	return c.Conn.Close()
}

// NetConn returns the conn that was wrapped.
func (c *conn) NetConn() net.Conn { return c.Conn }

// IdleDeadline returns when the conn is to be closed for being idle, or,
// with OnReadIdle, when its next read-idle event is due; once the hierarchy
// has closed it, the deadline it was closed for (idle or lifetime); the
// zero Time while it is paused.
func (c *conn) IdleDeadline() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state.Load()
	switch {
	case s&timedOut != 0:
		return c.at(c.end)
	case s&paused != 0:
		return time.Time{}
	}
	return c.at(idlestate.SatAdd(c.idleMark(), c.idle.Load()))
}

// SetIdle makes d the conn's idle from now on, the current period counted
// from now, and arms the timer for the next deadline: as one step under
// mu, so that no look judges the new idle from the old mark.
func (c *conn) SetIdle(d time.Duration) {
	if d <= 0 {
		panic("netidle: Control.SetIdle called with " + d.String() + "; the idle must be positive")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Load()&(timedOut|closed) != 0 {
		return // closed: its deadline stays the one it was closed for
	}
	c.idle.Store(int64(d))
	c.rd.Store(c.now()) // the write-idle event's mark, wr, stays
	if c.state.Load()&paused == 0 {
		c.armLocked()
	}
}

// Pause suspends the idle close and the idle events: the timer is left
// armed only for the lifetime's end, if any.
func (c *conn) Pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Load()&(timedOut|closed|paused) != 0 {
		return
	}
	c.state.Or(paused)
	c.armLocked()
}

// Resume ends a Pause: the marks move to now, and the timer is armed for
// the next deadline.
func (c *conn) Resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Load()&(timedOut|closed) != 0 {
		return
	}
	c.state.And(^uint32(paused))
	now := c.now()
	c.rd.Store(now)
	c.wr.Store(now)
	c.armLocked()
}

var _ Control = (*conn)(nil)

// idleMark returns the mark the idle close (or read-idle event) counts
// from: the last data read, or with AllIdle moved either way (a Write with
// data then moves rd too; see movedOut).
func (c *conn) idleMark() int64 { return c.rd.Load() }

// record moves mark m (c.rd or c.wr) to the clock's reading: data moved
// now.
func (c *conn) record(m *atomic.Int64) { c.mark(m, c.now()) }

// mark moves mark m to now, a clock reading, unless it is later. A mark
// found later than now means a concurrent Read or Write recorded a later
// one, or the clock went back: see recordBehind. A swap that fails lost
// to another Read or Write, whose reading may be earlier than now: raise
// then keeps the later of the two.
func (c *conn) mark(m *atomic.Int64, now int64) {
	old := m.Load()
	if now >= old {
		if now != old && !m.CompareAndSwap(old, now) {
			raise(m, now)
		}
		return
	}
	c.recordBehind(m)
}

// recordBehind is record for a mark found later than the clock's reading.
// Under mu the clock is read again: a later reading just raises the mark;
// one still behind it means the clock went back, and the count starts
// again from it, as a Reset would, with the timer armed again since it
// may now be later than the conn's next deadline.
func (c *conn) recordBehind(m *atomic.Int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if raise(m, now) {
		return
	}
	mark, rearm := idlestate.Moved(m.Load(), now)
	m.Store(mark)
	if rearm && c.state.Load()&(timedOut|closed|paused) == 0 {
		c.armLocked()
	}
}

// raise moves m forward to now and reports true, unless m is later than
// now (false).
func raise(m *atomic.Int64, now int64) bool {
	for {
		o := m.Load()
		if o > now {
			return false
		}
		if o == now || m.CompareAndSwap(o, now) {
			return true
		}
	}
}

// armLocked arms the timer for the conn's next deadline (see
// idlestate.State.Next: the earliest of the lifetime's end and, unless
// paused, the idle close or read-idle event and the write-idle event), or
// stops it if there is none. c.mu must be held.
func (c *conn) armLocked() {
	s := c.stateLocked()
	next := s.Next()
	if next == idlestate.Never {
		c.t.Stop()
		return
	}
	c.t.ResetAt(c.at(next))
}

// stateLocked returns what the shared idle semantics judge: the conn's
// marks, its write idle, and whether it is paused or a Write is in
// progress. c.mu must be held (the marks may still move: Reads and Writes
// take no lock).
func (c *conn) stateLocked() idlestate.State {
	s := c.state.Load()
	return idlestate.State{
		Marks: idlestate.Marks{
			Read:  c.idleMark(),
			Write: c.wr.Load(),
			End:   c.end,
			Idle:  c.idle.Load(),
		},
		WriteIdle: c.o.writeIdle,
		Paused:    s&paused != 0,
		Writing:   s >= writer,
	}
}

// now returns the hierarchy's clock reading, as a mark: h.Elapsed().
func (c *conn) now() int64 { return int64(c.h.Elapsed()) }

// at returns the instant of mark ns.
func (c *conn) at(ns int64) time.Time { return c.h.Origin().Add(time.Duration(ns)) }
