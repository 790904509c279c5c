package timingwheel

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
)

// The conns of this package hide nothing a server relies on: half-close
// (CloseWrite, CloseRead), io.ReaderFrom and io.WriterTo (so that io.Copy
// to or from a conn keeps the kernel's sendfile and splice paths the
// wrapped conn has), and syscall.Conn (socket options). Data moved by
// ReadFrom and WriteTo counts as traffic once per copyChunk bytes: each
// chunk is one call of the wrapped conn's ReadFrom (or the destination's),
// and the traffic is recorded when it returns.

// copyChunk is how many bytes ReadFrom and WriteTo move per call of the
// fast path below them, and so how often a long copy counts as traffic:
// a copy that moves less than copyChunk bytes per idle period is idle.
// It is internal/poll's splice size, so a chunk adds no splice call; it
// adds a call of the fast path (a pipe taken from the pool and returned,
// or a sendfile call) per MiB, against the hundreds of µs the kernel takes
// to move it (see bench/idlecopy_test.go).
const copyChunk = 1 << 20

// trafficConn is what the copy paths need of the package's conns.
type trafficConn interface {
	net.Conn
	wrapped() net.Conn
	// movedIn records data read from the wrapped conn (not through Read),
	// movedOut data written to it (not through Write).
	movedIn()
	movedOut()
	// countsOut reports whether written data must be recorded: with
	// AllIdle or a write-idle event.
	countsOut() bool
	// closedErr returns the error of op once the hierarchy closed the
	// conn, nil before.
	closedErr(op string) error
}

// fixErr returns the error of op once the hierarchy closed c (the reason
// an operation failed), else err.
func fixErr(c trafficConn, op string, err error) error {
	if err != nil {
		if e := c.closedErr(op); e != nil {
			return e
		}
	}
	return err
}

// kernelCopyable reports whether r may be a source of the kernel's copy
// paths (sendfile from a file, splice from a socket): only then are
// copies chunked; any other reader goes through Write, which counts.
func kernelCopyable(r io.Reader) bool {
	_, ok := r.(syscall.Conn)
	return ok
}

// readFrom is ReadFrom of c: it copies r to the wrapped conn through its
// own ReadFrom (sendfile, splice), in chunks of copyChunk bytes when
// written data counts as traffic, recording each.
func readFrom(c trafficConn, r io.Reader) (int64, error) {
	if err := c.closedErr("readfrom"); err != nil {
		return 0, err
	}
	rf, ok := c.wrapped().(io.ReaderFrom)
	if !ok {
		return io.Copy(writerOnly{c}, r) // Write counts
	}
	if !c.countsOut() {
		n, err := rf.ReadFrom(r)
		return n, fixErr(c, "readfrom", err)
	}
	limit, outer := int64(1<<63-1), (*io.LimitedReader)(nil)
	if lr, ok := r.(*io.LimitedReader); ok {
		outer, limit, r = lr, lr.N, lr.R
	}
	if !kernelCopyable(r) {
		if outer != nil {
			r = outer
		}
		return io.Copy(writerOnly{c}, r)
	}
	chunk := &io.LimitedReader{R: r}
	var total int64
	var err error
	for total < limit {
		chunk.N = min(copyChunk, limit-total)
		want := chunk.N
		var n int64
		n, err = rf.ReadFrom(chunk)
		total += n
		if n > 0 {
			c.movedOut()
		}
		if err != nil || n < want {
			break // an error, or r's end
		}
	}
	if outer != nil {
		outer.N = limit - total
	}
	return total, fixErr(c, "readfrom", err)
}

// writeTo is WriteTo of c: it copies the wrapped conn to w through w's
// ReadFrom (splice) in chunks of copyChunk bytes, recording each as data
// read.
func writeTo(c trafficConn, w io.Writer) (int64, error) {
	if err := c.closedErr("writeto"); err != nil {
		return 0, err
	}
	rf, ok := w.(io.ReaderFrom)
	if !ok || !kernelCopyable(c.wrapped()) {
		return io.Copy(w, readerOnly{c}) // Read counts
	}
	chunk := &io.LimitedReader{R: c.wrapped()}
	var total int64
	for {
		chunk.N = copyChunk
		n, err := rf.ReadFrom(chunk)
		total += n
		if n > 0 {
			c.movedIn()
		}
		if err != nil || n < copyChunk {
			return total, fixErr(c, "writeto", err) // an error, or the end
		}
	}
}

// writerOnly and readerOnly hide a conn's ReadFrom and WriteTo from
// io.Copy, which would call them again.
type writerOnly struct{ io.Writer }
type readerOnly struct{ io.Reader }

// closeWrite shuts down the writing side of c's wrapped conn, as
// *net.TCPConn's CloseWrite does.
func closeWrite(c trafficConn) error {
	if err := c.closedErr("close"); err != nil {
		return err
	}
	if cw, ok := c.wrapped().(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return unsupported(c, "CloseWrite")
}

// closeRead shuts down the reading side of c's wrapped conn.
func closeRead(c trafficConn) error {
	if err := c.closedErr("close"); err != nil {
		return err
	}
	if cr, ok := c.wrapped().(interface{ CloseRead() error }); ok {
		return cr.CloseRead()
	}
	return unsupported(c, "CloseRead")
}

func unsupported(c trafficConn, method string) error {
	return &net.OpError{Op: "close", Net: network(c), Source: c.LocalAddr(), Addr: c.RemoteAddr(),
		Err: fmt.Errorf("timingwheel: the wrapped %T has no %s method: %w", c.wrapped(), method, errors.ErrUnsupported)}
}

func network(c net.Conn) string {
	if a := c.LocalAddr(); a != nil {
		return a.Network()
	}
	return ""
}

// syscallConn returns the raw conn of c's wrapped conn, if it has one, in
// a wrapper whose Read and Write count as traffic. The wrapper hides the
// wrapped conn's file descriptor from package os and net's copy paths
// (which would move data past the conn's accounting): io.Copy from a
// file to the conn still takes sendfile, through ReadFrom.
func syscallConn(c trafficConn) (syscall.RawConn, error) {
	sc, ok := c.wrapped().(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("timingwheel: the wrapped %T is not a syscall.Conn: %w", c.wrapped(), errors.ErrUnsupported)
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
	c  trafficConn
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
