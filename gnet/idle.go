package gnetwheel

import (
	"fmt"
	"math"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/timingwheel/timingwheel"
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
// its last-activity time and the links of a list, and sits in one of its
// loop's buckets, each a list of Idles due in the same millisecond (or,
// while the deadline is far, the same 64 ms, re-filed as it nears) and one
// timer. Traffic only stores the time: the deadline moves later, so the
// conn stays in its earlier bucket. When a bucket's timer fires, the
// bucket is scanned on the loop (timers of one Idler that fire together
// reach a loop in one EventLoop.Execute): a conn whose idle has passed since its last
// traffic, read there and then, is closed (or gets OnReadIdle); any other
// is moved to the bucket of its new deadline. So a conn is never closed
// early, and traffic that arrives after its bucket fired but before the
// scan keeps it open. Close unlinks the Idle from its bucket.
//
// [Idle.Pause] and [Idle.Resume] tell a conn serving a request (a slow
// reply, a long stream to a silent peer) from one idle between requests,
// as netidle's Control does; [Idle.SetIdle] changes the conn's idle
// (a longer one once the client has authenticated). A paused conn is in no
// bucket: nothing fires for it but its lifetime.
//
// An Idle is 56 bytes and has no timer of its own (unless write idle or a
// lifetime is configured); Traffic allocates nothing, and Pause, Resume
// and SetIdle nothing but, now and then, as buckets are filed and freed,
// the growth of the loop's index of buckets (a map), amortized over them.
// An Idle must not be copied once initialized; go vet reports a copy.
//
// An Idle may be initialized again once Close has returned, for another
// conn (as a pooled session's is), on any loop: nothing queued for its
// earlier conn (a scan, a lifetime close, a write-idle callback on its way
// to the loop) touches the new one. Init panics on an Idle that is in use
// (initialized and not closed).
type Idle struct {
	_    noCopy // go vet reports a copy
	last int64  // last activity (or Resume, SetIdle), ns since the loop's epoch
	idle int64  // ns: the Idler's, until SetIdle
	// In the bucket's list; nil if in none. An open Idle is in a bucket
	// but while it is paused (see paused) and while the wheel closes it.
	next, prev *Idle
	c          gnet.Conn
	// ext holds the conn's loop runner and its optional timers. A conn
	// without write idle or lifetime shares its loop's ext.
	ext *idleExt
}

// noCopy makes go vet's copylocks check report a copy of the struct that
// holds it; it takes no room.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// idleExt is an Idle's loop runner and optional timers. An Idle with
// optional timers gets a new ext from each Init, and Close clears its x:
// so the ext is the generation of the Idle's binding to a conn, and an
// item queued for the loop by an earlier binding's timer finds x nil and
// does nothing (it never reads the Idle, which may be bound again on
// another loop).
type idleExt struct {
	lr    *loopRun
	x     *Idle // nil in a loop's shared ext, and once the Idle is closed
	write timingwheel.Timer
	life  timingwheel.Timer
}

// sentinelExt marks the head of a bucket's list, so that an Idle unlinked
// from its bucket can tell the bucket is empty; the head's last is then
// the bucket's index in its loop's all.
var sentinelExt idleExt

// bucketGrain is the span of deadlines a near bucket holds: a conn is
// closed at most this much later than its idle deadline, plus the wheel's
// lateness and the hop onto the loop. A deadline more than farGrain ahead
// goes to a far bucket, which fires at the start of its farGrain span and
// re-files its conns into near buckets: so a loop has at most
// farGrain/bucketGrain near buckets and idle/farGrain far ones, whatever
// its number of conns, and a conn is scanned at most twice per deadline.
const (
	bucketGrain = time.Millisecond
	farGrain    = 64 * time.Millisecond
)

// bucket is a loop's list of Idles filed for the same instant (see file),
// and the one timer that fires for them all. Loop-owned. A bucket is
// never freed, only reused: its head's last is its index in the loop's
// all, which is how an Idle unlinked from it finds it.
type bucket struct {
	head     Idle  // sentinel
	key      int64 // in the loop's buckets: see file
	scanning bool
	t        timingwheel.Timer
	hop      hop     // t's way onto the loop
	free     *bucket // in the loop's free list
}

func (b *bucket) empty() bool { return b.head.next == &b.head }

// satAdd returns t+d (d >= 0), or the largest int64 if that overflows: an
// idle of math.MaxInt64 ns, "never", stays never.
func satAdd(t, d int64) int64 {
	if t > math.MaxInt64-d {
		return math.MaxInt64
	}
	return t + d
}

// div divides a by g > 0, rounding up if up, else down, also for a
// negative a (a clock before the loop's epoch), which / rounds toward zero.
func div(a, g int64, up bool) int64 {
	q, r := a/g, a%g
	switch {
	case up && r > 0:
		q++
	case !up && r < 0:
		q--
	}
	return q
}

// now is the loop's clock reading, ns since its epoch.
func (l *loopRun) now() int64 { return int64(l.cfg.w.h.Now().Sub(l.epoch)) }

// file puts x, unlinked, in a bucket that fires no later than due, or (a
// near one) within bucketGrain after it; now is the loop's clock.
func (l *loopRun) file(x *Idle, due, now int64) {
	// A bucket's key is its span's number, doubled, plus 1 if far: near
	// and far spans never share a key, on either side of the epoch (a
	// clock.Mock may go back past it).
	var key, at int64
	if due > satAdd(now, int64(farGrain)) {
		k := div(due, int64(farGrain), false) // fires at the start of due's span, <= due
		key, at = 2*k+1, k*int64(farGrain)
	} else {
		k := div(due, int64(bucketGrain), true)
		key, at = 2*k, k*int64(bucketGrain)
	}
	b := l.buckets[key]
	if b == nil {
		if b = l.freeBuckets; b != nil {
			l.freeBuckets, b.free = b.free, nil
		} else {
			b = &bucket{}
			b.head.ext, b.head.last = &sentinelExt, int64(len(l.all))
			l.all = append(l.all, b)
			b.hop = hop{l: l, t: &b.t}
			b.hop.bind(l.cfg.w.h, b.scan)
		}
		b.head.next, b.head.prev = &b.head, &b.head
		b.key = key
		l.buckets[key] = b
		b.t.ResetAt(l.epoch.Add(time.Duration(at)))
	}
	x.prev, x.next = b.head.prev, &b.head
	b.head.prev.next = x
	b.head.prev = x
}

// unlink takes x out of its bucket, freeing the bucket if that emptied it.
func (x *Idle) unlink() {
	n, p := x.next, x.prev
	n.prev, p.next = p, n
	x.next, x.prev = nil, nil
	if n == p && n.ext == &sentinelExt {
		l := x.ext.lr
		if b := l.all[n.last]; !b.scanning {
			l.release(b)
		}
	}
}

// release stops b's timer and puts b in the free list. On the loop, Stop
// also cancels a scan on its way there.
func (l *loopRun) release(b *bucket) {
	b.t.Stop()
	delete(l.buckets, b.key)
	b.free, l.freeBuckets = l.freeBuckets, b
}

// scan runs on the loop when b's timer fires: it closes (or calls
// OnReadIdle for) each conn idle since an idle before now, and re-files
// the others by their last traffic.
func (b *bucket) scan() {
	l := b.hop.l
	delete(l.buckets, b.key) // nothing more is filed here
	b.scanning = true
	cfg := l.cfg
	now := l.now()
	for !b.empty() {
		x := b.head.next
		n := x.next
		n.prev, b.head.next = &b.head, n
		x.next, x.prev = nil, nil
		if due := satAdd(x.last, x.idle); now < due {
			l.file(x, due, now) // lazy: traffic came since it was filed, or a far bucket
			continue
		}
		if cfg.onReadIdle != nil {
			x.last = now
			l.file(x, satAdd(now, x.idle), now) // before f, which may Close or Pause
			cfg.onReadIdle(x.c)
			continue
		}
		x.closeFor(ErrIdle)
	}
	b.scanning = false
	b.free, l.freeBuckets = l.freeBuckets, b
}

// Init binds x to c, a conn just opened (call it in OnOpen, on c's loop),
// and starts its idle timeout, and the write-idle and lifetime timers if i
// has them. It returns x. Without those, Init allocates nothing once the
// loop has buckets to reuse (but for the growth of the loop's index of
// buckets now and then, as Pause). x may be a zero Idle or one whose Close has
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
	h := i.w.h
	lr := i.loops.of(c.EventLoop(), h, i)
	x.c, x.ext = c, &lr.shared
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
	x.last, x.idle = lr.now(), int64(i.idle)
	lr.file(x, satAdd(x.last, x.idle), x.last)
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
	l := x.ext.lr
	if now := l.now(); now >= x.last || x.next == nil {
		x.last = now
		return
	}
	x.restart(l) // in a bucket that may fire after the new deadline
}

