package timingwheel

import (
	"fmt"
	"math"
	"net"
	"sync/atomic"
	"time"
	"unsafe"
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
// A conn with options has no timer of its own, so it is lighter than one
// without: 64 bytes (80 with MaxLifetime) for the conn and all its events,
// when its options are shared with other conns (IdleListener's are; so
// are IdleConn's when each call passes the same functions, and a new
// closure per conn costs a 48-byte config per conn). Conns whose next
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
// IdleOption makes IdleConn and IdleListener panic.
type IdleOption interface {
	applyIdle(idleConfig) idleConfig // by value: wrapping allocates no config
}

// idleConfig is what a list of IdleOptions sets.
type idleConfig struct {
	set       bool           // an option was given
	onRead    func(net.Conn) // nil: close on read idle
	writeIdle time.Duration  // 0: no write-idle event
	onWrite   func(net.Conn)
	lifetime  time.Duration // 0: no lifetime
}

type idleOptionFunc func(idleConfig) idleConfig

func (f idleOptionFunc) applyIdle(c idleConfig) idleConfig { return f(c) }

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
	return idleOptionFunc(func(c idleConfig) idleConfig { c.onRead = f; return c })
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
	return idleOptionFunc(func(c idleConfig) idleConfig { c.writeIdle, c.onWrite = d, f; return c })
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
	return idleOptionFunc(func(c idleConfig) idleConfig { c.lifetime = d; return c })
}

// idleOptions applies opts, panicking for a nil one. With no options, set
// is false, and the conn is the plain idleConn.
func idleOptions(method string, opts []IdleOption) idleConfig {
	var cfg idleConfig
	for i, o := range opts {
		if o == nil {
			panic(fmt.Sprintf("timingwheel: %s called with a nil IdleOption (option %d)", method, i))
		}
		cfg = o.applyIdle(cfg)
		cfg.set = true
	}
	return cfg
}

// Bits and counts of eventConn.state, beside idleTimedOut and idleClosed.
const (
	idleLifeEnded = 1 << 2 // with idleTimedOut: closed at the end of its lifetime
	idleWriter    = 1 << 8 // added for each Write in progress, with a write-idle event
)

// eventConn is the conn of IdleConn with options. It has no timer of its
// own: it sits in a bucket of its group (see idlebucket.go), filed for the
// earliest event its marks allowed when it was filed. Read and Write only
// move the marks (a clock read and an atomic store: no lock), and when the
// bucket's timer fires the conn runs the events that are due and is filed
// again for the next. The marks only move forward, so the bucket is never
// later than the earliest event due: no event is late by more than a
// timer of the hierarchy.
//
// It is 64 bytes, a malloc size class: keep it so. A conn with a lifetime,
// or with an idle of its own, is an extConn, 16 bytes more.
type eventConn struct {
	net.Conn
	cfg *eventConfig
	// read and write are the marks: the clock at the last Read (Write) that
	// moved data, or at the last read-idle (write-idle) event, whichever is
	// later. The idle close freezes read.
	read, write mark
	prev, next  *eventConn    // in a bucket's list, guarded by the group's lock; nil: in none
	state       atomic.Uint32 // idleTimedOut | idleClosed | idleLifeEnded, plus idleWriter per Write
	home        uint32        // the conn's group (shard index); sentinelHome for a list's head
}

// extConn is an eventConn with what its config does not hold: a lifetime
// (MaxLifetime), or an idle of its own (conns with the same options but
// different idles share a config whose idle is 0).
type extConn struct {
	eventConn
	idle    int64 // ns, if cfg.idle is 0
	lifeEnd int64 // ns since the origin, if cfg.lifetime > 0
}

// ext returns the extConn c is the first field of; c must be one.
func (c *eventConn) ext() *extConn { return (*extConn)(unsafe.Pointer(c)) }

// hasExt reports whether conns of cfg are extConns.
func (cfg *eventConfig) hasExt() bool { return cfg.idle == 0 || cfg.lifetime > 0 }

// idle returns c's read-idle time in ns.
func (c *eventConn) idle() int64 {
	if d := c.cfg.idle; d != 0 {
		return d
	}
	return c.ext().idle
}

// lifeEnd returns the end of c's lifetime in ns since the origin,
// math.MaxInt64 for none.
func (c *eventConn) lifeEnd() int64 {
	if c.cfg.lifetime == 0 {
		return math.MaxInt64
	}
	return c.ext().lifeEnd
}

func (h *Hierarchy) newEventConn(c net.Conn, idle time.Duration, cfg *idleConfig) *eventConn {
	w := h.idleWheel()
	ecfg := w.config(h, int64(idle), cfg)
	var ec *eventConn
	if ecfg.hasExt() {
		x := &extConn{idle: int64(idle)}
		ec = &x.eventConn
	} else {
		ec = new(eventConn)
	}
	ec.Conn = c
	ec.cfg = ecfg
	ec.home = (w.rr.Add(1) - 1) % uint32(len(w.groups))
	g := &w.groups[ec.home]
	g.mu.Lock()
	now := h.elapsed() // under the lock, as every filing reads the clock
	ec.read.store(now)
	ec.write.store(now)
	if cfg.lifetime > 0 {
		ec.ext().lifeEnd = satAdd(now, int64(cfg.lifetime))
	}
	g.fileLocked(ec)
	g.mu.Unlock()
	return ec
}

