package netidle

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"syscall"
)

// The conns of this package hide nothing a server relies on: half-close
// (CloseWrite, CloseRead), io.ReaderFrom and io.WriterTo (so that io.Copy
// to or from a conn keeps the kernel's sendfile and splice paths the
// wrapped conn has), and syscall.Conn (socket options). Data moved by
// ReadFrom and WriteTo counts as traffic as it moves:
//
//   - from a socket (splice), each call of the kernel's path is bounded by
//     what the source socket has received when it is made (see
//     available): it moves that and returns, and the data is recorded,
//     before the next waits for more. A trickle of a few bytes is counted
//     as each arrives, and a bulk copy moves a socket buffer's worth per
//     call;
//   - from a file (sendfile), each call moves at most sendPiece bytes: a
//     file is always ready, so the call waits only for the destination's
//     room, as a Write of that many bytes would.

// writePiece is the largest piece a Write under AllIdle hands to a stream
// socket at once, and sendPiece the largest sendfile call: the most data
// that moves before it is recorded.
const (
	writePiece = 256 << 10
	sendPiece  = 256 << 10
)

// spliceable returns r as a socket the kernel splices from, or nil: what
// net's ReadFrom splices, a *net.TCPConn, a Unix stream *net.UnixConn, or
// the conn with its WriteTo hidden that *net.TCPConn's WriteTo hands to
// io.Copy (which is how io.Copy(conn, tcpConn) reaches ReadFrom): a TCP
// conn of a type of package net, which reads its socket and nothing else.
// A conn of another package may hold bytes it has read from the socket (a
// sniffing proxy's peeked prefix), which a copy bounded by what the socket
// holds would wait behind: it is copied through its Read.
func spliceable(r io.Reader) net.Conn {
	c, ok := r.(net.Conn)
	switch {
	case !ok:
		return nil
	case isStream(c):
		return c
	}
	if _, tcp := c.LocalAddr().(*net.TCPAddr); tcp && reflect.TypeOf(r).PkgPath() == "net" {
		return c
	}
	return nil
}

// regularFile returns r as a regular file sendfile can read, or nil: an
// *os.File, or what its WriteTo hands to io.Copy (the file with its
// WriteTo hidden), which is how io.Copy(conn, file) reaches ReadFrom.
func regularFile(r io.Reader) io.Reader {
	f, ok := r.(interface {
		syscall.Conn
		Stat() (os.FileInfo, error)
	})
	if !ok {
		return nil
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	return r
}

// ReadFrom copies r to c (sendfile, splice) through c's own ReadFrom, as
// io.Copy would, counting data written as it moves when written data
// counts (AllIdle, OnWriteIdle).
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if err := c.closedErr("readfrom"); err != nil {
		return 0, err
	}
	rf, ok := c.Conn.(io.ReaderFrom)
	if !ok {
		return io.Copy(writerOnly{c}, r) // Write counts
	}
	if !c.o.countsOut() {
		n, err := rf.ReadFrom(r)
		return n, c.fixErr("readfrom", err)
	}
	limit, outer := int64(1<<63-1), (*io.LimitedReader)(nil)
	if lr, ok := r.(*io.LimitedReader); ok {
		outer, limit, r = lr, lr.N, lr.R
	}
	var next func(int64) (int64, error)
	if f := regularFile(r); f != nil {
		next = func(int64) (int64, error) { return sendPiece, nil }
	} else if s := spliceable(r); s != nil && canSplice {
		next = func(int64) (int64, error) { return available(s) }
	} else {
		return c.copyThrough(outer, r)
	}
	total, err := c.pieces(rf, r, limit, next)
	if outer != nil {
		outer.N = limit - total
	}
	return total, c.fixErr("readfrom", err)
}

// copyThrough copies r (or outer, the LimitedReader it came in) to c
// through c's Write, which counts.
func (c *conn) copyThrough(outer *io.LimitedReader, r io.Reader) (int64, error) {
	if outer != nil {
		r = outer
	}
	return io.Copy(writerOnly{c}, r)
}

