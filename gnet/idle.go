package gnetwheel

import (
	"fmt"
	"net"
	"os"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/timingwheel/timingwheel"
)

// Why the wheel closed a conn, as [Idle.Err] reports in OnClose. Both are
// net.Errors whose Timeout() is true, and errors.Is(err,
// os.ErrDeadlineExceeded) holds: the error a net.Conn's reader sees when a
// deadline passes (API.md guarantees 11 and 15).
var (
	ErrIdle     error = &timeoutError{"gnetwheel: connection idle"}
	ErrLifetime error = &timeoutError{"gnetwheel: connection lifetime exceeded"}
)

type timeoutError struct{ msg string }

func (e *timeoutError) Error() string   { return e.msg }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }
func (e *timeoutError) Unwrap() error   { return os.ErrDeadlineExceeded }

var _ net.Error = (*timeoutError)(nil)

// IdleOption adds an idle event to an [Idler]: [OnReadIdle],
// [OnWriteIdle], [MaxLifetime].
type IdleOption func(*Idler)

// OnReadIdle makes read idle call f instead of closing the conn: f runs on
// the conn's event loop each time idle passes with no traffic, and the conn
// stays open. f may write to c, and close it (c.Close or returning
// nothing: the next OnTraffic may return gnet.Close).
func OnReadIdle(f func(c gnet.Conn)) IdleOption {
	if f == nil {
		panic("gnetwheel: OnReadIdle called with a nil func")
	}
	return func(i *Idler) { i.onReadIdle = f }
}

// OnWriteIdle calls f on the conn's event loop each time d passes with
// nothing written: a heartbeat or ping. A write through [Idle.Write], or a
// call of [Idle.Wrote] after writing another way, pushes it back; so does
// f's own write through Idle.Write.
func OnWriteIdle(d time.Duration, f func(c gnet.Conn)) IdleOption {
	checkPositive("OnWriteIdle", d)
	if f == nil {
		panic("gnetwheel: OnWriteIdle called with a nil func")
	}
	return func(i *Idler) { i.writeIdle, i.onWriteIdle = d, f }
}

// MaxLifetime closes the conn on its event loop d after [Idle.Init],
// whatever its traffic; [Idle.Err] then reports [ErrLifetime].
func MaxLifetime(d time.Duration) IdleOption {
	checkPositive("MaxLifetime", d)
	return func(i *Idler) { i.lifetime = d }
}

func checkPositive(what string, d time.Duration) {
	if d <= 0 {
		panic(fmt.Sprintf("gnetwheel: %s called with %v; it must be positive", what, d))
	}
}

// Idler holds what a server's conns share: the hierarchy, the idle timeout
// and the idle events. Make one per server with [Wheel.Idler] and give it
// to every conn's [Idle.Init]. It is safe for concurrent use.
type Idler struct {
	w           *Wheel
	idle        time.Duration
	onReadIdle  func(gnet.Conn)
	writeIdle   time.Duration
	onWriteIdle func(gnet.Conn)
	lifetime    time.Duration
	loops       loops // a runner per event loop
}

// Idler returns the shared settings of conns that are closed once idle has
// passed with no traffic (or, with [OnReadIdle], get a callback), plus
// the events opts add. It panics if idle <= 0 or an option is invalid.
func (w *Wheel) Idler(idle time.Duration, opts ...IdleOption) *Idler {
	checkPositive("Idler", idle)
	i := &Idler{w: w, idle: idle}
	for _, o := range opts {
		o(i)
	}
	return i
}

// Idle is one conn's idle timeout and idle events, held by value in the
// handler's per-conn state (the value of c.Context()). Bind it in OnOpen
// with [Idle.Init], call [Idle.Traffic] from OnTraffic and [Idle.Close]
// from OnClose. All its methods must be called on the conn's event loop,
// as gnet's own Conn methods are; the wheel's callbacks run there too, so
// none of them races with the handler.
//
// How the close reaches the loop: when the timer fires, the goroutine that
// advances the hierarchy queues the conn on its loop's runner (one
// EventLoop.Execute per batch, not per conn). On the loop, the conn is
// closed only if its deadline has passed there too: a Traffic that
// re-armed the timer after it fired moved the deadline past now, and a
// Close marked the Idle closed, so either cancels the close. That is
// guarantee 4 across the hop (API.md, guarantee 14), for a timer that is
// only ever re-armed on the loop: it costs one clock read per firing and
// no lock.
//
// Traffic allocates nothing: it is one [timingwheel.Timer.Reset]. An Idle
// must not be copied once initialized.
type Idle struct {
	read timingwheel.Timer // the idle close, or OnReadIdle
	c    gnet.Conn         // nil once closed
	// ext holds the conn's loop runner and its optional timers. A conn
	// without write idle or lifetime shares its loop's ext, so that the
	// Idle is a Timer and two words, and Init allocates only the callback.
	ext *idleExt
}

// idleExt is an Idle's loop runner and optional timers.
type idleExt struct {
	lr    *loopRun
	x     *Idle // nil in a loop's shared ext
	write timingwheel.Timer
	life  timingwheel.Timer
}

