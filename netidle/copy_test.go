package netidle_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// copyAllTo copies src to c with io.Copy, half-closes c, and checks that
// the peer, client, read exactly data.
func copyAllTo(t *testing.T, c net.Conn, src io.Reader, client net.Conn, data []byte) {
	t.Helper()
	got := readAllAsync(client)
	n, err := io.Copy(c, src)
	require.NoError(t, err)
	require.EqualValues(t, len(data), n)
	require.NoError(t, c.(interface{ CloseWrite() error }).CloseWrite())
	assert.True(t, bytes.Equal(data, recvWithin(t, 20*time.Second, got, "the peer's ReadAll")), "the bytes the peer read")
}

func TestIdleCopy_FileToConnDeliversEveryByte(t *testing.T) {
	for name, opts := range copyOpts {
		t.Run(name, func(t *testing.T) {
			h, _ := newMock(t)
			server, client := watchedPair(t, 20*time.Second, "io.Copy of a file")
			f, data := randomFile(t, 3<<20+12345)
			c := netidle.Conn(h, server, time.Hour, opts...)
			copyAllTo(t, c, f, client, data)
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
			server, client := watchedPair(t, 20*time.Second, "a half-closed exchange")
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
	h := startedHierarchy(t)
	server, _ := watchedPair(t, 20*time.Second, "the idle close of a conn under io.Copy")
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

// streamPair returns both ends of a fresh stream connection of network
// ("tcp" on 127.0.0.1, or "unix" in a fresh directory), closed when the
// test ends.
func streamPair(t *testing.T, network string) (server, client net.Conn) {
	t.Helper()
	if network == "tcp" {
		return tcpPair(t)
	}
	dir, err := os.MkdirTemp("", "netidle")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, "s"))
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.DialTimeout("unix", ln.Addr().String(), 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	server = recvWithin(t, 10*time.Second, accepted, "Accept of a dialled unix conn")
	require.NotNil(t, server, "Accept failed")
	t.Cleanup(func() { server.Close() })
	return server, client
}

// TestIdleCopy_LargeWriteCountsPieceByPieceOnTCPAndUnix (issue 39, 5):
// under AllIdle, one 8 MiB Write to a peer that reads 1 MiB every 50ms
// (on a Mock moved by the test) counts as traffic as it moves, on a TCP
// conn and on a Unix one alike: idle is 200ms, and the conn stays open for
// the whole Write. After each 1 MiB the peer reads, the test waits (up to
// 2s) for the Write to count a piece before it moves the clock on, unless
// the Write has returned (the kernel's buffers took the rest).
func TestIdleCopy_LargeWriteCountsPieceByPieceOnTCPAndUnix(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			h, mock := newMock(t)
			server, client := streamPair(t, network)
			watchdog(t, 60*time.Second, "the 8 MiB Write and the peer's reads", server, client)
			const idle = 200 * time.Millisecond
			const size = 8 << 20
			c := netidle.Conn(h, server, idle, netidle.AllIdle()).(netidle.Control)
			defer c.Close()
			wrote := make(chan error, 1)
			var finished atomic.Bool
			go func() {
				_, err := c.Write(make([]byte, size))
				finished.Store(true)
				wrote <- err
			}()
			buf := make([]byte, 1<<20)
			for got := 0; got < size; {
				advanceBy(t, h, mock, 50*time.Millisecond, "50ms more")
				before := c.IdleDeadline()
				n, err := io.ReadFull(client, buf[:min(len(buf), size-got)])
				require.NoError(t, err, "the peer's read after %d bytes: the conn was closed mid-write", got)
				got += n
				for wait := time.Now(); !c.IdleDeadline().After(before) && !finished.Load() && time.Since(wait) < 2*time.Second; {
					time.Sleep(time.Millisecond)
				}
			}
			require.NoError(t, recvWithin(t, 10*time.Second, wrote, "the 8 MiB Write"))
		})
	}
}

