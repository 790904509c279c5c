//go:build idleevents

package bench

import (
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel/netidle"
)

// Idle events (OnReadIdle, OnWriteIdle, MaxLifetime) against what servers
// write without them: a time.Ticker per connection for the ping and
// SetReadDeadline for the close. This file builds only with -tags
// idleevents, because the options are not in every version of the library:
//
//	cd bench && go test -tags idleevents -run '^$' -bench 'IdleEvents' -benchtime 1x ./...   # heap
//	cd bench && go test -tags idleevents -run '^$' -bench 'IdleEventsRearm|IdleEventsIO' -count 8 ./...

// pingEvery is the write-idle time of the benchmarks: a WebSocket server's
// ping period.
const pingEvery = 15 * time.Second

// sharedIdle is the read-idle time of the benchmarks' conns that share one.
const sharedIdle = 45 * time.Second

// heapAndStack returns HeapAlloc and StackInuse after a GC.
func heapAndStack() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse
}

// BenchmarkHeapIdleEvents reports what each way of keeping a read-idle
// close and a write-idle ping per connection adds per connection, for
// 10,000 open TCP connections (1,000 if they do not fit): heap bytes
// (B/conn) and goroutine stack bytes (stack-B/conn), after a GC, before and
// after arming, divided by the count. The connections are open before the
// first reading.
//
//   - impl=wheel/api=IdleConn+OnWriteIdle: netidle.Conn(h, c, idle,
//     OnWriteIdle(ping, f)), the wrapper that closes on read idle and
//     calls f on write idle; no goroutine. idle=shared: every conn has the
//     same idle, as a server's have (IdleListener's always do); the conns
//     share one config. idle=per-conn: each its own 30–60 s, so each
//     conn has a config of its own.
//   - impl=runtime/api=Ticker+SetReadDeadline: time.NewTicker(ping) and
//     c.SetReadDeadline: the ticker alone, for a server whose per-conn
//     writer goroutine exists anyway. SetReadDeadline's runtime timer lives
//     in the conn's poll descriptor, outside the Go heap, and costs nothing
//     here.
//   - impl=runtime/api=Ticker+SetReadDeadline+goroutine: plus the goroutine
//     that waits on the ticker's channel to write the ping (gorilla/
//     websocket's chat example has it, as writePump), for a server that
//     needs no writer goroutine otherwise.
func BenchmarkHeapIdleEvents(b *testing.B) {
	set, size := openLargestConns(b)
	if set == nil {
		return
	}
	n := len(set.conns)
	// One option for every conn, as IdleListener applies its options once.
	onWriteIdle := netidle.OnWriteIdle(pingEvery, func(net.Conn) {})
	// What callers hold anyway, a handle per conn, is allocated before the
	// first reading.
	wrapped := make([]net.Conn, n)
	tickers := make([]*time.Ticker, n)
	for _, api := range []string{"wheel/api=IdleConn+OnWriteIdle/idle=shared", "wheel/api=IdleConn+OnWriteIdle/idle=per-conn",
		"runtime/api=Ticker+SetReadDeadline", "runtime/api=Ticker+SetReadDeadline+goroutine"} {
		b.Run("impl="+api+"/"+size, func(b *testing.B) {
			b.ReportAllocs()
			var perConn, stackPerConn float64
			for b.Loop() {
				heap0, stack0 := heapAndStack()
				var disarm func()
				switch api {
				case "wheel/api=IdleConn+OnWriteIdle/idle=shared", "wheel/api=IdleConn+OnWriteIdle/idle=per-conn":
					h := startedWheel(b)
					perConnIdle := api == "wheel/api=IdleConn+OnWriteIdle/idle=per-conn"
					for i, c := range set.conns {
						idle := sharedIdle
						if perConnIdle {
							idle = farDuration(i)
						}
						wrapped[i] = netidle.Conn(h, c, idle, onWriteIdle)
					}
					disarm = func() {
						h.Stop() // the wrappers are dropped, not closed: that would close the conns
						clear(wrapped)
					}
				default:
					withGoroutine := api == "runtime/api=Ticker+SetReadDeadline+goroutine"
					done := make(chan struct{})
					now := time.Now()
					for i, c := range set.conns {
						c.SetReadDeadline(now.Add(farDuration(i)))
						t := time.NewTicker(pingEvery)
						tickers[i] = t
						if withGoroutine {
							go func() {
								for {
									select {
									case <-t.C:
									case <-done:
										return
									}
								}
							}()
						}
					}
					disarm = func() {
						close(done)
						for i, c := range set.conns {
							tickers[i].Stop()
							c.SetReadDeadline(time.Time{})
						}
						clear(tickers)
					}
				}
				heap1, stack1 := heapAndStack()
				disarm()
				perConn += (float64(heap1) - float64(heap0)) / float64(n)
				stackPerConn += (float64(stack1) - float64(stack0)) / float64(n)
			}
			b.ReportMetric(perConn/float64(b.N), "B/conn")
			b.ReportMetric(stackPerConn/float64(b.N), "stack-B/conn")
			settle()
		})
	}
}

