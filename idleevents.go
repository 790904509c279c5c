package timingwheel

import (
	"fmt"
	"math"
	"net"
	"sync/atomic"
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
// ping without blocking. Close stops the
// conn's events; the hierarchy keeps no reference to a closed conn. All of
// a conn's events share one [Timer] held in the conn, so a conn with
// options costs 48 bytes more than one without, whatever options it has,
// and re-arming on Read and Write allocates nothing and takes no lock: a
// Read or Write only records that it moved data, and the timer of a busy
// conn fires about once per idle period to find it busy (such firings run
// none of the functions given, but count in [Hierarchy.Stats]). Each
// function is given the conn IdleConn returned, so that a Write through it
// counts as writing.
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

// idleWriter is added to idleConn.state for each Write in progress on an
// eventConn with a write-idle event.
const idleWriter = 1 << 8

// eventConn is the conn of IdleConn with options. One timer, the idleConn's,
// serves every event: Read and Write only record when they moved data (a
// clock read and an atomic store: no lock), and the timer, armed for the
// earliest event the marks allowed when it was last armed, finds on firing
// whether an event is due and re-arms for the next. An active conn's timer
// thus fires about once per idle period, to find it not idle, instead of
// being re-armed on every Read and Write. The marks only move forward, so
// the armed deadline is never later than the earliest event due: no event
// is late by more than the timer itself.
//
// Its size is a malloc size class (144 bytes): keep it so.
type eventConn struct {
	idleConn
	// read and write are the marks, in ns since the origin: the clock at the
	// last Read (Write) that moved data, or at the last read-idle
	// (write-idle) event, whichever is later.
	read, write atomic.Int64
	// closedAt is the deadline the hierarchy closed the conn for, in ns
	// since the origin; written before idleTimedOut is set.
	closedAt  atomic.Int64
	lifeEnd   int64 // ns since the origin; math.MaxInt64: no lifetime
	writeIdle int64 // ns; 0: no write-idle event
	onRead    func(net.Conn)
	onWrite   func(net.Conn)
}

func (h *Hierarchy) newEventConn(c net.Conn, idle time.Duration, cfg *idleConfig) *eventConn {
	ec := &eventConn{
		idleConn:  idleConn{Conn: c, idle: idle},
		lifeEnd:   math.MaxInt64,
		writeIdle: int64(cfg.writeIdle),
		onRead:    cfg.onRead,
		onWrite:   cfg.onWrite,
	}
	ec.t.Init(h, ec.fire) // the one allocation besides ec: the method value
	now := h.elapsed()
	ec.read.Store(now)
	ec.write.Store(now)
	if cfg.lifetime > 0 {
		ec.lifeEnd = satAdd(now, int64(cfg.lifetime))
	}
	ec.t.resetTo(arming{v: clampDeadline(ec.nextDue()), move: true})
	return ec
}

// hierarchy returns the hierarchy the conn's timer is bound to.
func (c *eventConn) hierarchy() *Hierarchy { return c.t.sh.Load().h }

// raise moves mark m forward to now; a mark already later stays.
func raise(m *atomic.Int64, now int64) {
	for {
		old := m.Load()
		if old >= now || m.CompareAndSwap(old, now) {
			return
		}
	}
}

// Read reads from c and, if that returned data, records it for the
// read-idle event.
func (c *eventConn) Read(p []byte) (int, error) {
	if c.state.Load()&idleTimedOut != 0 {
		return 0, c.timeoutError("read")
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		raise(&c.read, c.hierarchy().elapsed())
	}
	if err != nil && c.state.Load()&idleTimedOut != 0 {
		err = c.timeoutError("read")
	}
	return n, err
}

// Write writes to c and, if that wrote data, records it for the
// write-idle event. While it runs, the conn is not write idle.
func (c *eventConn) Write(p []byte) (int, error) {
	if c.writeIdle == 0 {
		return c.idleConn.Write(p)
	}
	if c.state.Load()&idleTimedOut != 0 {
		return 0, c.timeoutError("write")
	}
	c.state.Add(idleWriter)
	n, err := c.Conn.Write(p)
	if n > 0 {
		raise(&c.write, c.hierarchy().elapsed()) // before the Write stops counting as in progress
	}
	c.state.Add(^uint32(idleWriter - 1)) // minus idleWriter
	if err != nil && c.state.Load()&idleTimedOut != 0 {
		err = c.timeoutError("write")
	}
	return n, err
}

// IdleDeadline returns when the conn is to be closed for being idle, or,
// with OnReadIdle, when its next read-idle event is due; once the hierarchy
// has closed it, the deadline it was closed for (idle or lifetime).
func (c *eventConn) IdleDeadline() time.Time {
	h := c.hierarchy()
	if c.state.Load()&idleTimedOut != 0 {
		return h.origin.Add(time.Duration(c.closedAt.Load()))
	}
	return h.origin.Add(time.Duration(satAdd(c.read.Load(), int64(c.idle))))
}

// nextDue returns the earliest deadline the marks allow, in ns since the
// origin.
func (c *eventConn) nextDue() int64 {
	next := min(satAdd(c.read.Load(), int64(c.idle)), c.lifeEnd)
	if c.writeIdle > 0 {
		next = min(next, satAdd(c.write.Load(), c.writeIdle))
	}
	return next
}

// due reports whether idle has passed since mark m at now, and if so moves
// m to now (the event restarts the count), unless a concurrent Read or
// Write moved it first.
func due(m *atomic.Int64, idle, now int64) bool {
	for {
		old := m.Load()
		if now < satAdd(old, idle) {
			return false
		}
		if m.CompareAndSwap(old, now) {
			return true
		}
	}
}

// fire is the timer's callback: it closes the conn or runs the events that
// are due, after re-arming the timer for the next one.
func (c *eventConn) fire() {
	if c.state.Load()&(idleTimedOut|idleClosed) != 0 {
		return
	}
	h := c.hierarchy()
	now := h.elapsed()
	if now >= c.lifeEnd {
		c.expireAt(c.lifeEnd)
		return
	}
	if c.onRead == nil {
		if d := satAdd(c.read.Load(), int64(c.idle)); now >= d {
			c.expireAt(d)
			return
		}
	}
	readIdle := c.onRead != nil && due(&c.read, int64(c.idle), now)
	writeIdle := false
	if c.writeIdle > 0 {
		if c.state.Load() >= idleWriter { // a Write in progress: not idle
			raise(&c.write, now)
		} else {
			writeIdle = due(&c.write, c.writeIdle, now)
		}
	}
	// Re-arm before the events, so that f may Close the conn (which stops
	// the timer) or write (which moves a mark); a Close that came while
	// this ran stopped a timer that had fired, so stop the re-armed one.
	c.t.resetTo(arming{v: clampDeadline(c.nextDue())})
	if c.state.Load()&(idleTimedOut|idleClosed) != 0 {
		c.t.Stop()
		return
	}
	if readIdle {
		c.onRead(c)
	}
	if writeIdle {
		c.onWrite(c)
	}
}

// expireAt closes the conn as the idle close does, for the deadline at (ns
// since the origin), unless Close came first.
func (c *eventConn) expireAt(at int64) {
	c.closedAt.Store(at)
	for {
		s := c.state.Load()
		if s&(idleTimedOut|idleClosed) != 0 {
			return
		}
		if c.state.CompareAndSwap(s, s|idleTimedOut) {
			c.Conn.Close()
			return
		}
	}
}
