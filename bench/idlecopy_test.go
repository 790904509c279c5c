package bench

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel/netidle"
)

// BenchmarkIdleCopy measures io.Copy of 64 MiB over loopback TCP, side by
// side in one run: through the bare conn (impl=bare), through netidle.Conn
// (impl=idleconn: ReadFrom passes straight to the conn's, WriteTo splices
// what the source socket has received, call by call, counting each as
// data read) and through netidle.Conn with AllIdle (impl=allidle: ReadFrom
// counted too: sendfile in 256 KiB calls, splice bounded as WriteTo's). Over loopback the wall time is the same either way; what the
// wrapper could cost is CPU, so each reports cpu-ns/op, the process's CPU
// time (user + system, getrusage) per copy, the receiving end's included.
// Compare with
//
//	go test -run '^$' -bench IdleCopy -count 6 . > copy.txt
//	go run ./cmd/pairratio -base bare -other idleconn -metric cpu-ns/op copy.txt
//	go run ./cmd/pairratio -base bare -other allidle -metric cpu-ns/op copy.txt
//
// path=file-tcp is io.Copy(conn, *os.File): sendfile. path=tcp-tcp is a
// proxy's io.Copy(upstream, conn), conn the wrapped one, a client conn per
// op that sends 64 MiB and then EOF: splice. (The client's writes are
// counted in the CPU of both: they run during the copy.)
func BenchmarkIdleCopy(b *testing.B) {
	const size = 64 << 20
	h := startedWheel(b)
	defer h.Stop()
	name := filepath.Join(b.TempDir(), "data")
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(name, data, 0o600); err != nil {
		b.Fatal(err)
	}
	impls := []struct {
		name string
		wrap func(net.Conn) net.Conn
	}{
		{"bare", func(c net.Conn) net.Conn { return c }},
		{"idleconn", func(c net.Conn) net.Conn { return netidle.Conn(h, c, time.Hour) }},
		{"allidle", func(c net.Conn) net.Conn { return netidle.Conn(h, c, time.Hour, netidle.AllIdle()) }},
	}
	b.Run("path=file-tcp", func(b *testing.B) {
		for _, impl := range impls {
			b.Run("impl="+impl.name, func(b *testing.B) {
				server, client := loopbackPair(b)
				conn := impl.wrap(server)
				defer conn.Close()
				done := drain(client)
				f, err := os.Open(name)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				b.SetBytes(size)
				cpu := cpuTime()
				for b.Loop() {
					if _, err := f.Seek(0, io.SeekStart); err != nil {
						b.Fatal(err)
					}
					if n, err := io.Copy(conn, f); err != nil || n != size {
						b.Fatalf("io.Copy: %d bytes, %v", n, err)
					}
				}
				b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
				conn.Close()
				if n := <-done; n != int64(b.N)*size {
					b.Fatalf("the peer read %d bytes, want %d", n, int64(b.N)*size)
				}
			})
		}
	})
	b.Run("path=tcp-tcp", func(b *testing.B) {
		for _, impl := range impls {
			b.Run("impl="+impl.name, func(b *testing.B) {
				out, dst := loopbackPair(b)
				defer out.Close()
				done := drain(dst)
				b.SetBytes(size)
				var cpu time.Duration
				for b.Loop() {
					// A client connection per op, sending size bytes and
					// then EOF; the proxy copies it to the upstream conn.
					b.StopTimer()
					in, src := loopbackPair(b) // the proxy's client side, wrapped
					conn := impl.wrap(in)
					go func() {
						src.Write(data)
						src.(*net.TCPConn).CloseWrite()
					}()
					c0 := cpuTime()
					b.StartTimer()
					if n, err := io.Copy(out, conn); err != nil || n != size {
						b.Fatalf("io.Copy: %d bytes, %v", n, err)
					}
					b.StopTimer()
					cpu += cpuTime() - c0
					conn.Close()
					src.Close()
					b.StartTimer()
				}
				b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
				out.Close()
				if n := <-done; n != int64(b.N)*size {
					b.Fatalf("the far end read %d bytes, want %d", n, int64(b.N)*size)
				}
			})
		}
	})
}

// loopbackPair returns both ends of a TCP connection on 127.0.0.1, closed
// when the benchmark ends.
func loopbackPair(b *testing.B) (accepted, dialled net.Conn) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	a := <-ch
	if a == nil {
		b.Fatal("Accept failed")
	}
	b.Cleanup(func() { a.Close(); d.Close() })
	return a, d
}

// drain reads c to its end into a reused buffer and reports how much.
func drain(c net.Conn) <-chan int64 {
	ch := make(chan int64, 1)
	go func() {
		n, _ := io.CopyBuffer(io.Discard, struct{ io.Reader }{c}, make([]byte, 256<<10))
		ch <- n
	}()
	return ch
}
