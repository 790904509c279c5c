package netidle_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/netidle"
)

// The idle-event model with Pause, Resume, SetIdle and Close
// (docs/guarantees.md, "Idle events", "Idle connections for real
// servers", "Clock anomalies"), run two ways: on one goroutine against an
// exact model, and with real goroutines doing the same operations while a
// driver goroutine moves the clock (forward and back) and advances, against
// the invariants that hold whatever the interleaving.

// ctlModel is the exact model of one conn: its instants are the clock's,
// as offsets from the start.
type ctlModel struct {
	c                     netidle.Control
	fc                    *fastConn
	onRead, all           bool // OnReadIdle; AllIdle
	idle, wi, life        time.Duration
	read, write, end      time.Duration // instants since the start
	paused, closed        bool
	reads, writes         atomic.Int32
	wantReads, wantWrites int32
}

// due advances m to now as the hierarchy does (see
// TestIdleEvents_MatchModelThroughClockJumps): what comes due happens in
// the order of the instants, each event restarting its count from now; a
// paused conn has only its lifetime.
func (m *ctlModel) due(now time.Duration) {
	for !m.closed {
		next := m.end
		if !m.paused {
			next = min(next, m.read+m.idle)
			if m.wi > 0 {
				next = min(next, m.write+m.wi)
			}
		}
		if next > now {
			return
		}
		switch {
		case next == m.end:
			m.closed = true
		case !m.onRead && next == m.read+m.idle:
			m.closed = true
		default:
			if m.onRead && next == m.read+m.idle {
				m.wantReads++
				m.read = now
			}
			if m.wi > 0 && next == m.write+m.wi {
				m.wantWrites++
				m.write = now
			}
		}
	}
}

// wrote is a Write with data at now: with AllIdle it restarts the idle
// close's count (read: the last data moved either way), with a write-idle
// event that event's. A write-idle event restarts only its own.
func (m *ctlModel) wrote(now time.Duration) {
	if m.all {
		m.read = now
	}
	if m.wi > 0 {
		m.write = now
	}
}

// newCtlModel wraps a fresh fastConn in h at now, idle idle: with a
// read-idle event if onRead, else closed when idle; AllIdle if all; a
// write-idle event at wi if wi > 0; a lifetime of life if life > 0.
func newCtlModel(h *timingwheel.Hierarchy, now time.Duration, onRead, all bool, idle, wi, life time.Duration) *ctlModel {
	m := &ctlModel{fc: &fastConn{}, onRead: onRead, all: all, idle: idle, wi: wi, life: life, read: now, write: now, end: 1<<63 - 1}
	var opts []netidle.Option
	if all {
		opts = append(opts, netidle.AllIdle())
	}
	if onRead {
		opts = append(opts, netidle.OnReadIdle(func(net.Conn) { m.reads.Add(1) }))
	}
	if wi > 0 {
		opts = append(opts, netidle.OnWriteIdle(wi, func(net.Conn) { m.writes.Add(1) }))
	}
	if life > 0 {
		m.end = now + life
		opts = append(opts, netidle.MaxLifetime(life))
	}
	m.c = netidle.Conn(h, m.fc, idle, opts...).(netidle.Control)
	return m
}

// check requires that the conn has had the close and the events the model
// says; what names the step and the conn.
func (m *ctlModel) check(t *testing.T, what string) {
	t.Helper()
	require.Equal(t, m.closed, m.fc.closes.Load() > 0, "%s: closed", what)
	require.Equal(t, m.wantReads, m.reads.Load(), "%s: read-idle events", what)
	require.Equal(t, m.wantWrites, m.writes.Load(), "%s: write-idle events", what)
}

// closeSome closes about a third of the open conns of ms, at random.
func closeSome(r *rand.Rand, ms []*ctlModel) {
	for _, m := range ms {
		if !m.closed && r.IntN(3) == 0 {
			m.c.Close()
			m.closed = true
			m.fc.closes.Store(1)
		}
	}
}

// moveClock moves mock by d, *now with it and *high to the furthest it has
// been, and advances h; after a step from behind the furthest point, until
// Advance has nothing left to run (what a callback arms for a tick the
// shards have passed waits for the next Advance).
func moveClock(t *testing.T, h *timingwheel.Hierarchy, mock interface{ Add(time.Duration) }, now, high *time.Duration, d time.Duration, what string) {
	t.Helper()
	wasBehind := *now < *high
	*now += d
	*high = max(*high, *now)
	advanceBy(t, h, mock, d, what)
	for wasBehind && h.Advance() > 0 {
	}
}

