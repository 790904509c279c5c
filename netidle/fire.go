package netidle

import (
	"net"

	"github.com/timingwheel/timingwheel/internal/idlestate"
)

// fire is the timer's callback: the look at the conn when its earliest
// deadline (as the marks were when the timer was armed) has come. Under mu
// it asks the shared idle semantics (package idlestate: State.Due, judged
// at the tick being fired) what is due by the marks: the lifetime's end
// closes the conn, and unless the conn is paused, the idle close (or
// read-idle event) and then the write-idle event come if their deadlines
// have passed. The timer is then armed for the next deadline.
//
// Each decision is taken under mu and acted on before mu is let go, but for
// an event's function, which runs without it (it may Close, Pause or
// SetIdle the conn): the decision to run it is its start, so a Pause or
// Close that returned before it cancels it, and one that comes after finds
// it started, as Timer.Stop finds a started callback. After the read-idle
// event, the write-idle event is decided afresh under mu. If a function
// panics, the timer is armed again first, so the conn keeps its events.
func (c *conn) fire() {
	o := c.o
	c.mu.Lock()
	locked := true
	var j idlestate.Judge // the look's instant and clock reading, once taken
	defer func() {
		if !locked { // an event's function panicked
			c.mu.Lock()
			c.endReadEventLocked(j.Now)
			if c.state.Load()&(timedOut|closed) == 0 {
				c.armLocked()
			}
		}
		c.mu.Unlock()
	}()
	if c.state.Load()&(timedOut|closed) != 0 {
		return
	}
	j = idlestate.NewJudge(c.h, c.t.Deadline())
	s := c.stateLocked()
	ev := s.Due(&j, idlestate.LifetimeEnd)
	switch ev {
	case idlestate.LifetimeEnd:
		c.expireLocked(lifeEnded, c.end)
		return
	case idlestate.ReadIdle:
		if o.onRead == nil {
			c.expireLocked(0, s.ReadDeadline())
			return
		}
		c.state.Or(inReadEv)
		c.mu.Unlock()
		locked = false
		o.onRead(c)
		c.mu.Lock()
		locked = true
		c.endReadEventLocked(j.Now)
		if c.state.Load()&(timedOut|closed|paused) != 0 {
			return // f closed or paused the conn (Pause armed the timer)
		}
		s = c.stateLocked()
		ev = s.Due(&j, idlestate.WriteIdle)
	}
	switch ev {
	case idlestate.WriteBusy: // a Write in progress: not idle
		raise(&c.wr, j.Now)
	case idlestate.WriteIdle:
		raise(&c.wr, j.Now)
		c.mu.Unlock()
		locked = false
		o.onWrite(c)
		c.mu.Lock()
		locked = true
		if c.state.Load()&(timedOut|closed|paused) != 0 {
			return
		}
	}
	c.armLocked()
}

// endReadEventLocked ends OnReadIdle's event, if one is running: the
// event restarts the count from now, the look's clock reading (a Read
// with data since, or SetIdle or Resume from f, moved rd later already).
// rd moves only once f has returned, so that while f runs the conn's idle
// deadline is the one the event runs for: a Close meanwhile is the idle
// close for it (see Close). c.mu must be held.
func (c *conn) endReadEventLocked(now int64) {
	if c.state.Load()&inReadEv != 0 {
		c.state.And(^uint32(inReadEv))
		raise(&c.rd, now)
	}
}

// expireLocked closes the conn as the idle close does (why: 0, or
// lifeEnded), for the deadline at. The flag goes up before c is closed, so
// a Read or Write that fails because of the close reports the timeout.
// c.mu must be held; it is held across the wrapped conn's Close, so that a
// Close of the conn returns after it.
//
// The close runs on the goroutine that advances the hierarchy, so it must
// not wait on the peer. A layered conn's Close may: a *tls.Conn's sends a
// close_notify alert, and waits up to 5 s for a peer that reads nothing.
// So for a conn that has a NetConn method (*tls.Conn, a conn of this
// package) the conn under it is closed first: the layer's Close then
// fails its write at once and only releases what it holds. A peer idle
// long enough to be closed gets no close_notify.
func (c *conn) expireLocked(why uint32, at int64) {
	c.end = at
	c.state.Or(timedOut | why)
	if l, ok := c.Conn.(interface{ NetConn() net.Conn }); ok {
		if under := l.NetConn(); under != nil {
			under.Close()
		}
	}
	c.Conn.Close()
}