// Wrote pushes the write-idle timer back, after a write made other than
// through [Idle.Write] (Writev, AsyncWrite's callback). Without
// [OnWriteIdle], or while the conn is paused, it does nothing.
func (x *Idle) Wrote() {
	if m := x.ext; x.c != nil && m.x != nil && m.lr.cfg.writeIdle > 0 && !x.paused() {
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

// Close takes x out of its bucket and stops its timers: call it in
// OnClose. The hierarchy then keeps no reference to the conn, and nothing
// queued for the conn's loop acts on x any more: once Close has returned,
// x may be initialized again. Close may be called more than once.
func (x *Idle) Close() {
	if m := x.ext; m != nil && m.lr.closing == x {
		m.lr.closed = true // closeFor need not
	}
	x.c = nil
	if x.next != nil {
		x.unlink()
	}
	if m := x.ext; m != nil && m.x != nil {
		m.x = nil // the binding ends: its queued items do nothing
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

// Deadline returns when the idle timeout (or, with [OnReadIdle], the next
// read-idle event) is or was due, on the hierarchy's clock: an idle after
// the last traffic, Resume or SetIdle. While the conn is paused it returns
// the zero Time: no idle close is due.
func (x *Idle) Deadline() time.Time {
	if x.ext == nil || x.paused() {
		return time.Time{}
	}
	return x.ext.lr.epoch.Add(time.Duration(satAdd(x.last, x.idle)))
}

// paused reports whether x is paused: open and in no bucket. Outside
// Pause, an open Idle leaves its bucket only while the loop looks at it
// (a scan, which files it again before it runs OnReadIdle's f) or closes
// it for the wheel (closeFor, which OnClose runs inside).
func (x *Idle) paused() bool {
	return x.c != nil && x.next == nil && x.ext.lr.closing != x
}

// Pause suspends the conn's idle close and its read- and write-idle
// events until [Idle.Resume]: a paused conn is never closed for being
// idle, whatever its silence (a request being served: a handler slower
// than idle, a long response to a peer that sends nothing). Its
// [MaxLifetime] still applies. Traffic and writes while it is paused
// count for nothing; Resume starts afresh. Pause takes the conn out of its
// bucket (and stops its write-idle timer): no lock, no allocation. Pause
// of a paused or closed conn, or from OnClose when the wheel closes it for
// idleness, does nothing. Call it on the conn's loop, as every method of
// Idle.
func (x *Idle) Pause() {
	if x.c == nil || x.next == nil {
		return // closed, paused already, or the wheel is closing it
	}
	x.unlink()
	if m := x.ext; m.x != nil && m.lr.cfg.writeIdle > 0 {
		m.write.Stop() // and a firing on its way to the loop finds x paused
	}
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
	l := x.ext.lr
	if l.closing == x {
		return // a Resume from OnClose: the conn is closing
	}
	x.restart(l)
	if m := x.ext; m.x != nil && l.cfg.writeIdle > 0 {
		m.write.Reset(l.cfg.writeIdle)
	}
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
	x.idle = int64(d)
	if x.c == nil || x.next == nil {
		return // closed, paused (Resume files it), or the wheel is closing it
	}
	x.restart(x.ext.lr)
}

// restart starts x's idle period afresh from now, filing it again: its
// bucket may be later than its new deadline (a shorter idle).
func (x *Idle) restart(l *loopRun) {
	if x.next != nil {
		x.unlink() // before file: an emptied bucket is reused at once
	}
	x.last = l.now()
	l.file(x, satAdd(x.last, x.idle), x.last)
}

// fireWrite and fireLife are the optional timers' callbacks, on the
// goroutine that advances the hierarchy: they queue the conn on its loop.
func (m *idleExt) fireWrite() { m.lr.push((*writeDue)(m), nil) }
func (m *idleExt) fireLife()  { m.lr.push((*lifeDue)(m), nil) }

// writeDue and lifeDue are the same objects seen as loop items: the
// conversion to loopItem allocates nothing. The timer that queued one has
// fired, so the hierarchy no longer counts it: a dropped one has nothing
// to end.
type (
	writeDue idleExt
	lifeDue  idleExt
)

func (*writeDue) drop() {}
func (*lifeDue) drop()  {}

// due reports, on the loop, whether the firing of m's timer t still
// stands: its deadline has come by the clock read here. A firing queued
// before t was re-armed (by Wrote, to a deadline after now) does not. Nor
// does one that reaches the loop after the clock went back before t's
// deadline (a clock.Mock set back): then t is armed again for that
// deadline, unless it is armed already, so that the event comes when the
// clock passes it again, as the hierarchy's own timers do.
func (m *idleExt) due(t *timingwheel.Timer) bool {
	d := t.Deadline()
	if !m.lr.cfg.w.h.Now().Before(d) {
		return true
	}
	t.ResetAt(d) // armed for d: a no-op; fired, and the clock went back: again
	return false
}

func (r *writeDue) runOnLoop() {
	m := (*idleExt)(r)
	if m.x == nil || m.x.paused() || !m.due(&m.write) {
		return // closed (or bound again), paused (Resume re-arms it), or not yet due
	}
	cfg := m.lr.cfg
	m.write.Reset(cfg.writeIdle) // f's own write re-arms it again
	cfg.onWriteIdle(m.x.c)
}

func (r *lifeDue) runOnLoop() {
	m := (*idleExt)(r)
	if m.x != nil && m.due(&m.life) {
		m.x.closeFor(ErrLifetime)
	}
}

// closeFor closes the conn on its loop, now: gnet calls OnClose before
// Close returns, where Err reports why. What OnClose returned counts as it
// does when the peer closes the conn: gnet.Shutdown stops the engine (gnet
// returns it from EventLoop.Close as ErrEngineShutdown).
func (x *Idle) closeFor(reason error) {
	c, lr := x.c, x.ext.lr
	lr.closing, lr.reason, lr.closed = x, reason, false
	err := c.EventLoop().Close(c)
	closed := lr.closed
	lr.closing, lr.reason, lr.closed = nil, nil, false
	if !closed {
		// The handler's OnClose did not call Close (or gnet did not call
		// OnClose): stop the timers anyway, the conn is gone. Once Close
		// has run, x is not touched: it may be bound again already.
		x.Close()
	}
	lr.shutdownAsked(err)
}
