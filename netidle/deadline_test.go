package netidle_test

import (
	"net"
	"os"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/netidle"
)

// heldConn is a net.Conn whose Read waits until the test lets it return
// data, whatever happens to the conn meanwhile (data that arrived just as
// the conn was closed).
type heldConn struct {
	net.Conn
	reading chan struct{}
	data    chan []byte
}

func (c *heldConn) Read(p []byte) (int, error) {
	c.reading <- struct{}{}
	return copy(p, <-c.data), nil
}

func (c *heldConn) Close() error         { return nil }
func (c *heldConn) LocalAddr() net.Addr  { return nil }
func (c *heldConn) RemoteAddr() net.Addr { return nil }

// TestIdleConn_DeadlineStaysAtTheIdleClose: a Read in flight when the hierarchy closes the conn returns its data, and
// IdleDeadline still reports the instant the conn was closed at, not a
// deadline moved past it at which nothing happens.
func TestIdleConn_DeadlineStaysAtTheIdleClose(t *testing.T) {
	mock := clock.NewMock()
	h, err := timingwheel.New(timingwheel.WithClock(mock))
	require.NoError(t, err)
	start := mock.Now()
	hc := &heldConn{reading: make(chan struct{}), data: make(chan []byte)}
	c := netidle.Conn(h, hc, 100*time.Millisecond)
	ic := c.(interface{ IdleDeadline() time.Time })
	done := make(chan struct{})
	go func() {
		defer close(done)
		n, err := c.Read(make([]byte, 4))
		assert.Equal(t, 4, n, "the data that arrived as the conn was closed")
		assert.NoError(t, err)
	}()
	select {
	case <-hc.reading:
	case <-time.After(5 * time.Second):
		t.Fatal("hung: the Read never reached the conn")
	}
	mock.Add(100 * time.Millisecond)
	require.Equal(t, 1, h.Advance(), "the idle close")
	hc.data <- []byte("data")
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("hung: the Read did not return")
	}
	assert.Equal(t, start.Add(100*time.Millisecond), ic.IdleDeadline(), "IdleDeadline moved after the idle close")
	assert.Equal(t, 0, h.Len(), "the Read left a timer armed for a closed conn")
	_, err = c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
}
