package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/internal/demo"
	"github.com/timingwheel/timingwheel/netidle"
)

// The ways the server can keep its idle timeouts (-mode).
const (
	modeWheel    = "wheel"    // netidle.Listener: a clock read per Read with data, one timer per conn
	modeDeadline = "deadline" // conn.SetReadDeadline(time.Now().Add(timeout)) before every Read
	modeBoth     = "both"     // wheel, then deadline, on the same workload
)

// modeHow says in a few words what each mode does.
var modeHow = map[string]string{
	modeWheel:    "netidle.Listener, the timing wheel closes idle connections",
	modeDeadline: "SetReadDeadline before every Read",
}

// config is everything run needs; the flags fill it in main.
type config struct {
	Addr     string
	Mode     string // modeWheel or modeDeadline (main runs modeBoth as one run of each)
	Conns    int    // the demo's own clients; 0: outside clients only
	Timeout  time.Duration
	Interval time.Duration
	Silent   float64
	Duration time.Duration // 0 (with Conns 0 only): until interrupted
	Seed     uint64        // 0: pick one at random

	// Slack separates the last deadline a silent client can have from the end
	// of the run, so that "every silent client was closed by the end" is a
	// fair check: silent clients stop early enough for it.
	Slack time.Duration

	Progress   io.Writer         // one line per second while the demo's clients run; nil for none
	Notes      io.Writer         // notices and outside clients' comings and goings; nil for none
	CPUProfile bool              // measure the timers' CPU with a CPU profile
	Listening  func(addr string) // if not nil, called with the server's address once it listens
}

func defaultConfig() config {
	return config{
		Addr:     "127.0.0.1:0",
		Mode:     modeWheel,
		Conns:    10_000,
		Timeout:  3 * time.Second,
		Interval: time.Second,
		Silent:   0.2,
		Duration: 10 * time.Second,
		Slack:    time.Second,
	}
}

// validate reports the first setting that cannot work, naming its flag.
func (c config) validate() error {
	switch {
	case c.Mode != modeWheel && c.Mode != modeDeadline && c.Mode != modeBoth:
		return fmt.Errorf("-mode must be %s, %s or %s, got %q", modeWheel, modeDeadline, modeBoth, c.Mode)
	case c.Conns < 0:
		return fmt.Errorf("-conns must be 0 (outside clients only) or more, got %d", c.Conns)
	case c.Timeout <= 0:
		return fmt.Errorf("-timeout must be positive, got %v", c.Timeout)
	case c.Interval <= 0:
		return fmt.Errorf("-interval must be positive, got %v", c.Interval)
	case c.Interval > c.Timeout/2:
		return fmt.Errorf("-interval (%v) must be at most half of -timeout (%v), "+
			"or clients that do send heartbeats could be closed as idle", c.Interval, c.Timeout)
	case math.IsNaN(c.Silent) || c.Silent < 0 || c.Silent > 1:
		return fmt.Errorf("-silent is the fraction of clients that fall silent and must be between 0 and 1, got %v", c.Silent)
	case c.Duration < 0:
		return fmt.Errorf("-duration must be positive, got %v", c.Duration)
	case c.Duration == 0 && c.Conns > 0:
		return fmt.Errorf("-duration 0 (run until Ctrl-C) needs -conns 0: the demo's own clients are judged over a fixed run")
	case c.Duration == 0 && c.Mode == modeBoth:
		return fmt.Errorf("-mode both needs a -duration: the second mode starts when the first ends")
	case c.Slack < 0:
		return fmt.Errorf("slack must not be negative, got %v", c.Slack)
	case c.Conns > 0 && c.Silent > 0 && c.Duration <= c.Timeout+c.Slack:
		return fmt.Errorf("-duration (%v) must be longer than -timeout (%v) plus %v, "+
			"so that clients falling silent can be seen to be closed before the end", c.Duration, c.Timeout, c.Slack)
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("-addr %q is not host:port: %v", c.Addr, err)
	}
	return nil
}

// driverLabels mark the hierarchy's driver goroutine in CPU profiles (it
// inherits them from the goroutine that calls Start); see cpuprofile.go.
var driverLabels = pprof.Labels("timer", "driver")

