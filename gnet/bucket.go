package gnetwheel

import (
	"time"

	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/internal/idlestate"
)

// A loop's buckets of Idles: how the gnet module files its conns for their
// next deadline and looks at them on the loop. What is due at a look is
// package idlestate's, shared with package netidle; the filing is the
// module's own, kept by measurement over a Timer per conn (see
// docs/design.md, "The gnet module's idle conns").

// bucketGrain is the span of deadlines a near bucket holds: a conn's
// event comes at most this much later than its deadline, plus the wheel's
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
// never freed, only reused: its head's m.Read is its index in the loop's
// all, which is how an Idle unlinked from it finds it.
type bucket struct {
	head     Idle  // sentinel: its lr is nil
	key      int64 // in the loop's buckets: see file
	scanning bool
	t        timingwheel.Timer
	hop      hop     // t's way onto the loop
	free     *bucket // in the loop's free list
}

func (b *bucket) empty() bool { return b.head.next == &b.head }

// div divides a by g > 0, rounding up if up, else down, also for a
// negative a (a clock before the hierarchy's origin), which / rounds
// toward zero.
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

// now is the loop's clock reading, as a mark: the hierarchy's Elapsed.
func (l *loopRun) now() int64 { return int64(l.cfg.w.h.Elapsed()) }

// state is what the shared idle semantics judge of x.
func (x *Idle) state() idlestate.State {
	return idlestate.State{Marks: x.m, WriteIdle: int64(x.lr.cfg.writeIdle), Paused: x.paused}
}

// fileNext puts x, unlinked, in the bucket of its next deadline, if it has
// one; now is the loop's clock.
func (l *loopRun) fileNext(x *Idle, now int64) {
	s := x.state()
	if due := s.Next(); due != idlestate.Never {
		l.file(x, due, now)
	}
}

// file puts x, unlinked, in a bucket that fires no later than due, or (a
// near one) within bucketGrain after it; now is the loop's clock.
func (l *loopRun) file(x *Idle, due, now int64) {
	// A bucket's key is its span's number, doubled, plus 1 if far: near
	// and far spans never share a key, on either side of the origin (a
	// clock.Mock may go back past it).
	var key, at int64
	if due > idlestate.SatAdd(now, int64(farGrain)) {
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
			b.head.m.Read = int64(len(l.all))
			l.all = append(l.all, b)
			b.hop = hop{l: l, t: &b.t}
			b.hop.bind(l.cfg.w.h, b.scan)
		}
		b.head.next, b.head.prev = &b.head, &b.head
		b.key = key
		l.buckets[key] = b
		b.t.ResetAt(l.cfg.w.h.Origin().Add(time.Duration(at)))
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
	if n == p && n.lr == nil {
		l := x.lr
		if b := l.all[n.m.Read]; !b.scanning {
			l.release(b)
		}
	}
}

// refile files x again for its next deadline, which may be earlier than
// its bucket (a shorter idle, a clock that went back) or none (paused).
func (x *Idle) refile(l *loopRun) {
	if x.next != nil {
		x.unlink() // before file: an emptied bucket is reused at once
	}
	l.fileNext(x, l.now())
}

// release stops b's timer and puts b in the free list. On the loop, Stop
// also cancels a scan on its way there.
func (l *loopRun) release(b *bucket) {
	b.t.Stop()
	delete(l.buckets, b.key)
	b.free, l.freeBuckets = l.freeBuckets, b
}

// scan runs on the loop when b's timer fires: it looks at each conn of b,
// judged at the instant fired.
func (b *bucket) scan() {
	l := b.hop.l
	delete(l.buckets, b.key) // nothing more is filed here
	b.scanning = true
	j := idlestate.NewJudge(l.cfg.w.h, b.t.Deadline())
	for !b.empty() {
		x := b.head.next
		n := x.next
		n.prev, b.head.next = &b.head, n
		x.next, x.prev = nil, nil
		l.look(x, &j)
	}
	b.scanning = false
	b.free, l.freeBuckets = l.freeBuckets, b
}

// look runs what is due for x, unlinked, by its marks (idlestate's
// State.Due), and files it again for its next deadline. An event's
// function runs with x filed already, as it may Close, Pause or SetIdle
// the conn; after the read-idle event's, the write-idle event is judged
// afresh.
func (l *loopRun) look(x *Idle, j *idlestate.Judge) {
	cfg := l.cfg
	from := idlestate.LifetimeEnd
	for {
		s := x.state()
		switch s.Due(j, from) {
		case idlestate.LifetimeEnd:
			x.closeFor(ErrLifetime)
			return
		case idlestate.ReadIdle:
			if cfg.onReadIdle == nil {
				x.closeFor(ErrIdle)
				return
			}
			x.m.Read = max(x.m.Read, j.Now) // the count restarts from the look
			l.fileNext(x, j.Now)
			cfg.onReadIdle(x.c)
			if x.c == nil || x.paused || x.next == nil {
				return // f closed or paused the conn, or the wheel is closing it
			}
			x.unlink()
			from = idlestate.WriteIdle
		case idlestate.WriteIdle:
			x.m.Write = max(x.m.Write, j.Now) // f's own write moves it again
			l.fileNext(x, j.Now)
			cfg.onWriteIdle(x.c)
			return
		default: // None (WriteBusy is netidle's: a gnet Write does not block)
			l.fileNext(x, j.Now)
			return
		}
	}
}
