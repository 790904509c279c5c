package netidle_test

import (
	"math"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/netidle"
	"github.com/timingwheel/timingwheel/wheeltest"
)

// closeClock is a net.Conn that only records when it was closed, on the
// clock of its test: enough for conns that no one reads or writes.
type closeClock struct {
	net.Conn // nil: only Close is called
	clk      *wheeltest.Clock
	at       time.Time
}

func (c *closeClock) Close() error {
	c.at = c.clk.Now()
	return nil
}

// wrapTogether wraps n conns at one instant with p, as a listener accepting
// a reconnect storm would, and returns them.
func wrapTogether(p *netidle.Policy, clk *wheeltest.Clock, n int) []*closeClock {
	conns := make([]*closeClock, n)
	for i := range conns {
		conns[i] = &closeClock{clk: clk}
		p.Conn(conns[i])
	}
	return conns
}

// TestMaxLifetimeJitter_SpreadsConnsWrappedTogetherWithinItsBound: a
// thousand conns wrapped at one instant with MaxLifetime(1h) and
// MaxLifetimeJitter(0.1), walked tick by tick: none is closed before
// 54 minutes (d·(1−f)), each is closed by the tick of 66 minutes
// (d·(1+f)), at its own due tick, and the closes spread over the window
// rather than coming together. (With uniform draws, 1,000 conns on 720,000
// ticks: fewer than 900 distinct instants, or none in the window's first
// or last quarter, has a chance far below 10^-100.) Without the jitter,
// every conn closes at d exactly.
func TestMaxLifetimeJitter_SpreadsConnsWrappedTogetherWithinItsBound(t *testing.T) {
	const n = 1000
	d, f := time.Hour, 0.1
	clk := newFakeClock()
	h, err := timingwheel.New(timingwheel.WithClock(clk))
	require.NoError(t, err)
	t0 := clk.Now()
	lo, hi := t0.Add(time.Duration(float64(d)*(1-f))), t0.Add(time.Duration(float64(d)*(1+f)))

	jittered := wrapTogether(netidle.NewPolicy(h, 24*time.Hour, netidle.MaxLifetimeJitter(f), netidle.MaxLifetime(d)), clk, n)
	exact := wrapTogether(netidle.NewPolicy(h, 24*time.Hour, netidle.MaxLifetime(d)), clk, n/10)

	wheeltest.AdvanceTo(h, clk, lo.Add(-time.Nanosecond))
	for i, c := range jittered {
		require.True(t, c.at.IsZero(), "conn %d closed at %v, before d·(1−f) = %v", i, c.at.Sub(t0), lo.Sub(t0))
	}
	wheeltest.AdvanceTo(h, clk, h.Due(hi))
	distinct := map[time.Time]bool{}
	first, last := hi, lo
	for i, c := range jittered {
		require.False(t, c.at.IsZero(), "conn %d not closed by d·(1+f) = %v", i, hi.Sub(t0))
		assert.False(t, c.at.Before(lo), "conn %d closed at %v", i, c.at.Sub(t0))
		assert.False(t, c.at.After(h.Due(hi)), "conn %d closed at %v, after d·(1+f)", i, c.at.Sub(t0))
		distinct[c.at] = true
		if c.at.Before(first) {
			first = c.at
		}
		if c.at.After(last) {
			last = c.at
		}
	}
	t.Logf("%d conns wrapped together closed at %d instants from %v to %v", n, len(distinct), first.Sub(t0), last.Sub(t0))
	assert.GreaterOrEqual(t, len(distinct), 900, "the closes did not spread")
	quarter := time.Duration(float64(d) * f / 2)
	assert.True(t, first.Before(lo.Add(quarter)) && last.After(hi.Add(-quarter)),
		"the closes spread from %v to %v only, within [%v, %v]", first.Sub(t0), last.Sub(t0), lo.Sub(t0), hi.Sub(t0))
	for i, c := range exact {
		assert.True(t, c.at.Equal(t0.Add(d)), "without the jitter, conn %d closed at %v, want exactly %v", i, c.at.Sub(t0), d)
	}
}

// TestMaxLifetimeJitter_BadInput: f outside [0, 1) panics with the
// option's message; a jitter with no MaxLifetime to spread panics in Conn,
// Listener and NewPolicy; f = 0 without MaxLifetime is no jitter at all.
func TestMaxLifetimeJitter_BadInput(t *testing.T) {
	for _, f := range []float64{-0.1, 1, 1.5, math.NaN(), math.Inf(1), math.Inf(-1)} {
		assert.Panics(t, func() { netidle.MaxLifetimeJitter(f) }, "MaxLifetimeJitter(%v)", f)
		func() {
			defer func() {
				msg, _ := recover().(string)
				assert.Contains(t, msg, "netidle: MaxLifetimeJitter called with", "MaxLifetimeJitter(%v)", f)
			}()
			netidle.MaxLifetimeJitter(f)
		}()
	}
	h, _ := newMock(t)
	server, client := net.Pipe()
	defer server.Close()
	defer client.Close()
	jitter := netidle.MaxLifetimeJitter(0.1)
	assert.PanicsWithValue(t, "netidle: NewPolicy called with MaxLifetimeJitter(0.1) but without MaxLifetime: there is no lifetime to spread",
		func() { netidle.NewPolicy(h, time.Minute, jitter) })
	assert.PanicsWithValue(t, "netidle: Conn called with MaxLifetimeJitter(0.1) but without MaxLifetime: there is no lifetime to spread",
		func() { netidle.Conn(h, server, time.Minute, jitter) })
	assert.PanicsWithValue(t, "netidle: Listener called with MaxLifetimeJitter(0.1) but without MaxLifetime: there is no lifetime to spread",
		func() { netidle.Listener(h, nil, time.Minute, jitter) })
	assert.NotPanics(t, func() { netidle.NewPolicy(h, time.Minute, netidle.MaxLifetimeJitter(0)) })
}
