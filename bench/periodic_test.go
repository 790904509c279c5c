package bench

import (
	"testing"
	"time"

	"github.com/timingwheel/timingwheel"
)

// Periodic timers: a per-connection job (a keepalive ping, a stats flush)
// that runs every period until the connection closes.

// periodicConns is how many live periodic timers BenchmarkHeapPeriodic
// holds.
const periodicConns = 100_000

// tickerConn and wheelConn stand for a connection's struct with its
// periodic timer in it.
type tickerConn struct {
	id     int
	ticker *time.Ticker
}

type wheelConn struct {
	id int
	t  timingwheel.Timer
}

// BenchmarkHeapPeriodic: the heap each of 10^5 live periodic timers takes,
// held in a conn struct, periods of 1–2 s.
//
//	impl=wheel    a timingwheel.Timer field, Init once, ResetEvery(p)
//	impl=ticker   a *time.Ticker field from time.NewTicker(p)
//
// Both count the conn struct itself (8 bytes of id, plus the field). A
// ticker's channel is usually served by a goroutine per conn as well (its
// stack, 2–8 KiB, is not counted here); the wheel's callback runs on the
// driver.
func BenchmarkHeapPeriodic(b *testing.B) {
	period := func(i int) time.Duration { return time.Second + time.Duration(i%1000)*time.Millisecond }
	b.Run("impl=wheel", func(b *testing.B) {
		reportHeapPer(b, "B/conn", periodicConns, func(measure func(arm func())) {
			h := startedWheel(b)
			var conns []*wheelConn
			measure(func() {
				conns = make([]*wheelConn, periodicConns)
				for i := range conns {
					c := &wheelConn{id: i}
					c.t.Init(h, noop).ResetEvery(period(i))
					conns[i] = c
				}
			})
			for _, c := range conns {
				c.t.Stop()
			}
			h.Stop()
		})
	})
	b.Run("impl=ticker", func(b *testing.B) {
		reportHeapPer(b, "B/conn", periodicConns, func(measure func(arm func())) {
			var conns []*tickerConn
			measure(func() {
				conns = make([]*tickerConn, periodicConns)
				for i := range conns {
					conns[i] = &tickerConn{id: i, ticker: time.NewTicker(period(i))}
				}
			})
			for _, c := range conns {
				c.ticker.Stop()
			}
		})
	})
}

// BenchmarkPeriodicArmStop: start a periodic timer and stop it, next to
// 10^5 live ones.
//
//	impl=wheel           a held timingwheel.Timer: t.ResetEvery(p); t.Stop()
//	impl=ticker          time.NewTicker(p).Stop()
//	impl=ticker-reused   one *time.Ticker made once: t.Reset(p); t.Stop()
func BenchmarkPeriodicArmStop(b *testing.B) {
	b.Run("impl=wheel", func(b *testing.B) {
		h := startedWheel(b)
		defer h.Stop()
		live := make([]wheelConn, periodicConns)
		for i := range live {
			live[i].t.Init(h, noop).ResetEvery(time.Minute + time.Duration(i)*time.Millisecond)
		}
		defer func() {
			for i := range live {
				live[i].t.Stop()
			}
		}()
		var c wheelConn
		c.t.Init(h, noop)
		b.ReportAllocs()
		for b.Loop() {
			c.t.ResetEvery(time.Second)
			c.t.Stop()
		}
	})
	live := make([]*time.Ticker, periodicConns)
	for i := range live {
		live[i] = time.NewTicker(time.Minute + time.Duration(i)*time.Millisecond)
	}
	defer func() {
		for _, t := range live {
			t.Stop()
		}
	}()
	b.Run("impl=ticker", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			time.NewTicker(time.Second).Stop()
		}
	})
	b.Run("impl=ticker-reused", func(b *testing.B) {
		t := time.NewTicker(time.Second)
		t.Stop()
		b.ReportAllocs()
		for b.Loop() {
			t.Reset(time.Second)
			t.Stop()
		}
	})
}
