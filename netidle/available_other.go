//go:build !linux

package netidle

import "net"

// canSplice reports whether the kernel splices between sockets here: only
// Linux does, so elsewhere a copy from a socket goes through Read and
// Write, which count, as the wrapped conn's own copy would.
const canSplice = false

func available(net.Conn) (int64, error) { panic("unreachable") }
