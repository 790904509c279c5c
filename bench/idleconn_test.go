//go:build idleconn

package bench

import "github.com/timingwheel/timingwheel"

// This file adds api=IdleConn to BenchmarkHeapPerConn and impl=idleconn to
// BenchmarkIdleConnRead. It builds only with -tags idleconn, because
// Hierarchy.IdleConn is not in every version of the library; cmd/report
// adds the tag when this file compiles against the library.
func init() {
	idleConn = (*timingwheel.Hierarchy).IdleConn
}
