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
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/timingwheel/timingwheel"
)

// config is everything run needs; the flags fill it in main.
type config struct {
	Addr     string
	Conns    int
	Timeout  time.Duration
	Interval time.Duration
	Silent   float64
	Duration time.Duration
	Seed     uint64 // 0: pick one at random

	// Slack separates the last deadline a silent client can have from the end
	// of the run, so that "every silent client was closed by the end" is a
	// fair check: silent clients stop early enough for it.
	Slack time.Duration

	Progress   io.Writer // one line per second; nil for none
	Notes      io.Writer // notices, such as running fewer connections; nil for none
	CPUProfile bool      // measure the timers' CPU with a labelled CPU profile
}

func defaultConfig() config {
	return config{
		Addr:     "127.0.0.1:0",
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
	case c.Conns < 1:
		return fmt.Errorf("-conns must be at least 1, got %d", c.Conns)
	case c.Timeout <= 0:
		return fmt.Errorf("-timeout must be positive, got %v", c.Timeout)
	case c.Interval <= 0:
		return fmt.Errorf("-interval must be positive, got %v", c.Interval)
	case c.Interval > c.Timeout/2:
		return fmt.Errorf("-interval (%v) must be at most half of -timeout (%v), "+
			"or clients that do send heartbeats could be closed as idle", c.Interval, c.Timeout)
	case math.IsNaN(c.Silent) || c.Silent < 0 || c.Silent > 1:
		return fmt.Errorf("-silent is the fraction of clients that fall silent and must be between 0 and 1, got %v", c.Silent)
	case c.Duration <= 0:
		return fmt.Errorf("-duration must be positive, got %v", c.Duration)
	case c.Slack < 0:
		return fmt.Errorf("slack must not be negative, got %v", c.Slack)
	case c.Silent > 0 && c.Duration <= c.Timeout+c.Slack:
		return fmt.Errorf("-duration (%v) must be longer than -timeout (%v) plus %v, "+
			"so that clients falling silent can be seen to be closed before the end", c.Duration, c.Timeout, c.Slack)
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("-addr %q is not host:port: %v", c.Addr, err)
	}
	return nil
}

// Labels that attribute CPU profile samples to the timers; see cpuprofile.go.
var (
	noLabels     = context.Background()
	driverLabels = pprof.WithLabels(noLabels, pprof.Labels("timer", "driver"))
	armLabels    = pprof.WithLabels(noLabels, pprof.Labels("timer", "arm"))
)

// server closes connections that send nothing for timeout. All it needs from
// timingwheel is the Timeouts set: Add on accept and on every line, Remove
// when the connection ends, and a callback that closes the idle ones. The
// rest of this type is bookkeeping for the report.
type server struct {
	idle    *timingwheel.Timeouts[net.Conn]
	timeout time.Duration

	heartbeats atomic.Int64 // lines received
	open       atomic.Int64 // connections whose reader is still running
	closed     atomic.Int64 // connections closed for being idle

	mu     sync.Mutex
	closes []closeRecord
	conns  []*conn // every accepted connection, for teardown

	wg sync.WaitGroup // readers
}

type closeRecord struct {
	id   int // client id, or -1 if the client never said who it is
	at   time.Time
	late time.Duration // at minus the deadline it was closed for
}

// conn is a server-side connection. It is the key in the Timeouts set, so the
// expiry callback gets it back from the net.Conn it is handed.
type conn struct {
	net.Conn
	srv *server

	mu       sync.Mutex
	id       int       // from the first line; -1 until then
	deadline time.Time // of the latest arming
	closed   bool      // closed for being idle
}

func newServer(h *timingwheel.Hierarchy, timeout time.Duration) *server {
	s := &server{timeout: timeout}
	s.idle = timingwheel.NewTimeouts(h, s.expired)
	return s
}

func (s *server) accept(ln net.Listener) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors, most likely: the pending connection
			// stays queued, so back off and try again.
			time.Sleep(5 * time.Millisecond)
			continue
		}
		c := &conn{Conn: nc, srv: s, id: -1}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.open.Add(1)
		c.arm()
		s.wg.Add(1)
		go c.serve()
	}
}

