package timingwheel

import (
	"net"
	"time"
)

// IdleControl is implemented by every conn that [Hierarchy.IdleConn],
// [Hierarchy.IdleListener]'s Accept and [IdlePolicy.Conn] return: reach it
// with a type assertion, c.(timingwheel.IdleControl).
//
// Pause and Resume are how a server tells a conn that is serving a request
// from one idle between requests: a handler slower than idle, or a long
// response streamed to a peer that sends nothing, is not idle. With
// net/http:
//
//	srv := &http.Server{Handler: mux, ConnState: func(c net.Conn, s http.ConnState) {
//		switch s {
//		case http.StateActive:
//			c.(timingwheel.IdleControl).Pause()
//		case http.StateIdle:
//			c.(timingwheel.IdleControl).Resume()
//		}
//	}}
//	srv.Serve(h.IdleListener(ln, 30*time.Second))
//
// Every method is safe for concurrent use; Pause, Resume and SetIdle
// allocate nothing.
type IdleControl interface {
	net.Conn

	// NetConn returns the wrapped conn, as tls.Conn's NetConn does. I/O
	// on it bypasses the wrapper: it does not count as traffic.
	NetConn() net.Conn

	// IdleDeadline returns when the conn is to be closed for being idle
	// (with OnReadIdle: when the next read-idle event is due), on the
	// hierarchy's clock; once the hierarchy has closed it, the deadline it
	// closed it for (idle, or the end of its MaxLifetime). While the conn
	// is paused it returns the zero Time: no idle close is due.
	IdleDeadline() time.Time

	// SetIdle makes d the conn's idle from now on, the current idle
	// period counted afresh from now, as if data had moved: a longer idle
	// after a client authenticated, a shorter one for a client that only
	// probes. The write-idle event and the lifetime are left as they are.
	// On a paused conn it takes effect at Resume. It panics if d <= 0.
	SetIdle(d time.Duration)

	// Pause suspends the idle close and the read- and write-idle events
	// of the conn until Resume; MaxLifetime still applies. A paused conn
	// is never closed for being idle, whatever its silence.
	Pause()

	// Resume ends a Pause: every idle period (the idle close or read-idle
	// event, the write-idle event) starts afresh from the clock's reading
	// in Resume. Resume of a conn that is not paused does the same.
	Resume()
}
