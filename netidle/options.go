package netidle

import (
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/timingwheel/timingwheel/internal/idlestate"
)

// An Option adds an idle event to the conns of [Conn], [Listener] and
// [NewPolicy], as a server's idle handler would (Netty's IdleStateHandler
// has reader-idle, writer-idle and all-idle events):
//
//   - [OnReadIdle] calls a function, instead of closing, each time the
//     conn has read nothing for idle;
//   - [OnWriteIdle] calls one each time nothing has been written for a
//     while: the moment to send a heartbeat (a ping) to the peer;
//   - [MaxLifetime] closes the conn at an age, whatever its traffic, and
//     [MaxLifetimeJitter] spreads that age among conns;
//   - [AllIdle] makes data written count as well as data read, for the
//     idle close or OnReadIdle's event.
//
// Events are never early and at most a tick plus the driver's wake-up late,
// like every timer of the hierarchy. Their functions run on the goroutine
// that advances the hierarchy, one at a time for a conn, and must not block
// it: see [OnWriteIdle] for how to send a ping without blocking. Each
// function is given the conn Conn returned, so that a Write through it
// counts as writing. Close, and Pause, cancel every event whose function
// has not started; the hierarchy keeps no reference to a closed conn.
//
// A conn costs the same with options as without (see [Conn]): its one
// timer is armed for the earliest of its deadlines.
//
// A later option of the same kind replaces an earlier one. A nil Option
// makes Conn, Listener and NewPolicy panic.
type Option interface {
	apply(o *options)
}

type optionFunc func(o *options)

func (f optionFunc) apply(o *options) { f(o) }

// OnReadIdle makes read idle an event instead of a close: when idle (the
// duration given to Conn, Listener or NewPolicy) has passed since the conn
// was wrapped, or since the last Read that returned data, f runs with the
// conn, which stays open; and f runs again each time another idle passes
// with no data read, counted from the previous event. f may close the conn
// (an idle close: Read and Write then return [ErrIdle], and [Control]'s
// IdleDeadline the deadline of the event; a Close from another goroutine
// while f runs is that idle close too), hand a write to another goroutine
// (see [OnWriteIdle]: f must not block), or do nothing. IdleDeadline then reports when the
// next event is due. OnReadIdle panics if f is nil.
func OnReadIdle(f func(c net.Conn)) Option {
	if f == nil {
		panic("netidle: OnReadIdle called with a nil func")
	}
	return optionFunc(func(o *options) { o.onRead = f })
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
// are full does. Not even a Write under a short write deadline will do:
// each peer that reads nothing would hold up every other timer for its
// deadline, one after the other (a thousand such peers, 10 ms each: every
// other conn's close 10 s late). So f only hands the ping over, in one of
// two ways.
//
// A conn with no writer goroutine of its own gets one for the ping:
//
//	var pings sync.WaitGroup // the pings being written, for a server (or a test) to wait for
//	ping := func(c net.Conn) { pings.Go(func() { c.Write(msg) }) }
//
// While that Write waits on a peer that reads nothing, a Write is in
// progress, so the conn is not write idle and no second ping starts: a
// stuck peer holds one goroutine, until it reads or the conn is closed
// (its idle close, or [MaxLifetime]). Such a ping may come between two
// Writes of other goroutines, never inside one (net's and crypto/tls's
// conns do not interleave Writes); a protocol whose messages take several
// Writes hands the ping to the code that writes them.
//
// A conn with a writer goroutine gets the ping there: f sends on a
// buffered channel of one slot that the writer selects on, with a default
// case, so that f never waits (a ping queued already is enough).
//
// Either way the ping is written some time after f returns; it counts as
// written when its Write ends.
//
// OnWriteIdle panics if d <= 0 or f is nil.
func OnWriteIdle(d time.Duration, f func(c net.Conn)) Option {
	if d <= 0 {
		panic(fmt.Sprintf("netidle: OnWriteIdle called with %v; the duration must be positive", d))
	}
	if f == nil {
		panic("netidle: OnWriteIdle called with a nil func")
	}
	return optionFunc(func(o *options) { o.writeIdle, o.onWrite = int64(d), f })
}

// MaxLifetime closes the conn d after it was wrapped (for Listener:
// accepted), whatever its traffic, as SSH and proxy servers cap a
// connection's lifetime. The close is the idle close's: from then on Read
// and Write return an error e with errors.Is(e, [ErrLifetime]) and
// errors.Is(e, os.ErrDeadlineExceeded) that is a [net.Error] whose
// Timeout() is true, and the first Close returns nil. A paused conn is
// closed at the end of its lifetime too. MaxLifetime panics if d <= 0.
func MaxLifetime(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Sprintf("netidle: MaxLifetime called with %v; the duration must be positive", d))
	}
	return optionFunc(func(o *options) { o.lifetime = int64(d) })
}

// MaxLifetimeJitter spreads the lifetimes [MaxLifetime](d) gives, so that
// conns accepted together (clients reconnecting at once after a restart)
// do not reach their end, and reconnect, together again: each conn's
// lifetime is drawn when it is wrapped, uniformly between d−s and d+s,
// where s is f·d (to the nanosecond, rounded down): never less than
// d·(1−f), never more than d·(1+f). gRPC's keepalive.MaxConnectionAge adds such a
// ±10 % jitter for that reason; MaxLifetimeJitter(0.1) is the same spread.
// MaxLifetime without it stays exact, and so does f = 0.
//
// The draw takes math/rand/v2's global source, once per conn: a test that
// needs exact lifetimes leaves the option out, and one of the spread
// checks that each lifetime lies within the bounds above. The conn's
// IdleDeadline after its lifetime close is the end drawn for it.
//
// MaxLifetimeJitter panics if f is not at least 0 and below 1 (NaN
// included). [Conn], [Listener] and [NewPolicy] panic if it is given with
// f > 0 and without MaxLifetime.
func MaxLifetimeJitter(f float64) Option {
	if !(f >= 0 && f < 1) {
		panic(fmt.Sprintf("netidle: MaxLifetimeJitter called with %v; it must be at least 0 and below 1", f))
	}
	return optionFunc(func(o *options) { o.jitter = f })
}

// jitterDraw is the draw of MaxLifetimeJitter: uniform in [0, 1). A
// variable only so that the package's tests can pin its edges.
var jitterDraw = rand.Float64

// drawLifetime returns the lifetime (ns) of a conn wrapped now: lifetime,
// spread by jitter; 0 without MaxLifetime.
func (o *options) drawLifetime() int64 {
	if o.jitter == 0 || o.lifetime == 0 {
		return o.lifetime
	}
	s := min(int64(float64(o.lifetime)*o.jitter), o.lifetime-1) // s < lifetime: the lifetime stays positive
	a := min(int64(jitterDraw()*float64(s)), s)                 // [0, s]; twice a: [0, 2s]
	return idlestate.SatAdd(idlestate.SatAdd(o.lifetime-s, a), a)
}

// AllIdle makes the idle close (or [OnReadIdle]'s event) come once idle
// has passed with no data moved either way, as Netty's all-idle event: a
// Write that wrote data counts as a Read that returned data does, so a conn
// writing a long response or a stream to a silent peer stays open, while
// one whose peer stops reading (its Write blocked) is closed once idle
// has passed. Only data moved counts: an [OnWriteIdle] event that writes
// nothing does not postpone the close. A large Write to a stream socket (TCP, or a Unix socket of
// network "unix") is written, and counted, piece by piece, and data that
// io.Copy moves through the kernel's paths counts as it moves (see [Conn]).
func AllIdle() Option {
	return optionFunc(func(o *options) { o.allIdle = true })
}
