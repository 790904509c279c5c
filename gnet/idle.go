package gnetwheel

import (
	"fmt"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/timingwheel/timingwheel/internal/idlestate"
	"github.com/timingwheel/timingwheel/netidle"
)

// ErrIdle is what [Idle.Err] reports in OnClose when the wheel closed the
// conn for being idle. It is package netidle's [netidle.ErrIdle], the very
// same value, so one test serves a server of either kind:
// errors.Is(err, netidle.ErrIdle) holds, and so does
// errors.Is(err, os.ErrDeadlineExceeded) (it is a net.Error whose Timeout()
// is true: the error a net.Conn's reader sees when a deadline passes).
var ErrIdle = netidle.ErrIdle

// ErrLifetime is as [ErrIdle], for a conn closed at the end of its
// [MaxLifetime]: netidle's [netidle.ErrLifetime].
var ErrLifetime = netidle.ErrLifetime

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
// none of them races with the handler, and nothing here takes a lock.
//
// The idle timeout is lazy, an idle-timeout wheel per loop: an Idle holds
// its marks (the clock at its last traffic, at its last write for
// [OnWriteIdle], the end of its [MaxLifetime]) and the links of a list,
// and sits in one of its loop's buckets, each a list of Idles whose next
// deadline falls in the same millisecond (or, while it is far, the same
// 64 ms, re-filed as it nears) and one timer. Traffic only stores the
// time: the deadline moves later, so the conn stays in its earlier
// bucket. When a bucket's timer fires, the bucket is scanned on the loop
// (timers of one Idler that fire together reach a loop in one
// EventLoop.Execute), and each conn's marks are judged at the instant
// fired, as package netidle judges its conns' (the two share that code):
// a conn whose lifetime has ended, or whose idle has passed since its last
// traffic, is closed (or gets OnReadIdle), a write-idle event that is due
// runs, and the conn is filed again for its next deadline. So a conn is
// never closed early, and traffic that arrives after its bucket fired but
// before the scan keeps it open. Close unlinks the Idle from its bucket.
//
// [Idle.Pause] and [Idle.Resume] tell a conn serving a request (a slow
// reply, a long stream to a silent peer) from one idle between requests,
// as netidle's Control does; [Idle.SetIdle] changes the conn's idle
// (a longer one once the client has authenticated). A paused conn is
// filed only for the end of its lifetime, if it has one.
//
// An Idle is 80 bytes and has no timer of its own, with or without idle
// events; Traffic allocates nothing, and Pause, Resume and SetIdle nothing
// but, now and then, as buckets are filed and freed, the growth of the
// loop's index of buckets (a map), amortized over them. An Idle must not
// be copied once initialized; go vet reports a copy.
//
// An Idle may be initialized again once Close has returned, for another
// conn (as a pooled session's is), on any loop: nothing of its loop refers
// to it once Close has returned. Init panics on an Idle that is in use
// (initialized and not closed).
type Idle struct {
	_ noCopy // go vet reports a copy
	// m is the conn's marks, Elapsed readings of the hierarchy's clock,
	// and its own idle (the Idler's, until SetIdle).
	m idlestate.Marks
	// In the bucket's list; nil if in none. An open Idle is in a bucket
	// but while its loop looks at it (a scan, which files it again before
	// it runs an event's function), while the wheel closes it, and while
	// it has no deadline (paused without a lifetime; an idle of the
	// largest Duration).
	next, prev *Idle
	c          gnet.Conn
	lr         *loopRun // its loop's runner; nil in a bucket's head
	paused     bool
}

// noCopy makes go vet's copylocks check report a copy of the struct that
// holds it; it takes no room.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// Init binds x to c, a conn just opened (call it in OnOpen, on c's loop),
// and starts its idle timeout, its write-idle event and its lifetime, if
// i has them. It returns x. Init allocates nothing once the loop has
// buckets to reuse (but for the growth of the loop's index of buckets now
// and then, as Pause). x may be a zero Idle or one whose Close has
// returned; Init panics if x is in use, or if i or c is nil.
func (x *Idle) Init(i *Idler, c gnet.Conn) *Idle {
	if i == nil {
		panic("gnetwheel: Idle.Init called with a nil Idler")
	}
	if c == nil {
		panic("gnetwheel: Idle.Init called with a nil gnet.Conn")
	}
	if x.c != nil {
		panic("gnetwheel: Idle.Init called on an Idle in use: Close it first (in OnClose)")
	}
	lr := i.loops.of(c.EventLoop(), i.w.h, i)
	x.c, x.lr, x.paused = c, lr, false
	now := lr.now()
	x.m = idlestate.Start(now, int64(i.idle), int64(i.lifetime))
	lr.fileNext(x, now)
	return x
}

// Traffic pushes the idle timeout back to a whole idle from now: call it
// in OnTraffic. It stores the time and nothing else: no lock, no timer, no
// allocation. If the conn's bucket has fired and its scan is on its way to
// the loop, this keeps the conn open. If the clock went back since the
// conn's last traffic (a clock.Mock set back), the new deadline may be
// earlier than its bucket: then Traffic files the conn again.
func (x *Idle) Traffic() {
	if x.c == nil {
		return // closed
	}
	x.moved(&x.m.Read)
}