// server closes connections that send nothing for timeout. In wheel mode
// that takes one line: the listener is wrapped by netidle.Listener, and a Read
// error that is a timeout means the wheel closed the conn. In deadline mode
// each Read is preceded by SetReadDeadline. Everything else here is
// bookkeeping for the report.
type server struct {
	mode    string
	timeout time.Duration
	events  io.Writer                // outside clients' comings and goings
	demo    func(remote string) bool // reports whether remote is one of the demo's own clients
	dialing atomic.Bool              // the demo's clients are connecting: demo is not final yet

	heartbeats atomic.Int64 // lines received, from every client
	open       atomic.Int64 // connections whose reader is still running
	timedOut   atomic.Int64 // connections closed for being idle

	mu    sync.Mutex
	conns []*sconn // every accepted connection, in order

	wg sync.WaitGroup // readers
}

// How a server connection ended.
type endKind int

const (
	stillOpen endKind = iota
	endTimedOut
	endPeerClosed // io.EOF: the client closed it
	endClosed     // the server closed it (teardown)
	endError      // anything else, such as a reset
)

// sconn is the server's record of one connection. The reader goroutine
// writes it under mu; the report reads it under mu.
type sconn struct {
	c      net.Conn
	remote string

	mu      sync.Mutex
	known   bool   // whether outside is known yet
	outside bool   // not one of the demo's own clients
	name    string // from the client's first naming line, if any
	lines   int64
	end     endKind
	at      time.Time     // when it ended
	late    time.Duration // for endTimedOut: at minus the deadline it was closed for
	err     error
}

func (s *server) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors, most likely: the pending connection
			// stays queued, so back off and try again.
			time.Sleep(5 * time.Millisecond)
			continue
		}
		sc := &sconn{c: c, remote: c.RemoteAddr().String()}
		if !s.dialing.Load() {
			sc.mu.Lock()
			s.classifyLocked(sc)
			sc.mu.Unlock()
		}
		s.mu.Lock()
		s.conns = append(s.conns, sc)
		s.mu.Unlock()
		s.open.Add(1)
		s.wg.Add(1)
		go s.serve(sc)
	}
}

// classifyLocked tells whether sc is an outside client, once that is
// sure: after the demo's clients have connected, or once sc has sent a
// line or ended (a demo client is registered before it sends anything).
// sc.mu must be held.
func (s *server) classifyLocked(sc *sconn) {
	if sc.known {
		return
	}
	sc.known, sc.outside = true, !s.demo(sc.remote)
	if sc.outside {
		fmt.Fprintf(s.events, "idleconn: outside client %s connected\n", sc.remote)
	}
}

// deadlineReader is deadline mode's reader: a read deadline timeout from
// now before every Read.
type deadlineReader struct {
	c        net.Conn
	timeout  time.Duration
	deadline time.Time // of the latest Read
}

func (r *deadlineReader) Read(p []byte) (int, error) {
	r.deadline = time.Now().Add(r.timeout)
	if err := r.c.SetReadDeadline(r.deadline); err != nil {
		return 0, err
	}
	return r.c.Read(p)
}

// idleDeadline is what the conns of a netidle.Listener offer beyond net.Conn.
type idleDeadline interface{ IdleDeadline() time.Time }

// serve reads lines until the connection ends. Every line is a heartbeat;
// "id NAME" or a bare number names the client.
func (s *server) serve(sc *sconn) {
	defer s.wg.Done()
	var r io.Reader = sc.c
	dr := (*deadlineReader)(nil)
	if s.mode == modeDeadline {
		dr = &deadlineReader{c: sc.c, timeout: s.timeout}
		r = dr
	}
	br := bufio.NewReaderSize(r, 128)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // a long line: its end is still to come
		}
		if err != nil {
			s.ended(sc, err, dr)
			break
		}
		s.heartbeats.Add(1)
		sc.mu.Lock()
		s.classifyLocked(sc)
		sc.lines++
		if sc.name == "" {
			if sc.name = nameIn(line); sc.name != "" && sc.outside {
				fmt.Fprintf(s.events, "idleconn: outside client %s is %q\n", sc.remote, sc.name)
			}
		}
		sc.mu.Unlock()
	}
	sc.c.Close()
	s.open.Add(-1)
}

