package netidle

import (
	"net"
	"time"
)

// Control is implemented by every conn that [Conn], [Listener]'s Accept and
// [Policy.Conn] return: reach it with a type assertion,
// c.(netidle.Control), or with [ControlOf], which also finds it under a
// *tls.Conn.
//
// Pause and Resume are how a server tells a conn that is serving a request
// from one idle between requests: a handler slower than idle, or a long
// response streamed to a peer that sends nothing, is not idle. With
// net/http:
//
//	srv := &http.Server{Handler: mux, ConnState: func(c net.Conn, s http.ConnState) {
//		ctl, ok := netidle.ControlOf(c) // also under ServeTLS's *tls.Conn
//		if !ok {
//			return
//		}
//		switch s {
//		case http.StateActive:
//			ctl.Pause()
//		case http.StateIdle, http.StateHijacked:
//			ctl.Resume()
//		}
//	}, ReadTimeout: time.Minute, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute}
//	srv.Serve(netidle.Listener(h, ln, 30*time.Second))
//
// A paused conn is never closed for being idle, so the server's own
// per-request limits bound what a pause lets through: ReadTimeout a request
// whose body stalls (the conn is paused from its first byte), and
// ReadHeaderTimeout and WriteTimeout the header and the response. A
// hijacked conn (a WebSocket) was paused as the request that hijacked it
// began, and net/http tells of it no more: Resume gives it the idle close
// again (its handler may Pause it, or SetIdle, itself).
//
// With TLS, keep the netidle conns under the TLS ones: srv.ServeTLS (or
// srv.Serve of tls.NewListener) over a netidle Listener. http.Server finds
// TLS (r.TLS, HTTP/2 by ALPN) only in a *tls.Conn it is given, which a
// netidle conn wrapping a *tls.Conn hides.
//
// Every method is safe for concurrent use; Pause, Resume and SetIdle
// allocate nothing.
type Control interface {
	net.Conn

	// NetConn returns the wrapped conn, as tls.Conn's NetConn does. I/O
	// on it bypasses the wrapper: it does not count as traffic.
	NetConn() net.Conn

	// IdleDeadline returns when the conn is to be closed for being idle
	// (with OnReadIdle: when the next read-idle event is due), on the
	// hierarchy's clock; once the hierarchy has closed it, the deadline it
	// closed it for (idle, or the end of its MaxLifetime), which nothing
	// moves afterwards. While the conn is paused it returns the zero Time:
	// no idle close is due.
	IdleDeadline() time.Time

	// SetIdle makes d the conn's idle from now on, the current idle
	// period counted afresh from now, as if data had moved: a longer idle
	// after a client authenticated, a shorter one for a client that only
	// probes. It takes effect at once, as one step: no idle close or
	// read-idle event is judged by the new idle from the old start, or by
	// the old idle. The write-idle event and the lifetime are left as they
	// are. On a paused conn it takes effect at Resume; on a closed one it
	// does nothing. It panics if d <= 0.
	SetIdle(d time.Duration)

	// Pause suspends the idle close and the read- and write-idle events
	// of the conn until Resume; MaxLifetime still applies. A paused conn
	// is never closed for being idle, whatever its silence, and no idle
	// event whose function has not started when Pause returns runs while
	// it is paused.
	Pause()

	// Resume ends a Pause: every idle period (the idle close or read-idle
	// event, the write-idle event) starts afresh from the clock's reading
	// in Resume. Resume of a conn that is not paused does the same.
	Resume()
}

// ControlOf returns the Control of c: c itself if it is one (a conn of
// this package), else the first one under it, following NetConn (as a
// *tls.Conn has, and as every Control has) down at most 16 conns. It
// reports false if there is none: c is not wrapped by this package.
func ControlOf(c net.Conn) (Control, bool) {
	for range 16 {
		if ctl, ok := c.(Control); ok {
			return ctl, true
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil, false
		}
		if c = u.NetConn(); c == nil {
			return nil, false
		}
	}
	return nil, false
}
