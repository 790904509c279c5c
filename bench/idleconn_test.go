//go:build idleconn

package bench

import (
	"net"
	"time"

	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/netidle"
)

// This file adds api=IdleConn to BenchmarkHeapPerConn and impl=idleconn to
// BenchmarkIdleConnRead. It builds only with -tags idleconn, because
// Hierarchy.IdleConn is not in every version of the library; cmd/report
// adds the tag when this file compiles against the library. A closure
// rather than the method expression, so that it compiles whether IdleConn
// takes options or not.
func init() {
	idleConn = func(h *timingwheel.Hierarchy, c net.Conn, idle time.Duration) net.Conn {
		return netidle.Conn(h, c, idle)
	}
}
