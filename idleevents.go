package timingwheel

import (
	"fmt"
	"io"
	"math"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// An IdleOption adds an idle event to the conns of [Hierarchy.IdleConn] and
// [Hierarchy.IdleListener], as a server's idle handler would (Netty's
// IdleStateHandler has reader-idle, writer-idle and all-idle events):
//
//   - [OnReadIdle] calls a function, instead of closing, each time the
//     conn has read nothing for idle;
//   - [OnWriteIdle] calls one each time nothing has been written for a
//     while: the moment to send a heartbeat (a ping) to the peer;
//   - [MaxLifetime] closes the conn at an age, whatever its traffic.
//
// Events are never early and at most a tick plus the driver's wake-up late,
// like every timer of the hierarchy. Their functions run on the goroutine
// that advances the hierarchy, one at a time (with [WithParallelCallbacks],
// those of conns in different shards may run at once; a conn's own never
// overlap), and must not block it: see [OnWriteIdle] for how to write a
// ping without blocking. Close stops the conn's events; the hierarchy keeps
// no reference to a closed conn.
//
//   - [AllIdle] makes data written count as well as data read, for the
//     idle close or OnReadIdle's event.
//
// A conn with options has no timer of its own, so it is lighter than one
// without: 64 bytes (80 with OnWriteIdle or MaxLifetime) for the conn and
// all its events, its own idle included (see [IdleControl]'s SetIdle); the
// options are the [IdlePolicy]'s, which its conns share (IdleListener's
// conns share one; each IdleConn call makes one, about 100 bytes). Conns whose next
// events fall in the same tick, or, while far, in the same span of ticks,
// share one timer of the hierarchy: [Hierarchy.Len] and [Hierarchy.Stats]
// count those shared timers, not one per conn. A Read or Write that moves
// data only records the clock in an atomic (no lock, no allocation); the
// shared timer finds on firing which conns have an event due, so a busy
// conn is looked at about once per idle period, and a conn whose event is
// far is looked at a few more times as it nears (log32 of its distance in
// ticks). Each function is given the conn IdleConn returned, so that a
// Write through it counts as writing.
//
// A later option of the same kind replaces an earlier one. A nil
// IdleOption makes IdleConn, IdleListener and IdlePolicy panic.
type IdleOption interface {
	applyIdle(p *IdlePolicy)
}

type idleOptionFunc func(p *IdlePolicy)

func (f idleOptionFunc) applyIdle(p *IdlePolicy) { f(p) }

// OnReadIdle makes read idle an event instead of a close: when idle (the
// duration given to IdleConn or IdleListener) has passed since the conn was
// wrapped, or since the last Read that returned data, f runs with the
// conn, which stays open; and f runs again each time another idle passes
// with no data read, counted from the previous event. f may close the
// conn, write to it (see [OnWriteIdle] for how without blocking), or do
// nothing. [Hierarchy.IdleConn]'s IdleDeadline method then reports when the
// next event is due. OnReadIdle panics if f is nil.
func OnReadIdle(f func(c net.Conn)) IdleOption {
	if f == nil {
		panic("timingwheel: OnReadIdle called with a nil func")
	}
	return idleOptionFunc(func(p *IdlePolicy) { p.onRead = f })
}

// OnWriteIdle runs f with the conn when d has passed since it was wrapped,
// or since the last Write that wrote at least one byte, and again each
// time another d passes with nothing written, counted from the previous
// event. A Write from f itself counts, so a ping that f writes postpones
// the next event by d. While a Write is in progress (a slow peer's full
// buffers) the conn is not write idle: f does not run, and d counts again
// from then.
//
// f runs on the goroutine that advances the hierarchy, which fires every
// other timer too, so it must not block; a Write to a peer whose buffers
// are full does. A ping is sent without blocking in one of two ways:
//
//   - with a write deadline: c.SetWriteDeadline(time.Now().Add(10 *
//     time.Millisecond)) and then c.Write(ping). A socket with room for
//     the ping takes it at once, and a peer that reads nothing costs the
//     deadline at most. It also sets the deadline of the conn's other
//     writes, so it suits a conn whose other writers set their own
//     deadlines before each Write, or use none;
//   - by handing the write to the conn's own writer goroutine, when it has
//     one: a send on a buffered channel that the writer selects on, with a
//     default case so that a busy writer drops the ping rather than
//     blocking f (it is writing already, so no ping is needed).
//
// OnWriteIdle panics if d <= 0 or f is nil.
func OnWriteIdle(d time.Duration, f func(c net.Conn)) IdleOption {
	if d <= 0 {
		panic(fmt.Sprintf("timingwheel: OnWriteIdle called with %v; the duration must be positive", d))
	}
	if f == nil {
		panic("timingwheel: OnWriteIdle called with a nil func")
	}
	return idleOptionFunc(func(p *IdlePolicy) { p.writeIdle, p.onWrite = int64(d), f })
}

// MaxLifetime closes the conn d after it was wrapped (for IdleListener:
// accepted), whatever its traffic, as SSH and proxy servers cap a
// connection's lifetime. The close is the idle close's: from then on Read
// and Write return an error e with errors.Is(e, os.ErrDeadlineExceeded)
// that is a [net.Error] whose Timeout() is true, and the first Close
// returns nil. MaxLifetime panics if d <= 0.
func MaxLifetime(d time.Duration) IdleOption {
	if d <= 0 {
		panic(fmt.Sprintf("timingwheel: MaxLifetime called with %v; the duration must be positive", d))
	}
	return idleOptionFunc(func(p *IdlePolicy) { p.lifetime = int64(d) })
}

// AllIdle makes the idle close (or [OnReadIdle]'s event) come once idle
// has passed with no data moved either way, as Netty's all-idle event: a
// Write that wrote data counts as a Read that returned data does, so a conn
// writing a long response or a stream to a silent peer stays open, while
// one whose peer stops reading (its Write blocked) is closed once idle
// has passed. Data moved by ReadFrom and WriteTo (io.Copy) counts per MiB,
// and a Write of more than that to a *net.TCPConn is written, and
// counted, in pieces of 1 MiB (see [Hierarchy.IdleConn]).
func AllIdle() IdleOption {
	return idleOptionFunc(func(p *IdlePolicy) { p.allIdle = true })
}

// Bits and counts of eventConn.state, beside idleTimedOut, idleClosed and
// idlePaused.
const (
	idleLifeEnded = 1 << 3 // with idleTimedOut: closed at the end of its lifetime
	idleParked    = 1 << 4 // paused, with no lifetime: in no bucket until Resume
	idleInReadEv  = 1 << 5 // OnReadIdle's f is running: a Close is an idle close
	idleWriter    = 1 << 8 // added for each Write in progress, with a write-idle event
)

// eventConn is the conn of a policy with options. It has no timer of its
// own: it sits in a bucket of its group (see idlebucket.go), filed for the
// earliest event its marks allowed when it was filed. Read and Write only
// move the marks (a clock read and an atomic store: no lock), and when the
// bucket's timer fires the conn runs the events that are due and is filed
// again for the next. The marks only move forward (but for the clock going
// back), so the bucket is never later than the earliest event due: no event
// is late by more than a timer of the hierarchy.
//
// X is what conns of some policies need beyond the 64 bytes: noExtra for
// none, lifeExtra for a write-idle event or a lifetime (80 bytes). The
// type parameter, rather than a pointer to an extension, keeps the sizes
// at the malloc classes with no pointer per conn and no unsafe cast.
type eventConn[X connExtra] struct {
	x X // first: a zero-size last field would be padded
	net.Conn
	p *IdlePolicy
	// mark is the clock at the last Read that moved data (with AllIdle:
	// or Write), at the last read-idle event, or at Resume, whichever is
	// later. The idle close freezes it.
	mark       mark
	idle       atomic.Int64  // ns; SetIdle changes it
	prev, next *eventConn[X] // in a bucket's list, guarded by the group's lock; nil: in none
	state      atomic.Uint32 // idleTimedOut | idleClosed | ..., plus idleWriter per Write
	home       uint32        // the conn's group (shard index)
}

// connExtra is the set of eventConn's extensions.
type connExtra interface{ noExtra | lifeExtra }

// noExtra is the extension of a conn with neither a write-idle event nor a
// lifetime.
type noExtra struct{}

// lifeExtra is the extension of a conn with a write-idle event or a
// lifetime.
type lifeExtra struct {
	write   mark  // as eventConn.mark, for Writes and write-idle events
	lifeEnd int64 // ns since the origin; math.MaxInt64: no lifetime
}

// ext returns c's lifeExtra, or nil if it has none.
func (c *eventConn[X]) ext() *lifeExtra {
	e, _ := any(&c.x).(*lifeExtra)
	return e
}

func (p *IdlePolicy) newEventConn(c net.Conn) net.Conn {
	if p.writeIdle > 0 || p.lifetime > 0 {
		return newEventConn[lifeExtra](p, c)
	}
	return newEventConn[noExtra](p, c)
}

func newEventConn[X connExtra](p *IdlePolicy, c net.Conn) *eventConn[X] {
	w := p.h.idleWheel()
	ec := &eventConn[X]{Conn: c, p: p}
	ec.idle.Store(p.idle)
	ec.home = (w.rr.Add(1) - 1) % uint32(len(w.groups))
	g := &w.groups[ec.home]
	g.mu.Lock()
	now := p.h.elapsed() // under the lock, as every filing reads the clock
	ec.mark.store(now)
	if e := ec.ext(); e != nil {
		e.write.store(now)
		e.lifeEnd = math.MaxInt64
		if p.lifetime > 0 {
			e.lifeEnd = satAdd(now, p.lifetime)
		}
	}
	fileLocked(g, ec)
	g.mu.Unlock()
	return ec
}

// Read reads from c and, if that returned data, records it for the idle
// close or read-idle event.
func (c *eventConn[X]) Read(b []byte) (int, error) {
	if c.state.Load()&idleTimedOut != 0 {
		return 0, c.closedErr("read")
	}
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.record(&c.mark)
	}
	if err != nil && c.state.Load()&idleTimedOut != 0 {
		err = c.closedErr("read")
	}
	return n, err
}