// arm (re)starts c's idle timeout. It reports false if c was already closed
// for being idle.
func (c *conn) arm() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	pprof.SetGoroutineLabels(armLabels)
	c.srv.idle.Add(c, c.srv.timeout)
	pprof.SetGoroutineLabels(noLabels)
	c.deadline, _ = c.srv.idle.Deadline(c)
	return true
}

// serve reads heartbeat lines ("<client id>\n") until the connection ends.
func (c *conn) serve() {
	s := c.srv
	defer s.wg.Done()
	r := bufio.NewReaderSize(c.Conn, 64)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			break
		}
		s.heartbeats.Add(1)
		if c.id < 0 { // only this goroutine writes id
			id, err := strconv.Atoi(string(line[:len(line)-1]))
			if err != nil {
				break
			}
			c.mu.Lock()
			c.id = id
			c.mu.Unlock()
		}
		if !c.arm() {
			break
		}
	}
	pprof.SetGoroutineLabels(armLabels)
	s.idle.Remove(c)
	pprof.SetGoroutineLabels(noLabels)
	c.Conn.Close()
	s.open.Add(-1)
}

// expired is the Timeouts callback. It runs on the hierarchy's driver
// goroutine, so it only closes the connection: the reader notices and exits.
func (s *server) expired(k net.Conn) {
	pprof.SetGoroutineLabels(noLabels) // closing sockets is not timer work
	defer pprof.SetGoroutineLabels(driverLabels)

	now := time.Now()
	c := k.(*conn)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if d, armed := s.idle.Deadline(c); armed && now.Before(d) {
		// A heartbeat re-armed c while this firing was on its way: not idle.
		c.mu.Unlock()
		return
	}
	c.closed = true
	rec := closeRecord{id: c.id, at: now, late: now.Sub(c.deadline)}
	c.mu.Unlock()

	c.Conn.Close()
	s.closed.Add(1)
	s.mu.Lock()
	s.closes = append(s.closes, rec)
	s.mu.Unlock()
}