// pieces copies up to limit bytes of r to the wrapped conn by rf, in calls
// of at most next() bytes each (0: r's end), recording each call's data.
func (c *conn) pieces(rf io.ReaderFrom, r io.Reader, limit int64, next func(int64) (int64, error)) (int64, error) {
	piece := &io.LimitedReader{R: r}
	var total int64
	for total < limit {
		k, err := next(limit - total)
		if err != nil || k == 0 {
			return total, err
		}
		piece.N = min(k, limit-total)
		want := piece.N
		// In progress, as a Write, while it moves data, not while next
		// waits for the source: then nothing is being written.
		if c.o.writeIdle > 0 {
			c.state.Add(writer)
		}
		n, err := rf.ReadFrom(piece)
		if c.o.writeIdle > 0 {
			c.state.Add(^uint32(writer - 1)) // minus writer
		}
		total += n
		if n > 0 {
			c.movedOut()
		}
		if err != nil || n < want {
			return total, err // an error, or r's end
		}
	}
	return total, nil
}

// WriteTo copies c to w: through w's ReadFrom (splice) when c's wrapped
// conn is a socket the kernel splices from, in calls bounded by what it
// has received, each recorded as data read; through c's Read otherwise.
func (c *conn) WriteTo(w io.Writer) (int64, error) {
	if err := c.closedErr("writeto"); err != nil {
		return 0, err
	}
	rf, ok := w.(io.ReaderFrom)
	s := spliceable(c.Conn)
	if !ok || s == nil || !canSplice {
		return io.Copy(w, readerOnly{c}) // Read counts
	}
	piece := &io.LimitedReader{R: s}
	var total int64
	for {
		k, err := available(s)
		if err != nil || k == 0 {
			return total, c.fixErr("writeto", err)
		}
		piece.N = k
		n, err := rf.ReadFrom(piece)
		total += n
		if n > 0 {
			c.movedIn()
		}
		if err != nil {
			return total, c.fixErr("writeto", err)
		}
	}
}

// writerOnly and readerOnly hide a conn's ReadFrom and WriteTo from
// io.Copy, which would call them again.
type writerOnly struct{ io.Writer }
type readerOnly struct{ io.Reader }

// CloseWrite shuts down the writing side of c, as *net.TCPConn's
// CloseWrite does.
func (c *conn) CloseWrite() error {
	var f func() error
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		f = cw.CloseWrite
	}
	return c.closeHalf("CloseWrite", f)
}

// CloseRead shuts down the reading side of c.
func (c *conn) CloseRead() error {
	var f func() error
	if cr, ok := c.Conn.(interface{ CloseRead() error }); ok {
		f = cr.CloseRead
	}
	return c.closeHalf("CloseRead", f)
}

// closeHalf runs f, the wrapped conn's method, unless the hierarchy closed
// c; with no such method (f nil), an error that says so.
func (c *conn) closeHalf(method string, f func() error) error {
	if err := c.closedErr("close"); err != nil {
		return err
	}
	if f == nil {
		return c.unsupported(method)
	}
	return f()
}

func (c *conn) unsupported(method string) error {
	e := &net.OpError{Op: "close", Source: c.LocalAddr(), Addr: c.RemoteAddr(),
		Err: fmt.Errorf("netidle: the wrapped %T has no %s method: %w", c.Conn, method, errors.ErrUnsupported)}
	if a := c.LocalAddr(); a != nil {
		e.Net = a.Network()
	}
	return e
}

// SyscallConn returns the raw conn of c's wrapped conn, if it has one, in a
// wrapper whose Read and Write count as traffic. The wrapper hides the
// wrapped conn's file descriptor from package os and net's copy paths
// (which would move data past the conn's accounting): io.Copy from a file
// to the conn still takes sendfile, through ReadFrom.
func (c *conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("netidle: the wrapped %T is not a syscall.Conn: %w", c.Conn, errors.ErrUnsupported)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &rawConn{rc, c}, nil
}

// rawConn is the syscall.RawConn of a conn of this package: each Read or
// Write call that returns no error counts as data moved (the bytes are
// the caller's syscalls': the wrapper cannot see them).
type rawConn struct {
	rc syscall.RawConn
	c  *conn
}

func (r *rawConn) Control(f func(fd uintptr)) error { return r.rc.Control(f) }

func (r *rawConn) Read(f func(fd uintptr) (done bool)) error {
	err := r.rc.Read(f)
	if err == nil {
		r.c.movedIn()
	}
	return err
}

func (r *rawConn) Write(f func(fd uintptr) (done bool)) error {
	err := r.rc.Write(f)
	if err == nil {
		r.c.movedOut()
	}
	return err
}