// Write writes to c and, if that wrote data, records it for the write-idle
// event (and, with AllIdle, the idle close). While it runs, the conn is not
// write idle. With AllIdle, a large Write to a TCP conn is written in
// pieces of copyChunk bytes, each counted.
func (c *eventConn[X]) Write(b []byte) (int, error) {
	if c.state.Load()&idleTimedOut != 0 {
		return 0, c.closedErr("write")
	}
	if !c.countsOut() {
		n, err := c.Conn.Write(b)
		if err != nil && c.state.Load()&idleTimedOut != 0 {
			err = c.closedErr("write")
		}
		return n, err
	}
	writer := c.p.writeIdle > 0
	if writer {
		c.state.Add(idleWriter)
	}
	var n int
	var err error
	if _, tcp := c.Conn.(*net.TCPConn); !tcp || !c.p.allIdle || len(b) <= copyChunk {
		n, err = c.Conn.Write(b)
		if n > 0 {
			c.movedOut() // before the Write stops counting as in progress
		}
	} else {
		for len(b) > 0 && err == nil {
			var k int
			k, err = c.Conn.Write(b[:min(len(b), copyChunk)])
			n += k
			b = b[k:]
			if k > 0 {
				c.movedOut()
			}
		}
	}
	if writer {
		c.state.Add(^uint32(idleWriter - 1)) // minus idleWriter
	}
	if err != nil && c.state.Load()&idleTimedOut != 0 {
		err = c.closedErr("write")
	}
	return n, err
}

