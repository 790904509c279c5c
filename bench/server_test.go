package bench

import (
	"math/rand/v2"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel"
)

// The server shape: every timer is made on one goroutine, as an accept loop
// makes each connection's idle timer, and then re-armed to a later deadline
// from many goroutines, as each connection's reader moves its own timeout
// on every Read. The timers therefore all start on the accept goroutine's
// processor while the re-arms come from every processor.
//
// Both benchmarks load serverLive[i] timers (or conns) on the benchmark
// goroutine, then measure, per operation, one re-arm of the timer at a
// random index to serverIdle from now:
//
//	mode=loop      one goroutine (b.Loop), walking order(n, true)
//	mode=parallel  parallelism goroutines per GOMAXPROCS (b.RunParallel with
//	               b.SetParallelism), each walking its own random order
//	               over all n: every timer is re-armed from every processor
//	mode=owned     the same goroutines, each re-arming only its own block
//	               of n/goroutines timers (in random order), as each
//	               connection's reader re-arms only its own connection's:
//	               a timer's memory stays with the processor that runs its
//	               reader, as in a server, instead of moving between cores
//	               on about every other re-arm as in mode=parallel
//
// Run them with -cpu 1,2: a second core should make the parallel rows
// faster, not slower. The live timers of one size are loaded once and
// shared by both modes; nothing else is live.

// serverLive are the numbers of timers (or conns) the server-shape
// benchmarks hold: 10^4 stays in cache, 10^6 does not.
var serverLive = []int{10_000, million}

// serverIdle is what a re-arm moves a deadline to: a connection's idle
// timeout. The live timers are first armed 30–60 s out (conns serverIdle
// out, as they are wrapped), so every re-arm moves a deadline later. A run
// much longer than serverIdle lets timers that were not re-armed fire; keep
// -benchtime in seconds.
const serverIdle = 60 * time.Second

// serverModes are the sub-benchmarks of each loaded set, in the order run.
var serverModes = []string{"loop", "parallel", "owned"}

// serverRun runs, for each size and each of impls in turn, load once and
// then each mode as BenchmarkX/impl=<impl>/live=<n>/mode=<mode>, and drops
// what load made (close) before the next impl loads. Unlike a b.Loop
// benchmark, a b.RunParallel one has its function called once per round:
// the load happens in whichever mode's function runs first.
func serverRun[S any](b *testing.B, impls []string, load func(b *testing.B, impl string, n int) S, close func(S),
	loop func(b *testing.B, s S, order []int32), parallel func(pb *testing.PB, s S, order []int32)) {
	for _, n := range serverLive {
		for _, impl := range impls {
			var s S
			loaded := false
			for _, mode := range serverModes {
				b.Run("impl="+impl+"/live="+strconv.Itoa(n)+"/mode="+mode, func(b *testing.B) {
					if !loaded {
						s, loaded = load(b, impl, n), true
						settle()
					}
					b.ReportAllocs()
					if mode == "loop" {
						loop(b, s, order(n, true))
						return
					}
					g := parallelism * runtime.GOMAXPROCS(0)
					orders := goroutineOrders(n, g)
					if mode == "owned" {
						orders = ownedOrders(n, g)
					}
					var next atomic.Int64
					b.SetParallelism(parallelism)
					b.ResetTimer() // RunParallel, unlike b.Loop, does not leave the setup out
					b.RunParallel(func(pb *testing.PB) {
						parallel(pb, s, orders[int(next.Add(1)-1)%len(orders)])
					})
				})
			}
			if loaded {
				close(s)
				settle()
			}
		}
	}
}

// ownedOrders splits 0..n-1 into g contiguous blocks, one per
// b.RunParallel goroutine, each shuffled: the goroutines share no timer,
// and (the blocks being contiguous) only the timers at a block's edge
// share a cache line with another goroutine's.
func ownedOrders(n, g int) [][]int32 {
	all := order(n, false)
	r := rand.New(rand.NewPCG(11, uint64(n)))
	orders := make([][]int32, g)
	for i := range orders {
		o := all[i*n/g : (i+1)*n/g]
		r.Shuffle(len(o), func(a, b int) { o[a], o[b] = o[b], o[a] })
		orders[i] = o
	}
	return orders
}

// serverTimers is one loaded set of BenchmarkServerReset: the wheel's
// timers held by value, or the runtime's.
type serverTimers struct {
	h     *timingwheel.Hierarchy
	held  []struct{ t timingwheel.Timer } // impl=wheel
	timer []*time.Timer                   // impl=runtime
}