// client sends its id as a line right after connecting and then about every
// interval; a silent client sends nothing from quietAt on.
type client struct {
	id      int
	conn    net.Conn
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
			return // every client says who it is first, silent or not
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

// run starts the server, connects the clients, runs for cfg.Duration, and
// reports. An error means the run could not take place; failed checks are in
// report.problems.
func run(cfg config) (*report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64() | 1
	}
	progress, notes := cfg.Progress, cfg.Notes
	if progress == nil {
		progress = io.Discard
	}
	if notes == nil {
		notes = io.Discard
	}
	rep := &report{Seed: cfg.Seed, Requested: cfg.Conns, Timeout: cfg.Timeout}

	n, note, err := fitConns(cfg.Conns)
	if err != nil {
		return nil, err
	}
	if note != "" {
		fmt.Fprintln(notes, "idleconn:", note)
	}
	rep.Conns = n

	h, err := timingwheel.New()
	if err != nil {
		return nil, err
	}
	srv := newServer(h, cfg.Timeout)
	// The driver goroutine inherits these labels, so profile samples taken
	// while it runs the wheel are attributed to it.
	pprof.Do(context.Background(), pprof.Labels("timer", "driver"), func(context.Context) { h.Start() })
	defer h.Stop()

	ln, err := listen(cfg.Addr)
	if err != nil {
		return nil, err
	}
	acceptDone := make(chan struct{})
	go func() { defer close(acceptDone); srv.accept(ln) }()

	stop := make(chan struct{})
	var clientWG sync.WaitGroup
	stopClients := sync.OnceFunc(func() { close(stop); clientWG.Wait() })
	clients := make([]*client, n)
	defer func() { // teardown, also after an error
		stopClients()
		ln.Close()
		<-acceptDone
		for _, cl := range clients {
			if cl != nil && cl.conn != nil {
				cl.conn.Close()
			}
		}
		srv.wg.Wait()
	}()

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

	// Connect, a few dozen at a time so the listen queue never overflows.
	dialStart := time.Now()
	if err := dialAll(ln.Addr().String(), clients, func(cl *client) {
		if cl.silent {
			cl.quietAt = time.Now().Add(time.Duration(cl.rng.Int64N(int64(window))))
		}
		clientWG.Add(1)
		go cl.run(cfg.Interval, stop, clientWG.Done)
	}); err != nil {
		return nil, err
	}
	rep.ConnectTime = time.Since(dialStart)
	fmt.Fprintf(progress, "idleconn: server on %s; %d clients connected in %v (%d will fall silent); timeout %v, running %v\n",
		ln.Addr(), n, rep.ConnectTime.Round(time.Millisecond), nSilent, cfg.Timeout, cfg.Duration)

	var cpu *cpuMeter
	if cfg.CPUProfile {
		cpu, err = startCPUMeter()
		if err != nil {
			fmt.Fprintln(notes, "idleconn: timer CPU not measured:", err)
		}
	}

	// Run, printing one line per second.
	start := time.Now()
	end := start.Add(cfg.Duration)
	last, lastBeats := start, srv.heartbeats.Load()
	startBeats := lastBeats
	var ms runtime.MemStats
	for now := start; now.Before(end); {
		next := now.Add(time.Second)
		if next.After(end) {
			next = end
		}
		time.Sleep(time.Until(next))
		now = time.Now()
		beats := srv.heartbeats.Load()
		runtime.ReadMemStats(&ms)
		rep.PeakHeap = max(rep.PeakHeap, ms.HeapAlloc)
		fmt.Fprintf(progress, "%5.1fs  open %6d  heartbeats/s %6.0f  closed %6d  wheel.Len %6d\n",
			now.Sub(start).Seconds(), srv.open.Load(),
			float64(beats-lastBeats)/now.Sub(last).Seconds(),
			srv.closed.Load(), h.Len())
		last, lastBeats = now, beats
	}
	rep.Elapsed = time.Since(start)
	if cpu != nil {
		rep.CPU, err = cpu.stop()
		if err != nil {
			fmt.Fprintln(notes, "idleconn: timer CPU not measured:", err)
		}
	}

	// Freeze the server, stop the clients, and judge.
	h.Stop()
	stopClients()
	rep.Heartbeats = srv.heartbeats.Load()
	rep.RunHeartbeats = rep.Heartbeats - startBeats
	srv.mu.Lock()
	rep.judge(clients, srv.closes)
	srv.mu.Unlock()

	// What one tracked connection costs in the wheel, measured on a fresh one
	// holding the same connections.
	srv.mu.Lock()
	keys := make([]net.Conn, len(srv.conns))
	for i, c := range srv.conns {
		keys[i] = c
	}
	srv.mu.Unlock()
	rep.WheelBytesPerConn = wheelBytesPerConn(keys, cfg.Timeout)
	return rep, nil
}

// dialAll connects every client, calling started for each as soon as it is
// connected.
func dialAll(addr string, clients []*client, started func(*client)) error {
	const parallel = 64
	ids := make(chan int)
	errs := make(chan error, parallel)
	var wg sync.WaitGroup
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: 10 * time.Second}
			for i := range ids {
				c, err := d.Dial("tcp", addr)
				if err != nil {
					errs <- dialError(i, len(clients), err)
					return
				}
				clients[i].conn = c
				started(clients[i])
			}
		}()
	}
	var err error
feed:
	for i := range clients {
		select {
		case ids <- i:
		case err = <-errs:
			break feed
		}
	}
	close(ids)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
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

// wheelBytesPerConn reports how much heap one tracked connection costs in a
// Timeouts set: the set's entry and its timer.
func wheelBytesPerConn(keys []net.Conn, d time.Duration) float64 {
	if len(keys) == 0 {
		return 0
	}
	h, err := timingwheel.New()
	if err != nil {
		return math.NaN()
	}
	idle := timingwheel.NewTimeouts(h, func(net.Conn) {})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, k := range keys {
		idle.Add(k, d)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(idle)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(len(keys))
}