// movedIn records data read.
func (c *eventConn[X]) movedIn() { c.record(&c.mark) }

// movedOut records data written.
func (c *eventConn[X]) movedOut() {
	if c.p.allIdle {
		c.record(&c.mark)
	}
	if e := c.ext(); e != nil && c.p.writeIdle > 0 {
		c.record(&e.write)
	}
}

// countsOut reports whether written data is recorded.
func (c *eventConn[X]) countsOut() bool { return c.p.allIdle || c.p.writeIdle > 0 }

func (c *eventConn[X]) wrapped() net.Conn { return c.Conn }

// closedErr returns the error of op once the hierarchy closed the conn.
func (c *eventConn[X]) closedErr(op string) error {
	s := c.state.Load()
	switch {
	case s&idleTimedOut == 0:
		return nil
	case s&idleLifeEnded != 0:
		return closedError(c.Conn, op, ErrLifetime)
	}
	return closedError(c.Conn, op, ErrIdle)
}

// Close stops the conn's events and closes c. Called by OnReadIdle's f
// (while it runs), it is an idle close: Read and Write report ErrIdle.
func (c *eventConn[X]) Close() error {
	var old uint32
	for {
		old = c.state.Load()
		n := old | idleClosed
		if old&(idleClosed|idleTimedOut) == 0 && old&idleInReadEv != 0 {
			n |= idleTimedOut
		}
		if c.state.CompareAndSwap(old, n) {
			break
		}
	}
	if old&idleClosed != 0 {
		return c.Conn.Close() // a second Close: c's answer, typically net.ErrClosed
	}
	g := c.group()
	g.mu.Lock()
	unlinkLocked(g, c) // the hierarchy keeps no reference to c
	g.mu.Unlock()
	if old&idleTimedOut != 0 {
		return nil // the hierarchy has closed c (or is closing it) already
	}
	return c.Conn.Close()
}

