// Package bench compares package timingwheel side by side with Go's runtime
// timers (time.AfterFunc) and go-zero's collection.TimingWheel.
//
// It is a separate module so that the library's own go.mod stays free of the
// comparison libraries. Everything lives in the _test.go files; run
//
//	cd bench && GOMAXPROCS=2 go test -run='^$' -bench=. -count=5
//
// or let cmd/report run them and write docs/benchmarks.md:
//
//	cd bench && go run ./cmd/report
//
// Benchmark names are key=value (impl=wheel|runtime|gozero, live=N, ...) so
// that benchstat can put the implementations side by side:
//
//	benchstat -col '/impl@(runtime wheel gozero)' results.txt
package bench