// ended records how sc ended: err is its reader's error.
func (s *server) ended(sc *sconn, err error, dr *deadlineReader) {
	now := time.Now()
	sc.mu.Lock()
	defer sc.mu.Unlock()
	s.classifyLocked(sc)
	sc.at, sc.err = now, err
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The wheel closed the conn, or its read deadline passed: lateness
		// is counted from that deadline to the reader seeing it.
		var deadline time.Time
		if dr != nil {
			deadline = dr.deadline
		} else {
			deadline = sc.c.(idleDeadline).IdleDeadline()
		}
		sc.end, sc.late = endTimedOut, now.Sub(deadline)
		s.timedOut.Add(1)
	case errors.Is(err, io.EOF):
		sc.end = endPeerClosed
	case errors.Is(err, net.ErrClosed):
		sc.end = endClosed
	default:
		sc.end = endError
	}
	if sc.outside {
		switch sc.end {
		case endTimedOut:
			fmt.Fprintf(s.events, "idleconn: outside client %s closed: idle for %v (%v after its deadline)\n",
				sc.remote, s.timeout, ms(sc.late))
		case endPeerClosed:
			fmt.Fprintf(s.events, "idleconn: outside client %s left\n", sc.remote)
		case endError:
			fmt.Fprintf(s.events, "idleconn: outside client %s: %v\n", sc.remote, err)
		}
	}
}

// nameIn returns the name a line gives its client: NAME for "id NAME", the
// number itself for a bare decimal number, "" for any other line.
func nameIn(line []byte) string {
	s := strings.TrimSpace(string(line))
	if rest, ok := strings.CutPrefix(s, "id "); ok {
		s = strings.TrimSpace(rest)
	} else if _, err := strconv.ParseUint(s, 10, 64); err != nil {
		return ""
	}
	if len(s) > 32 {
		s = s[:32]
	}
	return s
}

// client sends its id as a line right after connecting and then about every
// interval; a silent client sends nothing from quietAt on.
type client struct {
	id      int
	conn    net.Conn
	addr    string // conn's local address: how the server tells it from outside clients
	silent  bool
	quietAt time.Time
	rng     *rand.Rand

	// Written by the client's goroutine, read after it has ended.
	lastSent time.Time
	err      error
}

func (cl *client) run(interval time.Duration, stop <-chan struct{}, done func()) {
	defer done()
	line := strconv.AppendInt(nil, int64(cl.id), 10)
	line = append(line, '\n')
	var wait time.Duration // the first line goes at once
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		now := time.Now()
		if cl.silent && !cl.lastSent.IsZero() && !now.Before(cl.quietAt) {
			return // every client sends one line first, silent or not
		}
		if _, err := cl.conn.Write(line); err != nil {
			cl.err = err
			return
		}
		cl.lastSent = now
		// Jitter each gap by ±20% so the heartbeats spread out.
		wait = interval*4/5 + time.Duration(cl.rng.Int64N(int64(interval*2/5)+1))
		t.Reset(wait)
	}
}