// NetConn returns the conn that was wrapped.
func (c *eventConn[X]) NetConn() net.Conn { return c.Conn }

// IdleDeadline returns when the conn is to be closed for being idle, or,
// with OnReadIdle, when its next read-idle event is due; once the hierarchy
// has closed it, the deadline it was closed for (idle or lifetime); the
// zero Time while it is paused.
func (c *eventConn[X]) IdleDeadline() time.Time {
	s := c.state.Load()
	var at int64
	switch {
	case s&(idleTimedOut|idleLifeEnded) == idleTimedOut|idleLifeEnded:
		at = c.ext().lifeEnd
	case s&(idleTimedOut|idlePaused) == idlePaused:
		return time.Time{}
	default:
		at = satAdd(c.mark.load(), c.idle.Load())
	}
	return c.p.h.origin.Add(time.Duration(at))
}

// SetIdle makes d the conn's idle from now on, the current period counted
// from now, and files the conn again for its next event.
func (c *eventConn[X]) SetIdle(d time.Duration) {
	checkSetIdle(d)
	g := c.group()
	g.mu.Lock()
	c.idle.Store(int64(d))
	c.mark.set(c.p.h.elapsed())
	if c.next != nil { // in a bucket; if being looked at, it is filed after
		unlinkLocked(g, c)
		fileLocked(g, c)
	}
	g.mu.Unlock()
}

// Pause suspends the idle close and the idle events: a bucket that finds
// the conn paused runs none of them, and files it again only for its
// lifetime (a conn with none waits in no bucket until Resume).
func (c *eventConn[X]) Pause() {
	for {
		s := c.state.Load()
		if s&(idleTimedOut|idleClosed|idlePaused) != 0 || c.state.CompareAndSwap(s, s|idlePaused) {
			return
		}
	}
}

// Resume ends a Pause: the marks move to now, and the conn is filed
// again for its next event.
func (c *eventConn[X]) Resume() {
	g := c.group()
	g.mu.Lock()
	defer g.mu.Unlock()
	var s uint32
	for {
		s = c.state.Load()
		if s&(idleTimedOut|idleClosed) != 0 {
			return
		}
		if c.state.CompareAndSwap(s, s&^(idlePaused|idleParked)) {
			break
		}
	}
	now := c.p.h.elapsed()
	c.mark.set(now)
	if e := c.ext(); e != nil {
		e.write.set(now)
	}
	switch {
	case s&idleParked != 0:
		fileLocked(g, c)
	case c.next != nil: // in a bucket; if being looked at, it is filed after
		unlinkLocked(g, c)
		fileLocked(g, c)
	}
}

// ReadFrom copies r to c (sendfile, splice), as c's own ReadFrom does.
func (c *eventConn[X]) ReadFrom(r io.Reader) (int64, error) { return readFrom(c, r) }

// WriteTo copies c to w (splice), counting as data read per MiB.
func (c *eventConn[X]) WriteTo(w io.Writer) (int64, error) { return writeTo(c, w) }

// CloseWrite shuts down the writing side of c.
func (c *eventConn[X]) CloseWrite() error { return closeWrite(c) }

// CloseRead shuts down the reading side of c.
func (c *eventConn[X]) CloseRead() error { return closeRead(c) }