// Read reads from c and, if that returned data, records it for the
// read-idle event.
func (c *eventConn) Read(p []byte) (int, error) {
	if c.state.Load()&idleTimedOut != 0 {
		return 0, timeoutError(c.Conn, "read")
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.record(&c.read)
	}
	if err != nil && c.state.Load()&idleTimedOut != 0 {
		err = timeoutError(c.Conn, "read")
	}
	return n, err
}

// Write writes to c and, if that wrote data, records it for the
// write-idle event. While it runs, the conn is not write idle.
func (c *eventConn) Write(p []byte) (int, error) {
	if c.state.Load()&idleTimedOut != 0 {
		return 0, timeoutError(c.Conn, "write")
	}
	if c.cfg.writeIdle == 0 {
		n, err := c.Conn.Write(p)
		if err != nil && c.state.Load()&idleTimedOut != 0 {
			err = timeoutError(c.Conn, "write")
		}
		return n, err
	}
	c.state.Add(idleWriter)
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.record(&c.write) // before the Write stops counting as in progress
	}
	c.state.Add(^uint32(idleWriter - 1)) // minus idleWriter
	if err != nil && c.state.Load()&idleTimedOut != 0 {
		err = timeoutError(c.Conn, "write")
	}
	return n, err
}

// Close stops the conn's events and closes c.
func (c *eventConn) Close() error {
	old := c.state.Or(idleClosed)
	if old&idleClosed != 0 {
		return c.Conn.Close() // a second Close: c's answer, typically net.ErrClosed
	}
	g := c.group()
	g.mu.Lock()
	g.unlinkLocked(c) // the hierarchy keeps no reference to c
	g.mu.Unlock()
	if old&idleTimedOut != 0 {
		return nil // the hierarchy has closed c (or is closing it) already
	}
	return c.Conn.Close()
}

// NetConn returns the conn that was wrapped.
func (c *eventConn) NetConn() net.Conn { return c.Conn }

// IdleDeadline returns when the conn is to be closed for being idle, or,
// with OnReadIdle, when its next read-idle event is due; once the hierarchy
// has closed it, the deadline it was closed for (idle or lifetime).
func (c *eventConn) IdleDeadline() time.Time {
	at := satAdd(c.read.load(), c.idle())
	if s := c.state.Load(); s&idleTimedOut != 0 && s&idleLifeEnded != 0 {
		at = c.lifeEnd()
	}
	return c.cfg.h.origin.Add(time.Duration(at))
}

// nextDue returns the earliest deadline the marks allow, in ns since the
// origin.
func (c *eventConn) nextDue() int64 {
	next := min(satAdd(c.read.load(), c.idle()), c.lifeEnd())
	if c.cfg.writeIdle > 0 {
		next = min(next, satAdd(c.write.load(), c.cfg.writeIdle))
	}
	return clampDeadline(next)
}

// record moves mark m (c.read or c.write) to the clock's reading: data
// moved now.
func (c *eventConn) record(m *mark) {
	if !m.raise(c.cfg.h.elapsed()) {
		c.recordBehind(m)
	}
}

// recordBehind is record for a mark found later than the clock's reading:
// either a concurrent Read or Write recorded a later one, or the clock went
// back. Under the group's lock the clock is read again: a later reading
// just raises the mark; one still behind it means the clock went back, and
// the count starts again from it, as a Reset would, with c filed again
// since its bucket may now be later than its next event.
func (c *eventConn) recordBehind(m *mark) {
	g := c.group()
	g.mu.Lock()
	defer g.mu.Unlock()
	now := c.cfg.h.elapsed()
	if m.raise(now) {
		return
	}
	m.lower(now)
	if c.next != nil { // in a bucket; if being looked at, it is filed after
		g.unlinkLocked(c)
		g.fileLocked(c)
	}
}

// fire looks at c when its bucket's timer has fired, at is the instant of
// the tick being fired (or the clock's reading, if earlier): it closes the
// conn or runs the events due by then, and files the conn again for the
// next. An event is due when the hierarchy's tick has reached its
// deadline's, as for a timer. Filing comes after the events, so that a
// conn's events never overlap; f may Close the conn (it is then not filed)
// or write to it (which moves a mark before the filing reads it). The
// write-idle event is decided after the read-idle one has run, so that if
// f panics, the write-idle event still comes on the next Advance.
func (c *eventConn) fire(at int64) {
	if c.state.Load()&(idleTimedOut|idleClosed) != 0 {
		return
	}
	cfg := c.cfg
	now := cfg.h.elapsed()
	if at >= c.lifeEnd() {
		c.expire(idleLifeEnded)
		return
	}
	if cfg.onRead == nil {
		if c.read.freezeIfDue(c.idle(), at) {
			c.expire(0)
			return
		}
	} else if c.read.due(c.idle(), at, now) {
		cfg.onRead(c)
	}
	if cfg.writeIdle > 0 {
		if c.state.Load() >= idleWriter { // a Write in progress: not idle
			c.write.raise(now)
		} else if c.write.due(cfg.writeIdle, at, now) {
			cfg.onWrite(c)
		}
	}
	c.group().file(c)
}

// expire closes the conn as the idle close does (why: 0, or idleLifeEnded),
// unless Close came first. The flag goes up before c is closed, so a Read
// or Write that fails because of the close reports the timeout.
func (c *eventConn) expire(why uint32) {
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
