package bench

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel"
)

// Per-connection idle timeouts on real TCP connections over 127.0.0.1.
//
// The far ends of the connections live in a peer process (this test binary
// run again, see TestMain), so that this process needs one file descriptor
// per connection, not two: with the usual limit of 20,000, 10,000
// connections fit. A size whose descriptors do not fit under the limit is
// skipped, with a "Skipped" line saying so.

// connCounts are the numbers of connections the heartbeat benchmarks hold.
var connCounts = []int{1_000, 10_000}

// idleConn is h.IdleConn once the library has it: idleconn_test.go sets it
// and builds only with -tags idleconn. While it is nil, the benchmarks leave
// api=IdleConn out.
var idleConn func(h *timingwheel.Hierarchy, c net.Conn, idle time.Duration) net.Conn

const (
	peerAddrEnv  = "TIMINGWHEEL_BENCH_PEER_ADDR"
	peerCountEnv = "TIMINGWHEEL_BENCH_PEER_CONNS"
)

// TestMain runs the peer process when it is asked to: it dials the
// connections, says "ready" on stdout, and holds them until its stdin is
// closed.
func TestMain(m *testing.M) {
	if addr := os.Getenv(peerAddrEnv); addr != "" {
		os.Exit(runPeer(addr, os.Getenv(peerCountEnv)))
	}
	os.Exit(m.Run())
}

func runPeer(addr, count string) int {
	n, err := strconv.Atoi(count)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		return 2
	}
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "peer:", err)
			return 1
		}
		conns = append(conns, c)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		c.Close()
	}
	return 0
}

// A tcpSet is n accepted connections whose far ends are held by a peer
// process.
type tcpSet struct {
	conns []net.Conn
	peer  *exec.Cmd
	stdin io.WriteCloser
}

// fdLimit is this process's limit on open files (Go raises the soft limit
// to the hard one at start-up).
func fdLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}

// fdsFor is how many descriptors n connections need in each process, with
// room for the listener, the pipes, the runtime's own and the test
// framework's.
func fdsFor(n int) uint64 { return uint64(n) + 64 }

// openConns opens n connections, or returns why it cannot.
func openConns(tb testing.TB, n int) (*tcpSet, string) {
	if need, limit := fdsFor(n), fdLimit(); need > limit {
		return nil, fmt.Sprintf("%d connections need %d file descriptors per process, the limit (ulimit -n) is %d", n, need, limit)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), peerAddrEnv+"="+ln.Addr().String(), peerCountEnv+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	s := &tcpSet{peer: cmd, stdin: stdin}
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(time.Minute))
	for range n {
		c, err := ln.Accept()
		if err != nil {
			s.close()
			tb.Fatalf("accepted %d of %d connections: %v", len(s.conns), n, err)
		}
		s.conns = append(s.conns, c)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		s.close()
		tb.Fatalf("peer said %q, %v", line, err)
	}
	return s, ""
}

func (s *tcpSet) close() {
	for _, c := range s.conns {
		c.(*net.TCPConn).SetLinger(0) // reset: no TIME_WAIT left behind
		c.Close()
	}
	s.stdin.Close()
	s.peer.Wait()
}

// openLargestConns opens as many connections as the largest of connCounts
// the file-descriptor limit allows (else the smallest), for a benchmark
// that measures one count; size names the count. When they cannot be
// opened it runs size as a skipped sub-benchmark and returns a nil set. The
// set is closed when b ends.
func openLargestConns(b *testing.B) (set *tcpSet, size string) {
	n := connCounts[len(connCounts)-1]
	if fdsFor(n) > fdLimit() {
		n = connCounts[0]
	}
	size = "conns=" + strconv.Itoa(n)
	set, why := openConns(b, n)
	if set == nil {
		b.Run(size, func(b *testing.B) { skipped(b, why) })
		return nil, size
	}
	b.Cleanup(set.close)
	return set, size
}

// skipped reports a size that cannot run, as a "Skipped" line for
// cmd/report, and skips b.
func skipped(b *testing.B, why string) {
	fmt.Printf("Skipped %s: %s\n", b.Name(), why)
	b.Skip(why)
}

