package netidle

import (
	"net"
	"time"
)

// Control is implemented by every conn that [Conn], [Listener]'s Accept and
// [Policy.Conn] return: reach it with a type assertion,
// c.(netidle.Control).
//
// Pause and Resume are how a server tells a conn that is serving a request
// from one idle between requests: a handler slower than idle, or a long
// response streamed to a peer that sends nothing, is not idle. With
// net/http:
//
//	srv := &http.Server{Handler: mux, ConnState: func(c net.Conn, s http.ConnState) {
//		switch s {
//		case http.StateActive:
//			c.(netidle.Control).Pause()
//		case http.StateIdle:
//			c.(netidle.Control).Resume()
//		}
//	}, ReadTimeout: time.Minute, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute}
//	srv.Serve(netidle.Listener(h, ln, 30*time.Second))
//
// A paused conn is never closed for being idle, so the server's own
// per-request limits bound what a pause lets through: ReadTimeout a request
// whose body stalls (the conn is paused from its first byte), and
// ReadHeaderTimeout and WriteTimeout the header and the response.
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
