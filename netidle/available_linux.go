package netidle

import (
	"net"
	"syscall"
	"unsafe"
)

// canSplice reports whether the kernel splices between sockets here (see
// available); elsewhere a copy from a socket goes through Read and Write.
const canSplice = true

// available waits until the socket s has received data, or reached its
// end, and returns how many bytes it holds (0 at the end): the bound of
// the next splice from it, which then moves them without waiting. It waits
// as a Read of s does (in the poller, s's read deadline applies) and reads
// nothing: a one-byte peek tells data from the end, and the TIOCINQ
// (FIONREAD) ioctl says how much is queued.
func available(s net.Conn) (int64, error) {
	sc, ok := s.(syscall.Conn)
	if !ok {
		return 0, syscall.EINVAL
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int64
	var serr error
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		m, _, e := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case e == syscall.EAGAIN || e == syscall.EINTR:
			return false // nothing yet: wait in the poller
		case e != nil:
			serr = e
			return true
		case m == 0:
			return true // the end
		}
		var q int32
		// unsafe.Pointer to uintptr in the call's arguments: package
		// unsafe's valid pattern (4) for syscall.Syscall.
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&q))); errno != 0 {
			serr = errno
			return true
		}
		n = max(int64(q), 1)
		return true
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return 0, &net.OpError{Op: "read", Net: s.LocalAddr().Network(), Source: s.LocalAddr(), Addr: s.RemoteAddr(), Err: err}
	}
	return n, nil
}