// connTimeouts is one way of keeping an idle timeout per connection: on
// each heartbeat (data read from the connection) the deadline moves to
// heartbeat from now; on expiry the connection is closed.
type connTimeouts struct {
	api string

	timers   []*time.Timer                   // api=AfterFunc
	h        *timingwheel.Hierarchy          // api=Timeouts, Timer, IdleConn
	timeouts *timingwheel.Timeouts[net.Conn] // api=Timeouts
	held     []timingwheel.Timer             // api=Timer
	wrapped  []net.Conn                      // api=IdleConn
	conns    []net.Conn
}

// connAPIs are the ways compared, with the implementation under each.
var connAPIs = []struct{ impl, api string }{
	{"runtime", "SetReadDeadline"}, // the net package's own deadline: a runtime timer per conn
	{"runtime", "AfterFunc"},       // time.AfterFunc per conn, Reset on heartbeat
	{"wheel", "Timeouts"},          // Timeouts[net.Conn].Add
	{"wheel", "Timer"},             // a timingwheel.Timer in the per-conn struct
	{"wheel", "IdleConn"},          // h.IdleConn wrapper: re-arms on Read
}

// armConns arms an idle timeout on every connection, 30–60 s out.
func armConns(tb testing.TB, api string, conns []net.Conn) *connTimeouts {
	ct := &connTimeouts{api: api, conns: conns}
	if api == "Timeouts" || api == "Timer" || api == "IdleConn" {
		h := startedWheel(tb)
		ct.h = h
	}
	switch api {
	case "SetReadDeadline":
		now := time.Now()
		for i, c := range conns {
			c.SetReadDeadline(now.Add(farDuration(i)))
		}
	case "AfterFunc":
		ct.timers = make([]*time.Timer, len(conns))
		for i, c := range conns {
			ct.timers[i] = time.AfterFunc(farDuration(i), func() { c.Close() })
		}
	case "Timeouts":
		ct.timeouts = timingwheel.NewTimeouts(ct.h, func(c net.Conn) { c.Close() })
		for i, c := range conns {
			ct.timeouts.Add(c, farDuration(i))
		}
	case "Timer":
		// A server would hold the Timer in its per-connection struct; a
		// slice of Timers counts the bytes that adds to it.
		ct.held = make([]timingwheel.Timer, len(conns))
		for i, c := range conns {
			ct.held[i].Init(ct.h, func() { c.Close() }).Reset(farDuration(i))
		}
	case "IdleConn":
		ct.wrapped = make([]net.Conn, len(conns))
		for i, c := range conns {
			ct.wrapped[i] = idleConn(ct.h, c, farDuration(i))
		}
	default:
		panic("no connection api " + api)
	}
	return ct
}

// disarm takes every timeout off, leaving the connections open.
func (ct *connTimeouts) disarm() {
	if ct.h != nil {
		ct.h.Stop() // the wrappers of api=IdleConn are dropped, not closed: that would close the conns
	}
	switch ct.api {
	case "SetReadDeadline":
		for _, c := range ct.conns {
			c.SetReadDeadline(time.Time{})
		}
	case "AfterFunc":
		for _, t := range ct.timers {
			t.Stop()
		}
	case "Timeouts":
		for _, c := range ct.conns {
			ct.timeouts.Remove(c)
		}
	case "Timer":
		for i := range ct.held {
			ct.held[i].Stop()
		}
	}
}

