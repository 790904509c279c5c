package netidle_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/netidle"
)

// Tests that the wrapper hides nothing a server relies on: half-close,
// and io.Copy to and from it (the kernel's sendfile and splice paths
// below ReadFrom and WriteTo) delivering every byte and counting as
// traffic; on real TCP conns, with the real clock where the copy is long.

// copyOpts are the options under which each copy runs: written data not
// counted (ReadFrom passes through) and counted (chunked).
var copyOpts = map[string][]netidle.Option{
	"plain":   nil,
	"allidle": {netidle.AllIdle()},
	"write":   {netidle.OnWriteIdle(time.Hour, func(net.Conn) {}), netidle.MaxLifetime(time.Hour)},
}

func randomFile(t *testing.T, n int) (*os.File, []byte) {
	t.Helper()
	data := make([]byte, n)
	_, _ = rand.Read(data)
	name := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.WriteFile(name, data, 0o600))
	f, err := os.Open(name)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f, data
}

// readAllAsync reads c to its end on a goroutine.
func readAllAsync(c net.Conn) <-chan []byte {
	ch := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(c)
		ch <- b
	}()
	return ch
}

func TestIdleCopy_FileToConnDeliversEveryByte(t *testing.T) {
	for name, opts := range copyOpts {
		t.Run(name, func(t *testing.T) {
			h, _ := newMock(t)
			server, client := tcpPair(t)
			watchdog(t, 20*time.Second, "io.Copy of a file", server, client)
			f, data := randomFile(t, 3<<20+12345)
			c := netidle.Conn(h, server, time.Hour, opts...)
			got := readAllAsync(client)
			n, err := io.Copy(c, f)
			require.NoError(t, err)
			require.EqualValues(t, len(data), n)
			require.NoError(t, c.(interface{ CloseWrite() error }).CloseWrite())
			assert.True(t, bytes.Equal(data, recvWithin(t, 20*time.Second, got, "the peer's ReadAll")), "the bytes the peer read")
			c.Close()
		})
	}
}

func TestIdleCopy_TCPThroughConnToTCPDeliversEveryByte(t *testing.T) {
	for name, opts := range copyOpts {
		t.Run(name, func(t *testing.T) {
			h, mock := newMock(t)
			// src -> (in) wrapped (proxy's client side) -> out -> dst
			in, src := tcpPair(t)
			out, dst := tcpPair(t)
			watchdog(t, 20*time.Second, "a proxy's io.Copy", in, src, out, dst)
			c := netidle.Conn(h, in, time.Hour, opts...)
			_, data := randomFile(t, 3<<20+777)
			got := readAllAsync(dst)
			go func() {
				src.Write(data)
				src.(*net.TCPConn).CloseWrite()
			}()
			mock.Add(time.Minute)
			n, err := io.Copy(out, c) // WriteTo: splice from the wrapped conn
			require.NoError(t, err)
			require.EqualValues(t, len(data), n)
			assert.Equal(t, h.Now().Add(time.Hour), c.(netidle.Control).IdleDeadline(), "the data read by WriteTo did not count")
			out.(*net.TCPConn).CloseWrite()
			assert.True(t, bytes.Equal(data, recvWithin(t, 20*time.Second, got, "the far end's ReadAll")))

			// And back: TCP -> wrapped (ReadFrom).
			got = readAllAsync(src)
			go func() {
				dst.Write(data)
				dst.(*net.TCPConn).CloseWrite()
			}()
			mock.Add(time.Minute)
			n, err = io.Copy(c, out)
			require.NoError(t, err)
			require.EqualValues(t, len(data), n)
			require.NoError(t, c.(interface{ CloseWrite() error }).CloseWrite())
			assert.True(t, bytes.Equal(data, recvWithin(t, 20*time.Second, got, "the near end's ReadAll")))
			c.Close()
		})
	}
}

// CloseWrite sends the peer EOF and leaves the conn readable; CloseRead
// is the wrapped conn's; neither exists on a net.Pipe: an error that says so.
func TestIdleCopy_HalfClose(t *testing.T) {
	for name, opts := range copyOpts {
		t.Run(name, func(t *testing.T) {
			h, _ := newMock(t)
			server, client := tcpPair(t)
			watchdog(t, 20*time.Second, "a half-closed exchange", server, client)
			c := netidle.Conn(h, server, time.Hour, opts...)
			defer c.Close()
			send(t, c, "request")
			require.NoError(t, c.(interface{ CloseWrite() error }).CloseWrite())
			b, err := io.ReadAll(client)
			require.NoError(t, err)
			assert.Equal(t, "request", string(b), "the peer did not see EOF after CloseWrite")
			send(t, client, "reply")
			receive(t, c, "reply")
			require.NoError(t, c.(interface{ CloseRead() error }).CloseRead())
			_, err = c.Read(make([]byte, 1))
			assert.ErrorIs(t, err, io.EOF)

			a, _ := net.Pipe()
			p := netidle.Conn(h, a, time.Hour, opts...)
			defer p.Close()
			err = p.(interface{ CloseWrite() error }).CloseWrite()
			assert.ErrorIs(t, err, errors.ErrUnsupported)
			_, err = p.(interface {
				SyscallConn() (syscall.RawConn, error)
			}).SyscallConn()
			assert.ErrorIs(t, err, errors.ErrUnsupported)
		})
	}
}

// A silent peer under a long io.Copy (it reads nothing; the copy blocks
// with the socket buffers full) is closed for idleness with AllIdle, and
// io.Copy returns ErrIdle; a peer that reads keeps it open.
func TestIdleCopy_SilentPeerUnderLongCopyIsClosed(t *testing.T) {
	h, err := timingwheel.New()
	require.NoError(t, err)
	h.Start()
	defer h.Stop()
	server, client := tcpPair(t)
	watchdog(t, 20*time.Second, "the idle close of a conn under io.Copy", server, client)
	const idle = 100 * time.Millisecond
	f, err := os.Create(filepath.Join(t.TempDir(), "sparse"))
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Truncate(64<<20)) // more than the socket buffers hold; sparse: made at once
	start := time.Now()
	c := netidle.Conn(h, server, idle, netidle.AllIdle())
	_, err = io.Copy(c, f)
	assertIdleErr(t, err, netidle.ErrIdle, "io.Copy to a silent peer")
	assert.GreaterOrEqual(t, time.Since(start), idle, "closed before idle")
}
