package netidle

import (
	"fmt"
	"net"
	"time"

	"github.com/timingwheel/timingwheel"
)

// A Policy is an idle timeout and a set of idle events ([Option]s), checked
// once, for the conns of a server: [Policy.Conn] wraps one conn and
// [Policy.Listener] every conn a listener accepts. Its conns share it by
// pointer: a conn holds no copy of the options, so a server's conns cost
// the same memory whatever its options. [Conn] and [Listener] are
// shorthands: Conn(h, c, idle, opts...) is NewPolicy(h, idle,
// opts...).Conn(c), and Listener(h, l, idle, opts...) is NewPolicy(h,
// idle, opts...).Listener(l). A server that wraps conns one by one (after a
// handshake, say) makes the policy once and calls its Conn for each.
//
// A Policy is immutable and safe for concurrent use. A conn's own idle can
// be changed afterwards with [Control]'s SetIdle.
type Policy struct {
	h    *timingwheel.Hierarchy
	idle int64   // ns, > 0
	o    options // its conns point here
}

// options are the events and counting a policy's Options set, which its
// conns share by pointer. A Conn given options has a set of its own, made
// by itself (48 bytes); one given none, and every conn of a Policy, makes
// none.
type options struct {
	writeIdle int64 // ns; 0: no write-idle event
	lifetime  int64 // ns; 0: no lifetime
	onRead    func(net.Conn)
	onWrite   func(net.Conn)
	allIdle   bool    // a Write with data counts for the idle close too
	jitter    float64 // MaxLifetimeJitter's f; 0: the lifetime is exact
}

// NewPolicy returns the policy of conns closed once idle has passed with no
// data read (with [AllIdle]: none moved either way), with the events opts
// add; see [Conn] for what its conns do. It panics if h is nil, idle <= 0
// or an option is nil.
func NewPolicy(h *timingwheel.Hierarchy, idle time.Duration, opts ...Option) *Policy {
	return newPolicy("NewPolicy", h, idle, opts)
}

// newPolicy checks and applies the arguments of function (Conn, Listener
// or NewPolicy), panicking with a message that names it.
func newPolicy(function string, h *timingwheel.Hierarchy, idle time.Duration, opts []Option) *Policy {
	checkArgs(function, h, idle)
	p := &Policy{h: h, idle: int64(idle)}
	p.o.apply(function, opts)
	return p
}

// apply applies opts to o, panicking with a message that names function
// if one is nil.
func (o *options) apply(function string, opts []Option) {
	for i, opt := range opts {
		if opt == nil {
			panic(fmt.Sprintf("netidle: %s called with a nil Option (option %d)", function, i))
		}
		opt.apply(o)
	}
	if o.jitter > 0 && o.lifetime == 0 {
		panic(fmt.Sprintf("netidle: %s called with MaxLifetimeJitter(%v) but without MaxLifetime: there is no lifetime to spread", function, o.jitter))
	}
}

// checkArgs panics, naming function, if h is nil or idle is not positive.
func checkArgs(function string, h *timingwheel.Hierarchy, idle time.Duration) {
	if h == nil {
		panic("netidle: " + function + " called with a nil Hierarchy")
	}
	if idle <= 0 {
		panic(fmt.Sprintf("netidle: %s called with idle %v; it must be positive", function, idle))
	}
}

// wrap returns c wrapped with p's idle and options.
func (p *Policy) wrap(c net.Conn) net.Conn { return wrap(p.h, c, p.idle, &p.o) }

// noOptions is the options of every conn wrapped with none by [Conn].
var noOptions = &options{}

// Conn returns c wrapped as [Conn] describes, with the policy's idle and
// options, its idle and lifetime counted from now. The conn implements
// [Control]. Conn panics if c is nil.
func (p *Policy) Conn(c net.Conn) net.Conn {
	if c == nil {
		panic("netidle: Policy.Conn called with a nil net.Conn")
	}
	return p.wrap(c)
}

// Listener returns l wrapped so that every conn its Accept returns is
// wrapped by [Policy.Conn], its idle (and lifetime) counted from the
// Accept. Its other methods are l's. Listener panics if l is nil.
func (p *Policy) Listener(l net.Listener) net.Listener {
	if l == nil {
		panic("netidle: Policy.Listener called with a nil net.Listener")
	}
	return &listener{Listener: l, p: p}
}

type listener struct {
	net.Listener
	p *Policy
}

// Accept waits for the next connection and returns it wrapped by the
// policy.
func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	return l.p.wrap(c), nil
}

// countsOut reports whether data written is recorded: with AllIdle or a
// write-idle event.
func (o *options) countsOut() bool { return o.allIdle || o.writeIdle > 0 }