// TestIdleCopy_TricklingProxyStaysOpen (issue 39, 6): a proxy that moves
// data with io.Copy both ways between two wrapped conns (the kernel's
// splice paths, through WriteTo and ReadFrom), idle 300ms, with or without
// AllIdle; a client sends 64 B every 75ms (on a Mock moved by the test)
// and reads the echo. The data counts as it moves: both conns stay open
// for the 1.5s of the test, 5 idle periods.
func TestIdleCopy_TricklingProxyStaysOpen(t *testing.T) {
	for _, allIdle := range []bool{false, true} {
		t.Run(fmt.Sprintf("allidle=%v", allIdle), func(t *testing.T) {
			h, mock := newMock(t)
			const idle = 300 * time.Millisecond
			var opts []netidle.Option
			if allIdle {
				opts = append(opts, netidle.AllIdle())
			}
			echoServer, upstream := tcpPair(t) // the upstream server echoes
			go io.Copy(echoServer, echoServer)
			proxied, client := tcpPair(t)
			in := netidle.Conn(h, proxied, idle, opts...)
			out := netidle.Conn(h, upstream, idle, opts...)
			defer in.Close()
			defer out.Close()
			watchdog(t, 30*time.Second, "the echo of the client's data through the proxy", client, in, out, echoServer)
			go io.Copy(out, in)
			go io.Copy(in, out)
			msg := strings.Repeat("x", 64)
			for i := range 20 {
				send(t, client, msg)
				buf := make([]byte, len(msg))
				_, err := io.ReadFull(client, buf)
				require.NoError(t, err, "the echo of message %d, at %v: the proxy's conns were closed while data moved every 75ms",
					i, time.Duration(i)*75*time.Millisecond)
				advanceBy(t, h, mock, 75*time.Millisecond, "75ms more")
			}
			for _, c := range []net.Conn{in, out} {
				assert.False(t, c.(netidle.Control).IdleDeadline().Before(h.Now()), "a conn's idle deadline passed while data moved")
			}
		})
	}
}

// spyConn is a TCP conn that records how data is written to it: through
// its ReadFrom (the kernel's sendfile and splice paths) or its Write.
// started receives a value when the first ReadFrom begins.
type spyConn struct {
	*net.TCPConn
	readFroms, writes atomic.Int32
	started           chan struct{}
}

func newSpyConn(c net.Conn) *spyConn {
	return &spyConn{TCPConn: c.(*net.TCPConn), started: make(chan struct{}, 1)}
}

func (s *spyConn) ReadFrom(r io.Reader) (int64, error) {
	if s.readFroms.Add(1) == 1 {
		s.started <- struct{}{}
	}
	return s.TCPConn.ReadFrom(r)
}

func (s *spyConn) Write(p []byte) (int, error) {
	s.writes.Add(1)
	return s.TCPConn.Write(p)
}

// io.Copy to a conn from a file or a TCP conn reaches the conn's ReadFrom
// through the source's WriteTo (which hands over the source with its
// WriteTo hidden); with options that count written data too, the data
// still goes through the wrapped conn's ReadFrom (sendfile, splice), not
// through its Write.
func TestIdleCopy_IoCopyKeepsTheKernelPathWhenWrittenDataCounts(t *testing.T) {
	for _, from := range []string{"file", "tcp"} {
		for name, opts := range copyOpts {
			t.Run(from+"/"+name, func(t *testing.T) {
				h, _ := newMock(t)
				server, client := watchedPair(t, 20*time.Second, "io.Copy from a "+from)
				spy := newSpyConn(server)
				c := netidle.Conn(h, spy, time.Hour, opts...)
				defer c.Close()
				f, data := randomFile(t, 3<<20+99)
				var src io.Reader = f
				if from == "tcp" {
					in, out := tcpPair(t)
					watchdog(t, 20*time.Second, "the source conn", in, out)
					go func() {
						out.Write(data)
						out.(*net.TCPConn).CloseWrite()
					}()
					src = in
				}
				copyAllTo(t, c, src, client, data)
				assert.Positive(t, spy.readFroms.Load(), "calls of the wrapped conn's ReadFrom")
				assert.Zero(t, spy.writes.Load(), "Writes to the wrapped conn: the copy left the kernel's path")
			})
		}
	}
}