// BenchmarkHeartbeat: the cost of one heartbeat, i.e. of moving one
// connection's idle timeout to 90 s from now, for 1,000 and 10,000 open
// TCP connections, taken in random order (the heartbeats of many
// connections). Each api is a way a server keeps that timeout; there are no
// other live timers. api=IdleConn re-arms inside Read: see
// BenchmarkIdleConnRead for its cost.
func BenchmarkHeartbeat(b *testing.B) {
	for _, n := range connCounts {
		size := "conns=" + strconv.Itoa(n)
		set, why := openConns(b, n)
		if set == nil {
			b.Run(size, func(b *testing.B) { skipped(b, why) })
			continue
		}
		ord := order(n, true)
		for _, a := range connAPIs {
			if a.api == "IdleConn" {
				continue
			}
			b.Run("impl="+a.impl+"/api="+a.api+"/"+size, func(b *testing.B) {
				ct := armConns(b, a.api, set.conns)
				defer ct.disarm()
				settle()
				b.ReportAllocs()
				i := 0
				next := func() int {
					k := int(ord[i])
					if i++; i == len(ord) {
						i = 0
					}
					return k
				}
				switch a.api {
				case "SetReadDeadline":
					conns := set.conns
					for b.Loop() {
						conns[next()].SetReadDeadline(time.Now().Add(heartbeat))
					}
				case "AfterFunc":
					ts := ct.timers
					for b.Loop() {
						ts[next()].Reset(heartbeat)
					}
				case "Timeouts":
					to, conns := ct.timeouts, set.conns
					for b.Loop() {
						to.Add(conns[next()], heartbeat)
					}
				case "Timer":
					held := ct.held
					for b.Loop() {
						held[next()].Reset(heartbeat)
					}
				}
			})
		}
		set.close()
	}
	settle()
}

// BenchmarkHeapPerConn reports the heap bytes each way of keeping an idle
// timeout adds per connection (B/conn): HeapAlloc after a GC, before and
// after arming the timeouts of 10,000 open connections (1,000 if 10,000 do
// not fit), divided by their number. The connections themselves are open
// before the first reading and not counted; nor is the poll descriptor each
// one has, which holds the runtime timers SetReadDeadline uses and is
// allocated outside the Go heap.
//
// The runtime's timer heaps keep their capacity once grown, so only the
// first runtime api measured in a process sees their growth: cmd/report
// runs api=AfterFunc in a process of its own, with -benchtime=1x.
func BenchmarkHeapPerConn(b *testing.B) {
	set, size := openLargestConns(b)
	if set == nil {
		return
	}
	n := len(set.conns)
	for _, a := range connAPIs {
		if a.api == "IdleConn" && idleConn == nil {
			continue
		}
		b.Run("impl="+a.impl+"/api="+a.api+"/"+size, func(b *testing.B) {
			reportHeapPer(b, "B/conn", float64(n), func(measure func(arm func())) {
				var ct *connTimeouts
				measure(func() { ct = armConns(b, a.api, set.conns) })
				ct.disarm()
			})
		})
	}
}

// readSize is how much BenchmarkIdleConnRead asks for per Read: small, so
// that the per-Read overhead of a wrapper shows.
const readSize = 512

// BenchmarkIdleConnRead: one Read of readSize bytes, with data ready, on a
// TCP connection (impl=raw) and on the same connection wrapped by
// h.IdleConn (impl=idleconn), whose Read also re-arms the idle timeout.
// Each operation first writes readSize bytes at the far end, on the same
// goroutine, and a 64 KiB backlog written beforehand keeps data waiting
// whatever the loopback's timing: so ns/op is a Write plus a Read that never
// waits, and the difference between the two impls is the wrapper's cost.
func BenchmarkIdleConnRead(b *testing.B) {
	impls := []string{"raw"}
	if idleConn != nil {
		impls = append(impls, "idleconn")
	}
	for _, impl := range impls {
		b.Run("impl="+impl+"/read="+strconv.Itoa(readSize)+"B", func(b *testing.B) {
			r, w := loopbackPair(b)
			conn := r
			if impl == "idleconn" {
				h := startedWheel(b)
				defer h.Stop()
				conn = idleConn(h, r, heartbeat)
			}
			writeRead(b, w, w, conn)
		})
	}
}

// writeRead measures a Write of readSize bytes on writer and then a Read of
// readSize on reader, the two ends of one loopback connection (either
// wrapped), after a 64 KiB backlog written on the bare writing end w, which
// keeps data waiting whatever the loopback's timing: no Read waits.
func writeRead(b *testing.B, w, writer, reader net.Conn) {
	if _, err := w.Write(make([]byte, 64<<10)); err != nil {
		b.Fatal(err)
	}
	out, in := make([]byte, readSize), make([]byte, readSize)
	b.ReportAllocs()
	b.SetBytes(readSize)
	for b.Loop() {
		if _, err := writer.Write(out); err != nil {
			b.Fatal(err)
		}
		if _, err := reader.Read(in); err != nil {
			b.Fatal(err)
		}
	}
}
