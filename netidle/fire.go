package netidle

import "net"

// fire is the timer's callback: the look at the conn when its earliest
// deadline (as the marks were when the timer was armed) has come. Under mu
// it judges each deadline by the marks and the clock's reading now, which
// is no earlier than the deadline the timer was armed for: the lifetime's
// end closes the conn, and unless the conn is paused, the idle close (or
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
	var now int64 // the clock's reading in this look, once taken
	defer func() {
		if !locked { // an event's function panicked
			c.mu.Lock()
			c.endReadEventLocked(now)
			if c.state.Load()&(timedOut|closed) == 0 {
				c.armLocked()
			}
		}
		c.mu.Unlock()
	}()
	s := c.state.Load()
	if s&(timedOut|closed) != 0 {
		return
	}
	// The deadlines are judged at the instant being fired, the due
	// instant of the deadline the timer was armed for (or the clock, if
	// that is earlier: it went back): one due at a later tick that this
	// Advance reaches waits for the timer armed for it below, and runs
	// there, in order with the other timers.
	nowT := c.h.Now()
	armedT := c.t.Deadline()
	at := c.h.Due(armedT)
	fired := !nowT.Before(at) // else the clock went back, or the timer was armed again meanwhile
	if !fired {
		at = nowT
	}
	origin := c.h.Origin()
	now = int64(nowT.Sub(origin))
	armed, atNs := int64(armedT.Sub(origin)), int64(at.Sub(origin))
	// A deadline no later than the one fired is due by then, one later
	// than the instant fired is not; only one between the two is rounded.
	due := func(d int64) bool {
		switch {
		case d <= armed && fired:
			return true
		case d > atNs:
			return false
		}
		return !c.h.Due(c.at(d)).After(at)
	}
	if o.lifetime > 0 && due(c.end) {
		c.expireLocked(lifeEnded, c.end)
		return
	}
	if s&paused != 0 {
		c.armLocked()
		return
	}
	if d := satAdd(c.idleMark(), c.idle.Load()); due(d) {
		if o.onRead == nil {
			c.expireLocked(0, d)
			return
		}
		c.state.Or(inReadEv)
		c.mu.Unlock()
		locked = false
		o.onRead(c)
		c.mu.Lock()
		locked = true
		c.endReadEventLocked(now)
		if c.state.Load()&(timedOut|closed|paused) != 0 {
			return // f closed or paused the conn (Pause armed the timer)
		}
	}
	if o.writeIdle > 0 {
		switch {
		case c.state.Load() >= writer: // a Write in progress: not idle
			raise(&c.wr, now)
		case due(satAdd(c.wr.Load(), o.writeIdle)):
			raise(&c.wr, now)
			c.mu.Unlock()
			locked = false
			o.onWrite(c)
			c.mu.Lock()
			locked = true
			if c.state.Load()&(timedOut|closed|paused) != 0 {
				return
			}
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