// instantConn moves data at once: benchmarks over it measure a wrapper and
// its re-arming, not the socket.
type instantConn struct{ net.Conn }

func (instantConn) Read(p []byte) (int, error)  { return len(p), nil }
func (instantConn) Write(p []byte) (int, error) { return len(p), nil }
func (instantConn) Close() error                { return nil }

// BenchmarkIdleEventsRearm isolates what counting a Read or a Write for the
// idle events costs, without the I/O: the wrapper's Read and Write over a
// conn that returns at once. impl=idleconn is IdleConn without options
// (Read re-arms its timer; Write counts for nothing); impl=events has
// OnReadIdle and OnWriteIdle. impl=runtime is what a server does without
// the wheel: SetReadDeadline before a Read on a real TCP conn, and Reset of
// its ping Ticker after a Write, so that pings go only to conns it has not
// written to.
func BenchmarkIdleEventsRearm(b *testing.B) {
	const idle = time.Hour // -count runs in one process: no event may come
	f := func(net.Conn) {}
	buf := make([]byte, 64)
	for _, op := range []string{"read", "write"} {
		for _, impl := range []string{"idleconn", "events", "runtime"} {
			b.Run("op="+op+"/impl="+impl, func(b *testing.B) {
				h := startedWheel(b)
				defer h.Stop()
				var conn net.Conn
				switch impl {
				case "idleconn":
					conn = netidle.Conn(h, instantConn{}, idle)
				case "events":
					conn = netidle.Conn(h, instantConn{}, idle, netidle.OnReadIdle(f), netidle.OnWriteIdle(pingEvery, f))
				}
				if conn != nil {
					defer conn.Close()
					b.ReportAllocs()
					for b.Loop() {
						if op == "read" {
							conn.Read(buf)
						} else {
							conn.Write(buf)
						}
					}
					return
				}
				_, c := loopbackPair(b)
				ticker := time.NewTicker(pingEvery)
				defer ticker.Stop()
				b.ReportAllocs()
				for b.Loop() {
					if op == "read" {
						c.SetReadDeadline(time.Now().Add(idle))
					} else {
						ticker.Reset(pingEvery)
					}
				}
			})
		}
	}
}

// BenchmarkIdleEventsIO: a Write then a Read of readSize bytes on a loopback
// TCP connection, as BenchmarkIdleConnRead, with the reading end plain
// (impl=raw), wrapped by IdleConn (impl=idleconn) and wrapped with
// OnReadIdle and OnWriteIdle (impl=events); op=write does the same with
// the writing end wrapped.
func BenchmarkIdleEventsIO(b *testing.B) {
	f := func(net.Conn) {}
	for _, op := range []string{"read", "write"} {
		for _, impl := range []string{"raw", "idleconn", "events"} {
			b.Run("op="+op+"/impl="+impl+"/size="+strconv.Itoa(readSize)+"B", func(b *testing.B) {
				r, w := loopbackPair(b)
				h := startedWheel(b)
				defer h.Stop()
				wrap := func(c net.Conn) net.Conn {
					switch impl {
					case "idleconn":
						return netidle.Conn(h, c, heartbeat)
					case "events":
						return netidle.Conn(h, c, heartbeat, netidle.OnReadIdle(f), netidle.OnWriteIdle(time.Hour, f))
					}
					return c
				}
				reader, writer := r, w
				if op == "read" {
					reader = wrap(r)
				} else {
					writer = wrap(w)
				}
				writeRead(b, w, writer, reader)
			})
		}
	}
}
