//go:build idleconn

package bench

import (
	"net"
	"time"

	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/netidle"
)

// This file adds api=IdleConn to BenchmarkHeapPerConn, impl=idleconn to
// BenchmarkIdleConnRead and impl=wheel to BenchmarkServerConnRead. It builds
// only with -tags idleconn, because Hierarchy.IdleConn is not in every
// version of the library; cmd/report adds the tag when this file compiles
// against the library. A closure rather than the method expression, so
// that it compiles whether IdleConn takes options or not.
//
// This is the one place the benchmarks name the library's idle conn: when it
// moves (to netidle.Conn(h, c, idle)), change the return line and the import.
func init() {
	idleConn = func(h *timingwheel.Hierarchy, c net.Conn, idle time.Duration) net.Conn {
		return netidle.Conn(h, c, idle)
	}
}