// Init binds x to c, a conn just opened (call it in OnOpen), and arms its
// timers: the idle timeout, and the write-idle and lifetime timers if i has
// them. It returns x. Init allocates the callback that binds the timer to
// x (16 bytes), plus the optional timers if i has them.
func (x *Idle) Init(i *Idler, c gnet.Conn) *Idle {
	if i == nil {
		panic("gnetwheel: Idle.Init called with a nil Idler")
	}
	if c == nil {
		panic("gnetwheel: Idle.Init called with a nil gnet.Conn")
	}
	h := i.w.h
	lr := i.loops.of(c.EventLoop(), i)
	x.c, x.ext = c, &lr.shared
	x.read.Init(h, x.fireRead)
	if i.writeIdle > 0 || i.lifetime > 0 {
		m := &idleExt{lr: lr, x: x}
		x.ext = m
		if i.writeIdle > 0 {
			m.write.Init(h, m.fireWrite)
			m.write.Reset(i.writeIdle)
		}
		if i.lifetime > 0 {
			m.life.Init(h, m.fireLife)
			m.life.Reset(i.lifetime)
		}
	}
	x.read.Reset(i.idle)
	return x
}

// Traffic pushes the idle timeout back to a whole idle from now: call it
// in OnTraffic. If the timer has fired and the close is on its way to the
// loop, this cancels it. Traffic allocates nothing.
func (x *Idle) Traffic() {
	if x.c == nil {
		return // closed: keep the timer stopped
	}
	x.read.Reset(x.ext.lr.cfg.idle)
}

// Wrote pushes the write-idle timer back, after a write made other than
// through [Idle.Write] (Writev, AsyncWrite's callback). Without
// [OnWriteIdle] it does nothing.
func (x *Idle) Wrote() {
	if m := x.ext; x.c != nil && m.x != nil && m.lr.cfg.writeIdle > 0 {
		m.write.Reset(m.lr.cfg.writeIdle)
	}
}

// Write writes p to the conn with c.Write and, if that wrote anything,
// pushes the write-idle timer back.
func (x *Idle) Write(p []byte) (int, error) {
	if x.c == nil {
		return 0, net.ErrClosed
	}
	n, err := x.c.Write(p)
	if n > 0 {
		x.Wrote()
	}
	return n, err
}

// Close stops every timer of x: call it in OnClose. The hierarchy then
// keeps no reference to the conn. Close may be called more than once.
func (x *Idle) Close() {
	x.c = nil
	x.read.Stop()
	if m := x.ext; m != nil && m.x != nil {
		if m.lr.cfg.writeIdle > 0 {
			m.write.Stop()
		}
		if m.lr.cfg.lifetime > 0 {
			m.life.Stop()
		}
	}
}

// Err reports, in OnClose, why the wheel closed the conn: [ErrIdle] or
// [ErrLifetime]; nil if the wheel did not close it (the peer did, or the
// handler), or outside OnClose.
func (x *Idle) Err() error {
	if x.ext != nil && x.ext.lr.closing == x {
		return x.ext.lr.reason
	}
	return nil
}

// Deadline returns when the idle timeout is (or was) due, on the
// hierarchy's clock.
func (x *Idle) Deadline() time.Time { return x.read.Deadline() }

// fireRead, fireWrite and fireLife are the timers' callbacks, on the
// goroutine that advances the hierarchy: they queue the conn on its loop.
func (x *Idle) fireRead()     { x.ext.lr.push((*readDue)(x)) }
func (m *idleExt) fireWrite() { m.lr.push((*writeDue)(m)) }
func (m *idleExt) fireLife()  { m.lr.push((*lifeDue)(m)) }

// readDue, writeDue and lifeDue are the same objects seen as loop items:
// the conversion to loopItem allocates nothing.
type (
	readDue  Idle
	writeDue idleExt
	lifeDue  idleExt
)

// due reports, on the loop, whether t's firing still stands: the conn is
// open and t was not re-armed (by Traffic or Wrote, to a deadline after
// now) since it fired.
func (x *Idle) due(t *timingwheel.Timer) bool {
	return x.c != nil && !x.ext.lr.cfg.w.h.Now().Before(t.Deadline())
}

func (r *readDue) runOnLoop() {
	x := (*Idle)(r)
	if !x.due(&x.read) {
		return
	}
	cfg := x.ext.lr.cfg
	if cfg.onReadIdle != nil {
		x.read.Reset(cfg.idle) // before f, which may Close
		cfg.onReadIdle(x.c)
		return
	}
	x.closeFor(ErrIdle)
}

func (r *writeDue) runOnLoop() {
	m := (*idleExt)(r)
	if !m.x.due(&m.write) {
		return
	}
	cfg := m.lr.cfg
	m.write.Reset(cfg.writeIdle) // f's own write re-arms it again
	cfg.onWriteIdle(m.x.c)
}

func (r *lifeDue) runOnLoop() {
	m := (*idleExt)(r)
	if m.x.due(&m.life) {
		m.x.closeFor(ErrLifetime)
	}
}

// closeFor closes the conn on its loop, now: gnet calls OnClose before
// Close returns, where Err reports why.
func (x *Idle) closeFor(reason error) {
	c, lr := x.c, x.ext.lr
	lr.closing, lr.reason = x, reason
	err := c.EventLoop().Close(c)
	lr.closing, lr.reason = nil, nil
	if err != nil || x.c != nil {
		// The handler's OnClose did not call Close (or gnet reported an
		// error): stop the timers anyway, the conn is gone.
		x.Close()
	}
}