func TestIdleEvents_ModelWithControlOnOneGoroutine(t *testing.T) {
	steps := 1500
	if long() {
		steps = 20_000
	}
	for seed := range uint64(3) {
		mock := newFakeClock() // as a Mock, but moving it does not sleep
		h, err := timingwheel.New(timingwheel.WithClock(mock), timingwheel.WithShards(int(seed)+1))
		require.NoError(t, err)
		r := rand.New(rand.NewPCG(seed, 39))
		ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
		randDur := func() time.Duration {
			switch r.IntN(3) {
			case 0:
				return ms(1 + r.Int64N(5))
			case 1:
				return ms(1 + r.Int64N(200))
			default:
				return ms(1 + r.Int64N(20_000))
			}
		}
		var conns []*ctlModel
		var now, high time.Duration
		for step := range steps {
			if r.IntN(10) == 0 || len(conns) < 20 {
				onRead, idle := r.IntN(2) == 0, randDur()
				var wi, life time.Duration
				if r.IntN(2) == 0 {
					wi = randDur()
				}
				if r.IntN(3) == 0 {
					life = randDur()
				}
				conns = append(conns, newCtlModel(h, now, onRead, r.IntN(3) == 0, idle, wi, life))
			}
			for range r.IntN(6) {
				m := conns[r.IntN(len(conns))]
				if m.closed {
					continue
				}
				switch r.IntN(7) {
				case 0, 1:
					if n, _ := m.c.Read([]byte{1}); n > 0 {
						m.read = now
					}
				case 2, 3:
					if n, _ := m.c.Write([]byte{1}); n > 0 {
						m.wrote(now)
					}
				case 4:
					m.c.Pause()
					m.paused = true
				case 5:
					m.c.Resume()
					m.paused = false
					m.read, m.write = now, now
				default:
					d := randDur()
					m.c.SetIdle(d)
					m.idle, m.read = d, now
				}
			}
			var d time.Duration
			switch x := r.IntN(20); {
			case x < 12:
				d = ms(1)
			case x < 18:
				d = ms(1 + r.Int64N(100))
			case x < 19:
				d = ms(r.Int64N(60_000))
			default: // back
				d = -min(now, ms(1+r.Int64N([]int64{5, 200, 60_000}[r.IntN(3)])))
			}
			moveClock(t, h, mock, &now, &high, d, fmt.Sprintf("step %d", step))
			for i, m := range conns {
				if m.closed {
					continue
				}
				m.due(now)
				what := fmt.Sprintf("seed %d step %d (at %v) conn %d (idle %v, write idle %v, all idle %v, paused %v)", seed, step, now, i, m.idle, m.wi, m.all, m.paused)
				m.check(t, what)
				if m.paused && !m.closed {
					require.True(t, m.c.IdleDeadline().IsZero(), "%s: IdleDeadline of a paused conn", what)
				}
			}
			if r.IntN(30) == 0 {
				closeSome(r, conns)
			}
		}
		for _, m := range conns {
			m.c.Close()
		}
		assert.Equal(t, 0, h.Len(), "seed %d: timers armed once every conn is closed", seed)
	}
}

// hookedConn is a conn whose Read and Write return at once and whose Close
// runs a hook (once the conn is set up).
type hookedConn struct {
	fastConn
	onClose atomic.Pointer[func()]
}

func (c *hookedConn) Close() error {
	if f := c.onClose.Load(); f != nil {
		(*f)()
	}
	return c.fastConn.Close()
}

// racedConn is a conn of the racing model: what its worker has done, for
// the invariants the driver's callbacks check.
type racedConn struct {
	c      netidle.Control
	hc     *hookedConn
	paused atomic.Int64 // the driver's Advance count when Pause returned; -1: not paused
	closed atomic.Int64 // the same for Close; -1: open
}

