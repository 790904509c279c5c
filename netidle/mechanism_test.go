package netidle_test

import (
	"math/rand/v2"
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/netidle"
)

// The measurements behind netidle's one mechanism (docs/design.md, "Idle
// connections"): a conn whose Read and Write store the clock in a word of
// its own and whose one timer looks at it when it fires (mech=marks, the
// package's conn), against a conn that re-arms a Timer held in it on every
// Read (mech=timer, the alternative, written here as a minimal
// conn: what the core's timer-per-conn IdleConn did).

// benchConn is a conn whose Read and Write return at once, and whose Close
// does nothing: a benchmark over it measures the wrapper only.
type benchConn struct{}

func (benchConn) Read(p []byte) (int, error)       { return len(p), nil }
func (benchConn) Write(p []byte) (int, error)      { return len(p), nil }
func (benchConn) Close() error                     { return nil }
func (benchConn) LocalAddr() net.Addr              { return nil }
func (benchConn) RemoteAddr() net.Addr             { return nil }
func (benchConn) SetDeadline(time.Time) error      { return nil }
func (benchConn) SetReadDeadline(time.Time) error  { return nil }
func (benchConn) SetWriteDeadline(time.Time) error { return nil }

// timerConn re-arms a Timer held in it on every Read with data.
type timerConn struct {
	net.Conn
	idle time.Duration
	t    timingwheel.Timer
}

func newTimerConn(h *timingwheel.Hierarchy, c net.Conn, idle time.Duration) *timerConn {
	tc := &timerConn{Conn: c, idle: idle}
	tc.t.Init(h, func() { tc.Conn.Close() })
	tc.t.Reset(idle)
	return tc
}

func (c *timerConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.t.Reset(c.idle)
	}
	return n, err
}

// wrap returns n conns of mech, wrapped on this goroutine (as an accept
// loop wraps them), with idle and opts.
func wrap(h *timingwheel.Hierarchy, mech string, n int, idle time.Duration, opts ...netidle.Option) []net.Conn {
	conns := make([]net.Conn, n)
	p := netidle.NewPolicy(h, idle, opts...)
	for i := range conns {
		if mech == "timer" {
			conns[i] = newTimerConn(h, benchConn{}, idle)
		} else {
			conns[i] = p.Conn(benchConn{})
		}
	}
	return conns
}

// BenchmarkMechanism_Read is a Read with data of one of 10^4 conns wrapped
// on one goroutine, picked at random, from one goroutine (par=1) or from 8
// goroutines per P (par=8); run it with -cpu 1,2.
func BenchmarkMechanism_Read(b *testing.B) {
	for _, mech := range []string{"marks", "timer"} {
		for _, par := range []int{1, 8} {
			b.Run("mech="+mech+"/par="+strconv.Itoa(par), func(b *testing.B) {
				h, err := timingwheel.New()
				require.NoError(b, err)
				conns := wrap(h, mech, 10_000, time.Minute)
				b.ReportAllocs()
				if par == 1 {
					buf := make([]byte, 1)
					rng := rand.New(rand.NewPCG(1, 2))
					for b.Loop() {
						conns[rng.IntN(len(conns))].Read(buf)
					}
					return
				}
				b.SetParallelism(par)
				b.RunParallel(func(pb *testing.PB) {
					// The index from a xorshift on this goroutine's stack,
					// and a buffer of its own: no heap word written by two
					// goroutines (a rand.Rand each would share cache lines).
					var buf [64]byte
					x := rand.Uint64() | 1
					for pb.Next() {
						x ^= x << 13
						x ^= x >> 7
						x ^= x << 17
						conns[x%uint64(len(conns))].Read(buf[:1])
					}
				})
			})
		}
	}
}