// BenchmarkServerReset: Reset of one of n live timers to serverIdle from
// now, the timers made and armed on one goroutine, the re-arms from one
// (mode=loop) or from 8 goroutines per core (mode=parallel).
//
//	impl=wheel    timingwheel.Timers held by value in a slice of structs
//	              (as a server holds one in each conn's struct), bound with
//	              Init and armed with Reset, the driver running: t.Reset(d)
//	impl=runtime  time.AfterFunc timers: t.Reset(d)
func BenchmarkServerReset(b *testing.B) {
	serverRun(b, []string{"wheel", "runtime"},
		func(b *testing.B, impl string, n int) *serverTimers {
			s := &serverTimers{}
			switch impl {
			case "wheel":
				h := startedWheel(b)
				s.h = h
				s.held = make([]struct{ t timingwheel.Timer }, n)
				for i := range s.held {
					s.held[i].t.Init(h, noop).Reset(farDuration(i))
				}
			case "runtime":
				s.timer = make([]*time.Timer, n)
				for i := range s.timer {
					s.timer[i] = time.AfterFunc(farDuration(i), noop)
				}
			}
			return s
		},
		func(s *serverTimers) {
			if s.h != nil {
				s.h.Stop()
			}
			for i := range s.held {
				s.held[i].t.Stop()
			}
			for _, t := range s.timer {
				t.Stop()
			}
		},
		func(b *testing.B, s *serverTimers, order []int32) {
			i := 0
			if s.held != nil {
				held := s.held
				for b.Loop() {
					held[order[i]].t.Reset(serverIdle)
					if i++; i == len(order) {
						i = 0
					}
				}
				return
			}
			ts := s.timer
			for b.Loop() {
				ts[order[i]].Reset(serverIdle)
				if i++; i == len(order) {
					i = 0
				}
			}
		},
		func(pb *testing.PB, s *serverTimers, order []int32) {
			i := 0
			if s.held != nil {
				held := s.held
				for pb.Next() {
					held[order[i]].t.Reset(serverIdle)
					if i++; i == len(order) {
						i = 0
					}
				}
				return
			}
			ts := s.timer
			for pb.Next() {
				ts[order[i]].Reset(serverIdle)
				if i++; i == len(order) {
					i = 0
				}
			}
		})
}

// oneByteConn is a net.Conn whose Read returns one byte at once and whose
// Write takes everything at once, so that what wraps it is measured alone.
// Each conn is its own allocation, as a real one is.
type oneByteConn struct {
	id int
}

func (c *oneByteConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = 'x'
	return 1, nil
}

func (c *oneByteConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *oneByteConn) Close() error                     { return nil }
func (c *oneByteConn) LocalAddr() net.Addr              { return oneByteAddr(0) }
func (c *oneByteConn) RemoteAddr() net.Addr             { return oneByteAddr(c.id) }
func (c *oneByteConn) SetDeadline(time.Time) error      { return nil }
func (c *oneByteConn) SetReadDeadline(time.Time) error  { return nil }
func (c *oneByteConn) SetWriteDeadline(time.Time) error { return nil }

// oneByteAddr is a oneByteConn's address: its index.
type oneByteAddr int

func (oneByteAddr) Network() string  { return "fake" }
func (a oneByteAddr) String() string { return strconv.Itoa(int(a)) }

// timerConn is the runtime baseline of an idle conn, written by hand: a
// conn that resets its own *time.Timer (a time.AfterFunc that closes it)
// on every Read that returns data.
type timerConn struct {
	net.Conn
	t    *time.Timer
	idle time.Duration
}

func newTimerConn(c net.Conn, idle time.Duration) *timerConn {
	tc := &timerConn{Conn: c, idle: idle}
	tc.t = time.AfterFunc(idle, func() { tc.Conn.Close() })
	return tc
}

// Close stops the timer and closes the conn.
func (c *timerConn) Close() error {
	c.t.Stop()
	return c.Conn.Close()
}

func (c *timerConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.t.Reset(c.idle)
	}
	return n, err
}

// serverConns is one loaded set of BenchmarkServerConnRead.
type serverConns struct {
	h     *timingwheel.Hierarchy
	conns []net.Conn
}

// BenchmarkServerConnRead: one Read of a conn that returns a byte at once
// (oneByteConn), through a wrapper that re-arms the conn's idle timeout to
// serverIdle from now: BenchmarkServerReset through a conn. The n conns are
// wrapped on one goroutine, as an accept loop wraps them; each Read picks
// one at random, on one goroutine (mode=loop) or from 8 goroutines per core
// (mode=parallel).
//
//	impl=wheel    the library's idle conn (idleConn, set in idleconn_test.go:
//	              needs -tags idleconn, left out without it)
//	impl=runtime  timerConn: a conn that resets its own time.AfterFunc
//	              timer on each Read that returns data
//
// The runtime's SetReadDeadline needs a real socket per conn; it is
// measured on open TCP conns in BenchmarkHeartbeat.
func BenchmarkServerConnRead(b *testing.B) {
	impls := []string{"runtime"}
	if idleConn != nil {
		impls = []string{"wheel", "runtime"}
	}
	serverRun(b, impls,
		func(b *testing.B, impl string, n int) *serverConns {
			s := &serverConns{conns: make([]net.Conn, n)}
			if impl == "wheel" {
				h := startedWheel(b)
				s.h = h
			}
			for i := range s.conns {
				c := &oneByteConn{id: i}
				if impl == "wheel" {
					s.conns[i] = idleConn(s.h, c, serverIdle)
				} else {
					s.conns[i] = newTimerConn(c, serverIdle)
				}
			}
			return s
		},
		func(s *serverConns) {
			for _, c := range s.conns {
				c.Close()
			}
			if s.h != nil {
				s.h.Stop()
			}
		},
		func(b *testing.B, s *serverConns, order []int32) {
			conns, buf, i := s.conns, make([]byte, 64), 0
			for b.Loop() {
				if _, err := conns[order[i]].Read(buf); err != nil {
					b.Fatalf("conn %d: %v", order[i], err)
				}
				if i++; i == len(order) {
					i = 0
				}
			}
		},
		func(pb *testing.PB, s *serverConns, order []int32) {
			conns, buf, i := s.conns, make([]byte, 64), 0
			for pb.Next() {
				if _, err := conns[order[i]].Read(buf); err != nil {
					panic("conn " + strconv.Itoa(int(order[i])) + ": " + err.Error())
				}
				if i++; i == len(order) {
					i = 0
				}
			}
		})
}