// A copy through the kernel's path to a peer that reads nothing is a Write
// in progress: no write-idle event runs while it lasts, as for a blocked
// Write.
func TestIdleCopy_CopyInProgressIsNotWriteIdle(t *testing.T) {
	for _, how := range []string{"io.Copy", "io.CopyN"} {
		t.Run(how, func(t *testing.T) {
			h, mock := newMock(t)
			server, _ := watchedPair(t, 20*time.Second, how+" to a peer that reads nothing")
			spy := newSpyConn(server)
			e := newEvents(h)
			c := netidle.Conn(h, spy, time.Hour, netidle.OnWriteIdle(time.Second, e.f))
			f, err := os.Create(filepath.Join(t.TempDir(), "sparse"))
			require.NoError(t, err)
			defer f.Close()
			const size = 64 << 20 // more than the socket buffers hold; sparse: made at once
			require.NoError(t, f.Truncate(size))
			done := make(chan error, 1)
			go func() {
				var err error
				if how == "io.Copy" {
					_, err = io.Copy(c, f)
				} else {
					_, err = io.CopyN(c, f, size)
				}
				done <- err
			}()
			recvWithin(t, 10*time.Second, spy.started, "the copy's start")
			for range 5 {
				advanceBy(t, h, mock, time.Second, "a second")
			}
			assert.Zero(t, e.n(), "write-idle events while the copy was in progress")
			c.Close()
			require.Error(t, recvWithin(t, 10*time.Second, done, "the copy's return after Close"))
		})
	}
}

// peekedConn is a sniffing proxy's conn (an SNI router's): its Read serves
// the bytes it peeked off the socket first, and it exposes the socket
// (SyscallConn) for socket options. It has no WriteTo.
type peekedConn struct {
	net.Conn
	r io.Reader
}

func (p *peekedConn) Read(b []byte) (int, error) { return p.r.Read(b) }
func (p *peekedConn) SyscallConn() (syscall.RawConn, error) {
	return p.Conn.(syscall.Conn).SyscallConn()
}

// io.Copy(backend, c), c wrapping a conn of another package that holds
// the whole request, already read off its socket, while the client waits
// for the answer: the wrapper copies it at once, as the bare conn does,
// through the conn's Read (the kernel's path would wait behind the socket,
// which holds none of it).
func TestIdleCopy_CopyFromAConnOfAnotherPackageGoesThroughItsRead(t *testing.T) {
	h := startedHierarchy(t)
	for _, wrapped := range []bool{false, true} {
		server, _ := watchedPair(t, 20*time.Second, "io.Copy of a peeked conn")
		dst, dstPeer := watchedPair(t, 20*time.Second, "the backend")
		var src net.Conn = &peekedConn{Conn: server, r: io.MultiReader(strings.NewReader("HELLO"), server)}
		if wrapped {
			src = netidle.Conn(h, src, time.Minute)
		}
		go io.Copy(dst, src)
		dstPeer.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 5)
		if _, err := io.ReadFull(dstPeer, b); err != nil {
			t.Errorf("wrapped=%v: the backend did not get the 5 peeked bytes within 5 s: %v", wrapped, err)
		}
		server.Close()
		dst.Close()
	}
}

// io.Copy(c, upstream) with OnWriteIdle and a silent upstream: nothing is
// written to c, so the write-idle event (a ping) runs each period, whether
// the copy goes through Write (a net.Pipe upstream) or the kernel's path
// (a TCP upstream, which waits for the upstream outside any Write).
func TestIdleCopy_CopyWaitingOnASilentSourceIsWriteIdle(t *testing.T) {
	for _, src := range []string{"pipe", "tcp"} {
		t.Run(src, func(t *testing.T) {
			h, mock := newMock(t)
			server, _ := watchedPair(t, 20*time.Second, "io.Copy from a silent upstream ("+src+")")
			var up, upPeer net.Conn
			if src == "pipe" {
				up, upPeer = net.Pipe()
			} else {
				up, upPeer = tcpPair(t)
			}
			defer up.Close()
			defer upPeer.Close()
			e := newEvents(h)
			c := netidle.Conn(h, server, time.Hour, netidle.OnWriteIdle(time.Second, e.f))
			done := make(chan error, 1)
			go func() { _, err := io.Copy(c, up); done <- err }()
			time.Sleep(100 * time.Millisecond) // the copy waits on the upstream
			for range 5 {
				advanceBy(t, h, mock, time.Second, "a second")
			}
			if n := e.n(); n < 4 {
				t.Errorf("upstream %s: %d write-idle events in 5 s with nothing written to the conn (OnWriteIdle(1s)), want 5", src, n)
			}
			upPeer.Close()
			recvWithin(t, 10*time.Second, done, "the copy's return after the upstream closed")
		})
	}
}
