package netidle_test

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/netidle"
)

// TestIdleEvents_ClockBackJudgedAtTheFiredTick: on a Mock, one shard, the clock goes to 20ms and back to 5ms; a conn wrapped
// then with OnWriteIdle(2ms) and MaxLifetime(9ms) has its write-idle event
// due at 7ms, and its lifetime ends at 14ms. At 8ms the event runs (the
// next is due at 10ms). The clock then jumps to 30ms: the event due at
// 10ms runs, on the open conn, before the lifetime closes it at 14ms. A
// bucket that judged its conns at the shard's tick (20ms, then 30ms)
// instead of the tick being fired closed the conn first and lost the event.
func TestIdleEvents_ClockBackJudgedAtTheFiredTick(t *testing.T) {
	mock := clock.NewMock()
	h, err := timingwheel.New(timingwheel.WithClock(mock), timingwheel.WithShards(1))
	require.NoError(t, err)
	start := mock.Now()
	mock.Set(start.Add(20 * time.Millisecond))
	advanceWithin(t, h, "20ms")
	mock.Set(start.Add(5 * time.Millisecond))
	advanceWithin(t, h, "back at 5ms")
	fc := &fastConn{}
	var (
		mu    sync.Mutex
		order []string
	)
	rec := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	c := netidle.Conn(h, fc, time.Hour, netidle.OnWriteIdle(2*time.Millisecond, func(net.Conn) {
		if fc.closes.Load() > 0 {
			rec("write idle on a closed conn")
			return
		}
		rec("write idle at " + h.Now().Sub(start).String())
	}), netidle.MaxLifetime(9*time.Millisecond))
	defer c.Close()
	mock.Set(start.Add(8 * time.Millisecond))
	advanceWithin(t, h, "8ms")
	mu.Lock()
	require.Equal(t, []string{"write idle at 8ms"}, order, "the event due at 7ms, at 8ms")
	mu.Unlock()
	mock.Set(start.Add(30 * time.Millisecond))
	advanceWithin(t, h, "30ms")
	advanceWithin(t, h, "30ms, again") // what a callback arms for a tick the shard has passed waits for the next Advance
	mu.Lock()
	assert.Equal(t, []string{"write idle at 8ms", "write idle at 30ms"}, order,
		"the write-idle event due at 10ms, before the lifetime's end at 14ms")
	mu.Unlock()
	assert.EqualValues(t, 1, fc.closes.Load(), "not closed for its lifetime")
	_, err = c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, netidle.ErrLifetime)
}

// backThenRead wraps local with opts on a clock at origin+10h, sets the
// clock back to origin+5h, has the conn read a byte from peer there, and
// returns the conn.
func backThenRead(t *testing.T, opts ...netidle.Option) (h *timingwheel.Hierarchy, mock interface {
	Add(time.Duration)
}, c idleConn, peer net.Conn) {
	t.Helper()
	hh, m := newMock(t)
	origin := m.Now()
	m.Add(10 * time.Hour)
	local, p := pipe(t)
	c = netidle.Conn(hh, local, time.Hour, opts...).(idleConn)
	t.Cleanup(func() { c.Close() })
	m.Set(origin.Add(5 * time.Hour)) // the clock goes back 5h
	go p.Write([]byte{1})
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, err := c.Read(make([]byte, 1))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	return hh, m, c, p
}

// After the clock went back (docs/guarantees.md, "Clock anomalies"), a Read
// that returned data starts the idle count again from the clock's reading
// ("Idle connections"), for a conn with options too: IdleDeadline is the
// reading plus idle, and the conn is closed idle after the Read. The conn
// without options is the next test.
func TestIdleEvents_ReadAfterClockWentBackRearms(t *testing.T) {
	h, mock, c, peer := backThenRead(t, netidle.OnWriteIdle(24*time.Hour, func(net.Conn) {}))
	assert.Equal(t, h.Now().Add(time.Hour), c.IdleDeadline(), "IdleDeadline after a Read, the clock having gone back")
	advanceBy(t, h, mock, time.Hour, "idle after the Read")
	assert.True(t, peerSeesClosed(t, peer), "not closed idle (1h) after its last Read")
}

// The same for a conn without options: closed idle after its last Read,
// the clock having gone back, and not a tick before.
func TestIdleConn_ReadAfterClockWentBackRearms(t *testing.T) {
	h, mock, c, peer := backThenRead(t)
	assert.Equal(t, h.Now().Add(time.Hour), c.IdleDeadline(), "IdleDeadline after a Read, the clock having gone back")
	advanceBy(t, h, mock, time.Hour-time.Millisecond, "a tick before idle after the Read")
	assert.False(t, peerSeesClosed(t, peer), "closed before idle after its last Read")
	advanceBy(t, h, mock, time.Millisecond, "idle after the Read")
	assert.True(t, peerSeesClosed(t, peer), "not closed idle (1h) after its last Read")
}