// BenchmarkMechanism_Heap reports the heap each conn costs (conn=B), for
// 10^5 conns wrapped on one goroutine, with and without options.
func BenchmarkMechanism_Heap(b *testing.B) {
	cases := []struct {
		name string
		mech string
		opts []netidle.Option
	}{
		{"mech=marks/opts=none", "marks", nil},
		{"mech=marks/opts=writeidle+lifetime", "marks", []netidle.Option{netidle.OnWriteIdle(time.Minute, func(net.Conn) {}), netidle.MaxLifetime(time.Hour)}},
		{"mech=timer/opts=none", "timer", nil},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			const n = 100_000
			for b.Loop() {
				h, err := timingwheel.New()
				require.NoError(b, err)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				conns := wrap(h, c.mech, n, time.Minute, c.opts...)
				runtime.GC()
				runtime.ReadMemStats(&after)
				// Less the slice's 16 B per conn (an interface value).
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n-16, "B/conn")
				runtime.KeepAlive(conns)
			}
		})
	}
}

// BenchmarkMechanism_Fire is the cost per conn of an Advance that closes
// 10^4 idle conns (event=close), runs their write-idle event (event=write),
// or finds them busy and arms their timers again (event=look).
func BenchmarkMechanism_Fire(b *testing.B) {
	for _, ev := range []string{"close", "write", "look"} {
		for _, mech := range []string{"marks", "timer"} {
			if mech == "timer" && ev != "close" {
				continue // the timer conn has no events, and re-arms on Read, not in a look
			}
			b.Run("event="+ev+"/mech="+mech, func(b *testing.B) {
				const n = 10_000
				for b.Loop() {
					b.StopTimer()
					mock := clock.NewMock()
					h, err := timingwheel.New(timingwheel.WithClock(mock))
					require.NoError(b, err)
					idle := time.Second
					var opts []netidle.Option
					if ev == "write" {
						opts, idle = []netidle.Option{netidle.OnWriteIdle(time.Second, func(net.Conn) {})}, time.Hour
					}
					conns := wrap(h, mech, n, idle, opts...)
					mock.Add(500 * time.Millisecond)
					if ev == "look" {
						buf := make([]byte, 1)
						for _, c := range conns {
							c.Read(buf)
						}
					}
					mock.Add(500 * time.Millisecond)
					b.StartTimer()
					h.Advance()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/conn")
			})
		}
	}
}

// TestConn_WrapAllocatesTheConnAndItsCallbackOnly: wrapping a conn costs
// two allocations, the conn (128 bytes) and the method value its timer
// calls, by Conn without options as by a Policy's conns: a Conn of its own
// makes no policy. Conn given options makes one more, the options (48
// bytes): not a policy.
func TestConn_WrapAllocatesTheConnAndItsCallbackOnly(t *testing.T) {
	h, err := timingwheel.New(timingwheel.WithClock(clock.NewMock()))
	require.NoError(t, err)
	p := netidle.NewPolicy(h, time.Minute, netidle.AllIdle())
	var c net.Conn = benchConn{}
	ping := netidle.OnWriteIdle(time.Second, func(net.Conn) {})
	for _, k := range []struct {
		name   string
		wrap   func() net.Conn
		allocs float64
		bytes  float64
	}{
		{"Conn", func() net.Conn { return netidle.Conn(h, c, time.Minute) }, 2, 144},
		{"Policy.Conn", func() net.Conn { return p.Conn(c) }, 2, 144},
		{"Conn with an option", func() net.Conn { return netidle.Conn(h, c, time.Minute, ping) }, 3, 192},
	} {
		var conns []net.Conn
		allocs := testing.AllocsPerRun(100, func() {
			w := k.wrap()
			conns = append(conns[:0], w)
			w.Close()
		})
		require.Equal(t, k.allocs, allocs, "%s: allocations per conn wrapped", k.name)
		// The bytes, over many conns (what another goroutine allocates
		// meanwhile adds a little).
		const n = 1000
		ws := make([]net.Conn, n)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range ws {
			ws[i] = k.wrap()
		}
		runtime.ReadMemStats(&after)
		perConn := float64(after.TotalAlloc-before.TotalAlloc) / n
		require.InDelta(t, k.bytes, perConn, 8, "%s: heap bytes per conn wrapped", k.name)
		for _, w := range ws {
			w.Close()
		}
	}
}