// moved moves mark m (x's Read or Write) for data moved now, filing x
// again if the clock went back (see idlestate.Moved).
func (x *Idle) moved(m *int64) {
	l := x.lr
	var back bool
	if *m, back = idlestate.Moved(*m, l.now()); back && x.next != nil {
		x.refile(l) // in a bucket that may fire after the new deadline
	}
}

// Wrote pushes the write-idle event back, after a write made other than
// through [Idle.Write] (Writev, AsyncWrite's callback). Without
// [OnWriteIdle] it does nothing; while the conn is paused it counts for
// nothing (Resume starts afresh).
func (x *Idle) Wrote() {
	if x.c != nil && x.lr.cfg.writeIdle > 0 {
		x.moved(&x.m.Write)
	}
}

// Write writes p to the conn with c.Write and, if that wrote anything,
// pushes the write-idle event back.
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

// Close takes x out of its bucket: call it in OnClose. The hierarchy then
// keeps no reference to the conn, and nothing of its loop refers to x:
// once Close has returned, x may be initialized again. Close may be
// called more than once.
func (x *Idle) Close() {
	if l := x.lr; l != nil && l.closing == x {
		l.closed = true // closeFor need not
	}
	x.c = nil
	if x.next != nil {
		x.unlink()
	}
	x.paused = false
}

// Err reports, in OnClose, why the wheel closed the conn: [ErrIdle] or
// [ErrLifetime]; nil if the wheel did not close it (the peer did, or the
// handler), or outside OnClose.
func (x *Idle) Err() error {
	if x.lr != nil && x.lr.closing == x {
		return x.lr.reason
	}
	return nil
}

// Deadline returns when the idle timeout (or, with [OnReadIdle], the next
// read-idle event) is or was due, on the hierarchy's clock: an idle after
// the last traffic, Resume or SetIdle. While the conn is paused it returns
// the zero Time: no idle close is due.
func (x *Idle) Deadline() time.Time {
	if x.lr == nil || x.paused {
		return time.Time{}
	}
	s := x.state()
	return x.lr.cfg.w.h.Origin().Add(time.Duration(s.ReadDeadline()))
}

// Pause suspends the conn's idle close and its read- and write-idle
// events until [Idle.Resume]: a paused conn is never closed for being
// idle, whatever its silence (a request being served: a handler slower
// than idle, a long response to a peer that sends nothing). Its
// [MaxLifetime] still applies. Traffic and writes while it is paused
// count for nothing; Resume starts afresh. Pause files the conn again for
// its lifetime's end only (or takes it out of its bucket): no lock, no
// allocation but as Init. Pause of a paused or closed conn, or from
// OnClose when the wheel closes it, does nothing. Call it on the conn's
// loop, as every method of Idle.
func (x *Idle) Pause() {
	if x.c == nil || x.paused || x.lr.closing == x {
		return // closed, paused already, or the wheel is closing it
	}
	x.paused = true
	x.refile(x.lr)
}

// Resume ends a [Idle.Pause]: every idle period, the idle close's (or
// OnReadIdle's) and OnWriteIdle's, starts afresh from the clock's reading
// in Resume, as if data had moved both ways then. Resume of a conn that is
// not paused does the same. It does nothing on a closed conn, or from
// OnClose while the wheel closes it. It allocates nothing once the loop
// has a bucket to reuse (Pause emptied one, or an earlier bucket fired),
// but for the growth of the loop's index of buckets now and then (see
// Idle).
func (x *Idle) Resume() {
	if x.c == nil {
		return
	}
	l := x.lr
	if l.closing == x {
		return // a Resume from OnClose: the conn is closing
	}
	x.paused = false
	now := l.now()
	x.m.Read, x.m.Write = now, now
	x.refile(l)
}

// SetIdle makes d the conn's idle from now on (a longer one once the
// client has authenticated, a shorter one for a client that only probes):
// the current idle period counts afresh from now, with d, as if data had
// moved. The write-idle event and the lifetime are left as they are. On a
// paused conn it takes effect at Resume. It panics if d <= 0, and
// allocates nothing (as Resume).
func (x *Idle) SetIdle(d time.Duration) {
	if d <= 0 {
		panic(fmt.Sprintf("gnetwheel: Idle.SetIdle called with %v; the idle must be positive", d))
	}
	x.m.Idle = int64(d)
	if x.c == nil || x.paused || x.lr.closing == x {
		return // closed, paused (Resume counts afresh), or the wheel is closing it
	}
	l := x.lr
	x.m.Read = l.now()
	x.refile(l)
}

// closeFor closes the conn on its loop, now: gnet calls OnClose before
// Close returns, where Err reports why. What OnClose returned counts as it
// does when the peer closes the conn: gnet.Shutdown stops the engine (gnet
// returns it from EventLoop.Close as ErrEngineShutdown).
func (x *Idle) closeFor(reason error) {
	c, lr := x.c, x.lr
	lr.closing, lr.reason, lr.closed = x, reason, false
	err := c.EventLoop().Close(c)
	closed := lr.closed
	lr.closing, lr.reason, lr.closed = nil, nil, false
	if !closed {
		// The handler's OnClose did not call Close (or gnet did not call
		// OnClose): take x out anyway, the conn is gone. Once Close has
		// run, x is not touched: it may be bound again already.
		x.Close()
	}
	lr.shutdownAsked(err)
}
