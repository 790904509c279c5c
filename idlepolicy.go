package timingwheel

import (
	"fmt"
	"net"
	"time"
)

// An IdlePolicy is an idle timeout and a set of idle events ([IdleOption]s),
// checked once, for the conns of a server: [IdlePolicy.Conn] wraps one conn
// and [IdlePolicy.Listener] every conn a listener accepts. Its conns share
// it by pointer: a conn holds no copy of the options, so a server's conns
// cost the same memory whatever its options. [Hierarchy.IdleConn] and
// [Hierarchy.IdleListener] are shorthands: h.IdleConn(c, idle, opts...) is
// h.IdlePolicy(idle, opts...).Conn(c), and h.IdleListener(l, idle, opts...)
// is h.IdlePolicy(idle, opts...).Listener(l). A server that wraps conns one
// by one (after a handshake, say) makes the policy once and calls Conn for
// each, instead of IdleConn, which makes a policy per call.
//
// An IdlePolicy is immutable and safe for concurrent use. A conn's own
// idle can be changed afterwards with [IdleControl]'s SetIdle.
type IdlePolicy struct {
	h         *Hierarchy
	idle      int64 // ns, > 0
	writeIdle int64 // ns; 0: no write-idle event
	lifetime  int64 // ns; 0: no lifetime
	onRead    func(net.Conn)
	onWrite   func(net.Conn)
	allIdle   bool // a Write with data counts for the idle close too
	// events: an option was given, so the conns are eventConns, kept in
	// shared buckets; otherwise each is an idleConn with a Timer.
	events bool
}

// IdlePolicy returns the policy of conns closed once idle has passed with
// no data read (with [AllIdle]: none moved either way), with the events
// opts add; see [Hierarchy.IdleConn] for what its conns do. It panics if
// idle <= 0 or an option is nil.
func (h *Hierarchy) IdlePolicy(idle time.Duration, opts ...IdleOption) *IdlePolicy {
	return h.idlePolicy("IdlePolicy", idle, opts)
}

// idlePolicy checks and applies the arguments of method (IdleConn,
// IdleListener or IdlePolicy), panicking with a message that names it.
func (h *Hierarchy) idlePolicy(method string, idle time.Duration, opts []IdleOption) *IdlePolicy {
	if h == nil {
		panic("timingwheel: " + method + " called on a nil Hierarchy")
	}
	if idle <= 0 {
		panic(fmt.Sprintf("timingwheel: %s called with idle %v; it must be positive", method, idle))
	}
	p := &IdlePolicy{h: h, idle: int64(idle)}
	for i, o := range opts {
		if o == nil {
			panic(fmt.Sprintf("timingwheel: %s called with a nil IdleOption (option %d)", method, i))
		}
		o.applyIdle(p)
		p.events = true
	}
	return p
}

// Conn returns c wrapped as [Hierarchy.IdleConn] describes, with the
// policy's idle and options, its idle and lifetime counted from now. The
// conn implements [IdleControl]. Conn panics if c is nil.
func (p *IdlePolicy) Conn(c net.Conn) net.Conn {
	if c == nil {
		panic("timingwheel: IdlePolicy.Conn called with a nil net.Conn")
	}
	return p.wrap(c)
}

func (p *IdlePolicy) wrap(c net.Conn) net.Conn {
	if p.events {
		return p.newEventConn(c)
	}
	return p.newIdleConn(c)
}

// Listener returns l wrapped so that every conn its Accept returns is
// wrapped by [IdlePolicy.Conn], its idle (and lifetime) counted from the
// Accept. Its other methods are l's. Listener panics if l is nil.
func (p *IdlePolicy) Listener(l net.Listener) net.Listener {
	if l == nil {
		panic("timingwheel: IdlePolicy.Listener called with a nil net.Listener")
	}
	return &idleListener{Listener: l, p: p}
}

type idleListener struct {
	net.Listener
	p *IdlePolicy
}

// Accept waits for the next connection and returns it wrapped by the
// policy.
func (l *idleListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	return l.p.wrap(c), nil
}