// run starts the server, connects the clients, runs for cfg.Duration (or
// until ctx is done), and reports. An error means the run could not take
// place; failed checks are in report.problems.
func run(ctx context.Context, cfg config) (*report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Mode == modeBoth {
		return nil, errors.New("run takes one mode at a time; main runs both in turn")
	}
	cfg.Seed = demo.PickSeed(cfg.Seed)
	// The readers write notes about outside clients as they come and go:
	// one lock for both writers keeps lines whole and in order.
	var outMu sync.Mutex
	progress, notes := io.Writer(io.Discard), io.Writer(io.Discard)
	if cfg.Progress != nil {
		progress = &lockedWriter{mu: &outMu, w: cfg.Progress}
	}
	if cfg.Notes != nil {
		notes = &lockedWriter{mu: &outMu, w: cfg.Notes}
	}
	rep := &report{Mode: cfg.Mode, Seed: cfg.Seed, Requested: cfg.Conns, Timeout: cfg.Timeout}

	n := 0
	if cfg.Conns > 0 {
		var note string
		var err error
		n, note, err = demo.FitConns(cfg.Conns)
		if err != nil {
			return nil, err
		}
		if note != "" {
			fmt.Fprintln(notes, "idleconn:", note)
		}
	}
	rep.Conns = n

	clients := make([]*client, n)
	demoAddrs := make(map[string]bool, n) // the demo clients' local addresses
	var demoMu sync.Mutex
	srv := &server{
		mode:    cfg.Mode,
		timeout: cfg.Timeout,
		events:  notes,
		demo: func(remote string) bool {
			demoMu.Lock()
			defer demoMu.Unlock()
			return demoAddrs[remote]
		},
	}
	rawLn, err := listen(cfg.Addr)
	if err != nil {
		return nil, err
	}
	ln := rawLn
	var h *timingwheel.Hierarchy
	if cfg.Mode == modeWheel {
		h, err = timingwheel.New()
		if err != nil {
			rawLn.Close()
			return nil, err
		}
		// The driver goroutine inherits these labels, so profile samples
		// taken while it runs are attributed to it.
		pprof.Do(context.Background(), driverLabels, func(context.Context) { h.Start() })
		defer h.Stop()
		ln = netidle.Listener(h, rawLn, cfg.Timeout)
	}
	rep.Addr = rawLn.Addr().String()
	how := modeHow[cfg.Mode]
	if n == 0 {
		until := "until Ctrl-C"
		if cfg.Duration > 0 {
			until = fmt.Sprintf("for %v (or until Ctrl-C)", cfg.Duration)
		}
		host, port, _ := net.SplitHostPort(rep.Addr)
		fmt.Fprintf(notes, "idleconn: mode %s (%s); serving outside clients on %s %s, timeout %v\n",
			cfg.Mode, how, rep.Addr, until, cfg.Timeout)
		fmt.Fprintf(notes, "idleconn: connect with: nc %s %s   (every line is a heartbeat; \"id NAME\" names you)\n", host, port)
	}
	if cfg.Listening != nil {
		cfg.Listening(rep.Addr)
	}

	acceptDone := make(chan struct{})
	go func() { defer close(acceptDone); srv.accept(ln) }()

	stop := make(chan struct{})
	var clientWG sync.WaitGroup
	stopClients := sync.OnceFunc(func() { close(stop); clientWG.Wait() })
	teardown := sync.OnceFunc(func() {
		stopClients()
		ln.Close()
		<-acceptDone
		for _, cl := range clients {
			if cl != nil && cl.conn != nil {
				cl.conn.Close()
			}
		}
		srv.mu.Lock()
		for _, sc := range srv.conns {
			sc.c.Close()
		}
		srv.mu.Unlock()
		srv.wg.Wait()
	})
	defer teardown() // also after an error

	// Decide who falls silent, and when: a silent client's last deadline
	// must leave cfg.Slack before the end of the run.
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x1d1e))
	nSilent := int(math.Round(cfg.Silent * float64(n)))
	window := cfg.Duration - cfg.Timeout - cfg.Slack
	for i, j := range rng.Perm(n) {
		clients[j] = &client{
			id:     j,
			silent: i < nSilent,
			rng:    rand.New(rand.NewPCG(cfg.Seed, uint64(j))),
		}
	}

	var heapOpen uint64 // with every demo connection open
	if n > 0 {
		// Connect, a few dozen at a time so the listen queue never overflows.
		dialStart := time.Now()
		srv.dialing.Store(true)
		failed, err := demo.DialAll(rep.Addr, n, func(i int, c net.Conn) {
			cl := clients[i]
			cl.conn, cl.addr = c, c.LocalAddr().String()
			// Known as a demo client before it sends anything.
			demoMu.Lock()
			demoAddrs[cl.addr] = true
			demoMu.Unlock()
			if cl.silent {
				cl.quietAt = time.Now().Add(time.Duration(cl.rng.Int64N(int64(window))))
			}
			clientWG.Add(1)
			go cl.run(cfg.Interval, stop, clientWG.Done)
		})
		srv.dialing.Store(false)
		if err != nil {
			return nil, dialError(failed, n, err)
		}
		rep.ConnectTime = time.Since(dialStart)
		// Wait for the server to have them all, then weigh the process; the
		// weight of the connections is what goes once they are closed.
		for wait := time.Now().Add(10 * time.Second); srv.open.Load() < int64(n) && time.Now().Before(wait); {
			time.Sleep(time.Millisecond)
		}
		heapOpen = demo.MemAfterGC().HeapAlloc
		fmt.Fprintf(progress, "idleconn: mode %s (%s); server on %s\n", cfg.Mode, how, rep.Addr)
		fmt.Fprintf(progress, "idleconn: %d clients connected in %v (%d will fall silent); timeout %v, running %v\n",
			n, rep.ConnectTime.Round(time.Millisecond), nSilent, cfg.Timeout, cfg.Duration)
	}

	var cpu *cpuMeter
	if cfg.CPUProfile {
		cpu, err = startCPUMeter()
		if err != nil {
			fmt.Fprintln(notes, "idleconn: timer CPU not measured:", err)
		}
	}
	cpu0, cpuOK := demo.ProcessCPU()

	// Run, printing one line per second while the demo's clients run.
	start := time.Now()
	var tick <-chan time.Time
	if n > 0 {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		tick = t.C
	}
	var endTimer <-chan time.Time
	if cfg.Duration > 0 {
		t := time.NewTimer(cfg.Duration)
		defer t.Stop()
		endTimer = t.C
	}
	last, lastBeats := start, srv.heartbeats.Load()
	startBeats := lastBeats
	var lastStats timingwheel.Stats
	if h != nil {
		lastStats = h.Stats()
	}
