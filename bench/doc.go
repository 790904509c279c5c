// Package bench compares package timingwheel side by side with Go's runtime
// timers (time.AfterFunc, time.Timer, net.Conn deadlines) and go-zero's
// collection.TimingWheel.
//
// It is a separate module so that the library's own go.mod stays free of the
// comparison libraries. Everything lives in the _test.go files. The full run,
// which also writes docs/benchmarks.md and its plots, is one command:
//
//	cd bench && go run ./cmd/report
//
// It runs each group of benchmarks in its own go test process, six rounds,
// some at -cpu 1,2; see cmd/report for the groups. To run one benchmark by
// hand, for example:
//
//	cd bench && go test -run='^$' -bench='^BenchmarkArmStopParallel$' -cpu 1,2 -count=6
//
// The heap and expiry benchmarks take one measurement per process and are
// meant for -benchtime=1x.
//
// Benchmark names are key=value (impl=wheel|runtime|..., live=N, ...) so
// that benchstat can put the implementations side by side:
//
//	benchstat -col /impl results.txt
//
// Some files build only with a tag, for library features that not every
// version has: idleconn_test.go (-tags idleconn, Hierarchy.IdleConn, which
// the idle-conn rows of BenchmarkHeapPerConn, BenchmarkIdleConnRead and
// BenchmarkServerConnRead need), idleevents_test.go (-tags idleevents) and
// parallelcb_test.go (-tags parallelcallbacks). cmd/report adds each tag
// when its file compiles.
//
// The server shape (server_test.go): timers and idle conns made on one
// goroutine and re-armed from one and from 8 goroutines per core, against
// the runtime's; for example
//
//	cd bench && go test -tags idleconn -run='^$' -bench='^BenchmarkServer(Reset|ConnRead)$' -cpu 1,2 -count 3 -benchtime 0.3s
package bench