// SyscallConn returns c's raw conn, whose Read and Write count as traffic.
func (c *eventConn[X]) SyscallConn() (syscall.RawConn, error) { return syscallConn(c) }

var (
	_ IdleControl = (*eventConn[noExtra])(nil)
	_ IdleControl = (*eventConn[lifeExtra])(nil)
)

// nextDue returns the earliest deadline the marks allow, in ns since the
// origin, or math.MaxInt64 for none (paused, with no lifetime).
func (c *eventConn[X]) nextDue() int64 {
	next := int64(math.MaxInt64)
	e := c.ext()
	if e != nil {
		next = e.lifeEnd
	}
	if c.state.Load()&idlePaused == 0 {
		next = min(next, satAdd(c.mark.load(), c.idle.Load()))
		if e != nil && c.p.writeIdle > 0 {
			next = min(next, satAdd(e.write.load(), c.p.writeIdle))
		}
	}
	if next == math.MaxInt64 {
		return next
	}
	return clampDeadline(next)
}

// record moves mark m (c.mark or the write mark) to the clock's reading:
// data moved now.
func (c *eventConn[X]) record(m *mark) {
	if !m.raise(c.p.h.elapsed()) {
		c.recordBehind(m)
	}
}

// recordBehind is record for a mark found later than the clock's reading:
// either a concurrent Read or Write recorded a later one, or the clock went
// back. Under the group's lock the clock is read again: a later reading
// just raises the mark; one still behind it means the clock went back, and
// the count starts again from it, as a Reset would, with c filed again
// since its bucket may now be later than its next event.
func (c *eventConn[X]) recordBehind(m *mark) {
	g := c.group()
	g.mu.Lock()
	defer g.mu.Unlock()
	now := c.p.h.elapsed()
	if m.raise(now) {
		return
	}
	m.set(now)
	if c.next != nil { // in a bucket; if being looked at, it is filed after
		unlinkLocked(g, c)
		fileLocked(g, c)
	}
}

// fire looks at c when its bucket's timer has fired; at is the instant of
// the tick being fired (or the clock's reading, if earlier): it closes the
// conn or runs the events due by then, and files the conn again for the
// next. An event is due when that tick has reached its deadline, as for a
// timer. Filing comes after the events, so that a conn's events never
// overlap; f may Close the conn (it is then not filed) or write to it
// (which moves a mark before the filing reads it). The write-idle event is
// decided after the read-idle one has run, so that if f panics, the
// write-idle event still comes on the next Advance. A paused conn has only
// its lifetime.
func (c *eventConn[X]) fire(g *idleGroup, at int64) {
	s := c.state.Load()
	if s&(idleTimedOut|idleClosed) != 0 {
		return
	}
	p := c.p
	now := p.h.elapsed()
	e := c.ext()
	if e != nil && at >= e.lifeEnd {
		c.expire(idleLifeEnded)
		return
	}
	if s&idlePaused == 0 {
		if p.onRead == nil {
			if c.mark.freezeIfDue(c.idle.Load(), at) {
				c.expire(0)
				return
			}
		} else if c.mark.due(c.idle.Load(), at, now) {
			c.readIdle()
		}
		if e != nil && p.writeIdle > 0 && c.state.Load()&idlePaused == 0 {
			if c.state.Load() >= idleWriter { // a Write in progress: not idle
				e.write.raise(now)
			} else if e.write.due(p.writeIdle, at, now) {
				p.onWrite(c)
			}
		}
	}
	g.mu.Lock()
	fileLocked(g, c)
	g.mu.Unlock()
}

// readIdle runs OnReadIdle's f, during which a Close is an idle close.
func (c *eventConn[X]) readIdle() {
	c.state.Or(idleInReadEv)
	defer c.state.And(^uint32(idleInReadEv))
	c.p.onRead(c)
}

// expire closes the conn as the idle close does (why: 0, or idleLifeEnded),
// unless Close came first. The flag goes up before c is closed, so a Read
// or Write that fails because of the close reports the timeout.
func (c *eventConn[X]) expire(why uint32) {
	for {
		s := c.state.Load()
		if s&(idleTimedOut|idleClosed) != 0 {
			return
		}
		if c.state.CompareAndSwap(s, s|idleTimedOut|why) {
			c.Conn.Close()
			return
		}
	}
}