// TestIdleEvents_ModelWithControlRacingTheDriver runs workers that Read,
// Write, Pause, Resume, SetIdle and Close their conns at random, on real
// goroutines, while a driver goroutine moves a Mock forward (and at times
// back) and advances. Whatever the interleaving:
//   - a conn whose Pause returned is not closed for idleness until Resume:
//     its wrapped conn's Close comes only from its own Close;
//   - no idle event (OnReadIdle's, OnWriteIdle's) runs in an Advance that
//     began after Pause or Close returned: an event whose function had not
//     started is cancelled, one that had is in the Advance under way;
//   - once every conn is closed, no timer is left armed.
func TestIdleEvents_ModelWithControlRacingTheDriver(t *testing.T) {
	rounds, conns := 3, 40
	if long() {
		rounds = 20
	}
	for round := range rounds {
		mock := clock.NewMock()
		h, err := timingwheel.New(timingwheel.WithClock(mock), timingwheel.WithShards(1+round%3))
		require.NoError(t, err)
		var advances atomic.Int64 // incremented before each Advance
		var violations sync.Map   // message -> true
		violate := func(format string, args ...any) { violations.Store(fmt.Sprintf(format, args...), true) }
		rcs := make([]*racedConn, conns)
		for i := range rcs {
			rc := &racedConn{hc: &hookedConn{}}
			rc.paused.Store(-1)
			rc.closed.Store(-1)
			event := func(kind string) func(net.Conn) {
				return func(net.Conn) {
					a := advances.Load()
					if p := rc.paused.Load(); p >= 0 && a > p {
						violate("conn %d: a %s event in Advance %d, after Pause returned during Advance %d", i, kind, a, p)
					}
					if c := rc.closed.Load(); c >= 0 && a > c {
						violate("conn %d: a %s event in Advance %d, after Close returned during Advance %d", i, kind, a, c)
					}
				}
			}
			opts := []netidle.Option{netidle.OnWriteIdle(time.Duration(1+i%7)*time.Millisecond, event("write-idle"))}
			if i%2 == 0 {
				opts = append(opts, netidle.OnReadIdle(event("read-idle")))
			}
			if i%3 == 0 {
				opts = append(opts, netidle.AllIdle())
			}
			if i%5 == 0 {
				opts = append(opts, netidle.MaxLifetime(time.Duration(50+i)*time.Millisecond))
			}
			rc.c = netidle.Conn(h, rc.hc, time.Duration(2+i%11)*time.Millisecond, opts...).(netidle.Control)
			onClose := func() {
				if rc.closed.Load() >= 0 || rc.paused.Load() < 0 {
					return // its own Close, or not paused
				}
				// The hierarchy's close: its flag is up, so Read answers
				// at once with the reason. A lifetime's end may close a
				// paused conn; idleness may not.
				if _, err := rc.c.Read(nil); !errors.Is(err, netidle.ErrLifetime) {
					violate("conn %d: closed while paused (Read: %v)", i, err)
				}
			}
			rc.hc.onClose.Store(&onClose)
			rcs[i] = rc
		}
		stop := make(chan struct{})
		var driver sync.WaitGroup
		driver.Go(func() {
			r := rand.New(rand.NewPCG(uint64(round), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				d := time.Duration(r.Int64N(3)) * time.Millisecond
				if r.IntN(50) == 0 {
					d = -time.Duration(r.Int64N(20)) * time.Millisecond
				}
				mock.Add(d)
				advances.Add(1)
				h.Advance()
			}
		})
		var workers sync.WaitGroup
		for i, rc := range rcs {
			workers.Go(func() {
				r := rand.New(rand.NewPCG(uint64(round), uint64(i)+2))
				for range 3000 {
					switch r.IntN(12) {
					case 0, 1, 2:
						rc.c.Read([]byte{1})
					case 3, 4, 5:
						rc.c.Write([]byte{1})
					case 6, 7:
						rc.c.Pause()
						if rc.c.IdleDeadline().IsZero() { // paused and open
							rc.paused.Store(advances.Load())
						}
					case 8, 9:
						rc.paused.Store(-1) // before Resume: the hierarchy may act from then on
						rc.c.Resume()
					case 10:
						rc.c.SetIdle(time.Duration(1+r.IntN(10)) * time.Millisecond)
					default:
						if r.IntN(200) == 0 {
							rc.closed.Store(0) // from the Close on: any close is its own
							rc.c.Close()
							rc.closed.Store(advances.Load())
							return
						}
					}
					if r.IntN(16) == 0 {
						runtime.Gosched()
					}
				}
			})
		}
		waitWithin(t, 60*time.Second, &workers, "the workers' operations")
		close(stop)
		waitWithin(t, 10*time.Second, &driver, "the driver's Advance")
		for _, rc := range rcs {
			rc.closed.Store(0)
			rc.c.Close()
		}
		violations.Range(func(k, _ any) bool {
			t.Errorf("round %d: %s", round, k)
			return true
		})
		assert.Equal(t, 0, h.Len(), "round %d: timers armed once every conn is closed", round)
	}
}