loop:
	for {
		select {
		case <-ctx.Done():
			rep.Interrupted = true
			break loop
		case <-endTimer:
			break loop
		case now := <-tick:
			beats := srv.heartbeats.Load()
			line := fmt.Sprintf("%5.1fs  open %6d  heartbeats/s %6.0f  closed idle %6d",
				now.Sub(start).Seconds(), srv.open.Load(),
				float64(beats-lastBeats)/now.Sub(last).Seconds(), srv.timedOut.Load())
			if h != nil {
				// The wheel's lateness over this second alone: the
				// difference of two snapshots of its histogram.
				st := h.Stats()
				late := "-"
				if sec := latenessSince(lastStats, st); sec.Fired > 0 {
					late = bound(sec.LatenessQuantile(0.99))
				}
				line += fmt.Sprintf("  wheel.Len %6d  late p99 %9s", st.Armed, late) // Armed is Len
				lastStats = st
			}
			fmt.Fprintln(progress, line)
			last, lastBeats = now, beats
		}
	}
	end := time.Now()
	rep.Elapsed = end.Sub(start)
	if h != nil {
		st := h.Stats() // before the teardown closes (and so stops) the rest
		rep.Wheel = &st
	}
	if cpu1, ok := demo.ProcessCPU(); ok && cpuOK {
		rep.ProcessCPU = cpu1 - cpu0
	}
	if cpu != nil {
		rep.CPU, err = cpu.stop()
		if err != nil {
			fmt.Fprintln(notes, "idleconn: timer CPU not measured:", err)
		}
	}
	rep.RunHeartbeats = srv.heartbeats.Load() - startBeats

	// Stop the clients, and judge what happened up to the end.
	stopClients()
	byAddr := make(map[string]*client, n)
	for _, cl := range clients {
		if cl.conn != nil {
			byAddr[cl.addr] = cl
		}
	}
	srv.mu.Lock()
	rep.judge(clients, byAddr, srv.conns, end, cfg.Slack)
	srv.mu.Unlock()

	teardown()
	if n > 0 {
		// Measured against the heap after the teardown rather than before
		// the start: exited goroutines' descriptors stay for reuse, so
		// against the start a second run in one process would look lighter.
		rep.HeapPerConn = float64(int64(heapOpen)-int64(demo.MemAfterGC().HeapAlloc)) / float64(n)
	}
	if cfg.Mode == modeWheel && n > 0 {
		rep.WheelBytesPerConn = wheelBytesPerConn(cfg.Timeout)
	}
	return rep, nil
}

func dialError(i, n int, err error) error {
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		return fmt.Errorf("out of file descriptors after %d of %d connections (each takes two here: client and server end): %v; "+
			"lower -conns or raise the limit with ulimit -n", i, n, err)
	}
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		return fmt.Errorf("out of local ports after %d of %d connections: %v; lower -conns", i, n, err)
	}
	return fmt.Errorf("connecting client %d of %d: %w", i, n, err)
}

func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	switch {
	case err == nil:
		return ln, nil
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fmt.Errorf("cannot listen on %s: the port is already in use; "+
			"pick another -addr, or port 0 for a free one", addr)
	case errors.Is(err, syscall.EACCES):
		return nil, fmt.Errorf("cannot listen on %s: permission denied (ports below 1024 need privileges); "+
			"pick another -addr, or port 0 for a free one", addr)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return nil, fmt.Errorf("cannot listen on %s: no such address on this machine; use 127.0.0.1", addr)
	}
	return nil, fmt.Errorf("cannot listen on %s: %w", addr, err)
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// nopConn stands in for a socket where only the wrapper's size matters.
type nopConn struct{ net.Conn }

// wheelBytesPerConn reports the heap one connection's idle timeout costs in
// wheel mode: the netidle conn wrapper with its Timer and callback, measured on
// many wrappers in a fresh hierarchy.
func wheelBytesPerConn(idle time.Duration) float64 {
	const n = 10_000
	h, err := timingwheel.New(timingwheel.WithManualAdvance()) // nothing is to fire here: no driver
	if err != nil {
		return math.NaN()
	}
	c := &nopConn{}
	conns := make([]net.Conn, n)
	p := netidle.NewPolicy(h, idle) // shared by the conns, as the server's Listener shares one
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range conns {
		conns[i] = p.Conn(c)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(conns)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}
