package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/internal/demo"
	"github.com/timingwheel/timingwheel/netidle"
)

// The ways the server keeps its pings and idle closes (-mode).
const (
	modeWheel  = "wheel"  // netidle.Conn with OnWriteIdle: the wheel closes, and pings through a goroutine that lives for the ping's Write
	modeTicker = "ticker" // a writer goroutine per conn with a time.Ticker, and SetReadDeadline before every Read
	modeBoth   = "both"   // each in a process of its own, then compared
)

var modeHow = map[string]string{
	modeWheel:  "netidle.Conn + OnWriteIdle: the timing wheel pings (a goroutine per ping's Write) and closes",
	modeTicker: "a writer goroutine with a time.Ticker per conn, SetReadDeadline before every Read",
}

// config is everything run needs.
type config struct {
	Mode     string
	Conns    int
	Ping     time.Duration // ping a conn the server has written nothing to for this long
	Timeout  time.Duration // close a conn that has sent nothing for this long
	Interval time.Duration // mean gap between a client's heartbeats
	Msg      time.Duration // mean gap between the server's own messages to one conn
	Silent   float64       // fraction of clients that fall silent
	Duration time.Duration // how long to run once every client is connected
	Seed     uint64
	Progress io.Writer // a line per second; nil for none
}

func defaultConfig() config {
	return config{
		Mode:     modeBoth,
		Conns:    10_000,
		Ping:     time.Second,
		Timeout:  3 * time.Second,
		Interval: time.Second,
		Msg:      5 * time.Second,
		Silent:   0.2,
		Duration: 8 * time.Second,
	}
}

// slack separates the last deadline of a silent client from the end of the
// run, so that "every silent client was closed" is a fair check.
const slack = time.Second

func (c config) validate() error {
	switch {
	case c.Mode != modeWheel && c.Mode != modeTicker && c.Mode != modeBoth:
		return fmt.Errorf("-mode must be %s, %s or %s, got %q", modeWheel, modeTicker, modeBoth, c.Mode)
	case c.Conns <= 0:
		return fmt.Errorf("-conns must be positive, got %d", c.Conns)
	case c.Ping <= 0 || c.Timeout <= 0 || c.Interval <= 0 || c.Msg <= 0:
		return errors.New("-ping, -timeout, -interval and -msg must be positive")
	case c.Interval > c.Timeout/2:
		return fmt.Errorf("-interval (%v) must be at most half of -timeout (%v), or heartbeating clients could be closed", c.Interval, c.Timeout)
	case math.IsNaN(c.Silent) || c.Silent < 0 || c.Silent > 1:
		return fmt.Errorf("-silent must be between 0 and 1, got %v", c.Silent)
	case c.Duration <= c.Timeout+slack:
		return fmt.Errorf("-duration (%v) must be longer than -timeout (%v) plus %v, so that silent clients are seen closed", c.Duration, c.Timeout, slack)
	}
	return nil
}

// report is what one run measured; main prints it and compares two.
type report struct {
	Mode, How string
	Conns     int
	Elapsed   time.Duration

	PingsSent, PingsReceived, Msgs int64
	PingEarly                      int   // pings sent less than Ping after the last Write the wheel had counted (see server.ping)
	PingLate                       []int // lateness quantiles p50, p99, max in µs
	Closes, Silent                 int   // idle closes of silent clients, and the silent clients
	CloseEarly                     int   // idle closes that came early (see sconn.early)
	CloseLate                      []int // against the deadline the conn was closed for
	LagCloses, LeftOpen            int   // heartbeating clients closed during the run (see report.problems), silent ones never closed
	HeartbeatsRead                 int64 // heartbeat lines the server read

	CPU               time.Duration // process CPU over the run, clients included
	HeapPerConn       float64       // whole process, clients included
	StackPerConn      float64
	GoroutinesPerConn float64
}

func (r *report) problems() []string {
	var p []string
	if r.PingEarly > 0 {
		p = append(p, fmt.Sprintf("%d pings came before %s of write silence", r.PingEarly, "-ping"))
	}
	if r.CloseEarly > 0 {
		p = append(p, fmt.Sprintf("%d conns closed before -timeout of read silence (since the server last read data from them)", r.CloseEarly))
	}
	// LagCloses is not a problem of the server's: each was closed after
	// the server had read nothing from it for -timeout (else it would be
	// early), so its heartbeats did not reach the server's reader in time —
	// the clients' timers or the readers did not get the CPU; a machine
	// that slow may even close every conn before its first heartbeat. It
	// says the machine did not keep up, which print reports.
	if r.LeftOpen > 0 {
		p = append(p, fmt.Sprintf("%d silent clients were left open", r.LeftOpen))
	}
	if r.PingsSent == 0 {
		p = append(p, "no ping was sent")
	}
	return p
}

// sconn is the server's side of one conn.
type sconn struct {
	c    net.Conn      // tap, wrapped by netidle.Conn in wheel mode
	tap  *tap          // the accepted conn, below the wheel
	port int           // the client's port, to find it by
	send chan struct{} // ticker mode: the writer's queue
	quit chan struct{} // ticker mode: the reader ended

	// Set by the reader when it ends, read once the readers are done.
	idle       bool  // it ended on an idle close (wheel) or a read deadline (ticker)
	closedAt   int64 // ns since base: when the server's side ended for idleness (see reader)
	early      bool  // closedAt was less than Timeout after tap.lastRead, or before the deadline it was closed for
	heartbeats int64
}

// tap is the accepted conn as the server sees it below the timing wheel
// (in ticker mode, below the reader and the writer): it records when a Read
// of the socket returned data, when a Write to it ended, and when the conn
// was first closed — the instants the promises are about. The wheel reads
// the clock for a Read or Write after tap's returned, and closes the conn
// through tap.Close after it decided; so an idle close the wheel made no
// sooner than it promises is never less than Timeout after lastRead, nor
// a ping less than Ping after the Write that it counted last. Measured so,
// a client's heartbeat that the server has not read yet (the client's
// timer, or the server's reader, waiting for a CPU) is not data read, as
// it is not for the wheel either. Both modes have it, so the memory per
// conn of each includes its hundred bytes or so.
type tap struct {
	net.Conn
	s       *server
	pending int64 // ns since base: the latest Read with data; the reader's goroutine only
	// lastRead is when the socket gave the data of the last Read that had
	// returned it to the reader before the conn was closed (see
	// readRecorder), or when the conn was accepted: read idleness counts
	// from there. Written by the reader's goroutine only, read once it is
	// done.
	lastRead int64
	closeAt  atomic.Int64 // ns since base of the first Close; 0 before

	// The ends of the last few Writes that wrote data, in ns since base,
	// newest at ends[n%len]. A ping and a message may be written at once
	// (from the wheel's goroutine and from messages).
	wmu  sync.Mutex
	ends [4]int64
	n    int
}

func (t *tap) Read(p []byte) (int, error) {
	n, err := t.Conn.Read(p)
	if n > 0 {
		t.pending = t.s.since()
	}
	return n, err
}

func (t *tap) Write(p []byte) (int, error) {
	n, err := t.Conn.Write(p)
	if n > 0 {
		t.noteWrite(t.s.since())
	}
	return n, err
}

func (t *tap) Close() error {
	t.closeAt.CompareAndSwap(0, max(t.s.since(), 1))
	return t.Conn.Close()
}

// noteWrite records that a Write ended at now (or, at accept, that write
// silence counts from now).
func (t *tap) noteWrite(now int64) {
	t.wmu.Lock()
	t.n++
	t.ends[t.n%len(t.ends)] = now
	t.wmu.Unlock()
}

// lastWriteBefore returns the end of the newest recorded Write that ended
// no later than at; false if every recorded one ended later.
func (t *tap) lastWriteBefore(at int64) (int64, bool) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	for i := 0; i < len(t.ends) && i < t.n; i++ {
		if e := t.ends[(t.n-i)%len(t.ends)]; e <= at {
			return e, true
		}
	}
	return 0, false
}

// readRecorder is the reader's source, above the wheel's conn: a Read that
// returned data to the reader counts, for tap.lastRead, if the conn had not
// been closed by then. A Read whose data came from the socket as the idle
// close was being made returns that data, and neither the wheel nor this
// counts it; one that returned before the close counts for both. The only
// instants the measure cannot order are the wheel's few instructions
// between its decision and its call of tap.Close.
type readRecorder struct {
	r io.Reader // the wheel's conn, or a deadlineReader over the tap
	t *tap
}

func (rr *readRecorder) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	if n > 0 && rr.t.closeAt.Load() == 0 {
		rr.t.lastRead = rr.t.pending
	}
	return n, err
}

// port returns a's port; 0 if a is not TCP.
func port(a net.Addr) int {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.Port
	}
	return 0
}

type server struct {
	cfg  config
	base time.Time
	h    *timingwheel.Hierarchy // wheel mode

	pings, msgs atomic.Int64
	pingWrites  sync.WaitGroup // wheel mode: the pings being written
	mu          sync.Mutex
	pingLate    []time.Duration
	pingEarly   int
	closeLate   []time.Duration
	conns       []*sconn
	wg          sync.WaitGroup
}

func (s *server) since() int64 { return int64(time.Since(s.base)) }

// pingWindow is how long before a ping the wheel is taken to have decided
// it: an eighth of Ping, far more than the few microseconds it takes.
func (s *server) pingWindow() time.Duration { return s.cfg.Ping / 8 }

var (
	pingLine = []byte("ping\n")
	msgLine  = []byte("news\n")
)

// write writes line to sc under a short write deadline, so that a peer
// that reads nothing never blocks the writer for long.
func (s *server) write(sc *sconn, line []byte) {
	sc.c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	sc.c.Write(line)
}

// ping records a ping (see notePing) and writes it. Ticker mode's writer
// calls it; wheel mode's event calls notePing and hands the write to a
// goroutine (see accept).
func (s *server) ping(sc *sconn) {
	s.notePing(sc)
	s.write(sc, pingLine)
}

// notePing records how long the conn had been written nothing when a ping
// was decided: never less than Ping, unless an event was early.
//
// The wheel decides to ping a moment before it calls ping, when no Write
// is in progress, and a message Write may begin and end in between (the
// messages goroutine does not wait for the wheel): that Write came after
// the decision, so it does not make the ping early. The gap is therefore
// measured to the newest Write that ended at least pingWindow before ping
// was called; the decision is taken to be that recent. (A ping decided
// earlier than that, with a Write begun and ended in between, would be
// counted early: a false alarm, never a missed one.) A Write counts at the
// end of the socket's Write (tap.Write), which the wheel's own record of
// it follows, rather than where s.write begins: a message goroutine that
// waited for a CPU between that and the wheel's Write would have made a
// Write the wheel did not know of look older than the ping's decision.
func (s *server) notePing(sc *sconn) {
	now := s.since()
	if last, ok := sc.tap.lastWriteBefore(now - int64(s.pingWindow())); ok {
		gap := time.Duration(now - last)
		s.mu.Lock()
		if gap < s.cfg.Ping {
			s.pingEarly++
		}
		s.pingLate = append(s.pingLate, gap-s.cfg.Ping)
		s.mu.Unlock()
	}
	s.pings.Add(1)
}

func (s *server) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		t := &tap{Conn: c, s: s, lastRead: s.since()} // before the wrap: read idleness counts from here
		sc := &sconn{c: t, tap: t, port: port(c.RemoteAddr())}
		t.noteWrite(s.since()) // the count of write silence starts at accept
		if s.h != nil {
			// The idle close and the ping in one wrapper; f is the
			// conn's own, so it finds the conn's state without a lookup.
			// f runs on the wheel's driver and must not block: it hands
			// the ping's Write to a goroutine, which lives until the Write
			// ends (while it waits on a peer that reads nothing, the conn
			// is not write idle, so no second ping starts).
			sc.c = netidle.Conn(s.h, t, s.cfg.Timeout, netidle.OnWriteIdle(s.cfg.Ping, func(net.Conn) {
				s.notePing(sc)
				s.pingWrites.Go(func() { s.write(sc, pingLine) })
			}))
		} else {
			sc.send, sc.quit = make(chan struct{}, 1), make(chan struct{})
			s.wg.Go(func() { s.writer(sc) })
		}
		s.mu.Lock()
		s.conns = append(s.conns, sc)
		s.mu.Unlock()
		s.wg.Go(func() { s.reader(sc) })
	}
}

// writer is ticker mode's writer goroutine: the server's messages and, on
// the ticker, pings. The ticker restarts after every write, so a ping goes
// only to a conn written nothing for Ping, as in wheel mode.
func (s *server) writer(sc *sconn) {
	t := time.NewTicker(s.cfg.Ping)
	defer t.Stop()
	for {
		select {
		case <-sc.quit:
			return
		case <-sc.send:
			s.write(sc, msgLine)
		case <-t.C:
			s.ping(sc)
		}
		t.Reset(s.cfg.Ping)
	}
}

// deadlineReader is ticker mode's reader: a read deadline Timeout from now
// before every Read.
type deadlineReader struct {
	c        net.Conn
	timeout  time.Duration
	deadline time.Time
}

func (r *deadlineReader) Read(p []byte) (int, error) {
	r.deadline = time.Now().Add(r.timeout)
	if err := r.c.SetReadDeadline(r.deadline); err != nil {
		return 0, err
	}
	return r.c.Read(p)
}

// reader reads heartbeats until the conn ends. If it ends for idleness it
// records when, how late that was against the deadline the conn was closed
// for, and whether it was early: less than Timeout after the server last
// read data from it (tap.lastRead), or before that deadline.
func (s *server) reader(sc *sconn) {
	var r io.Reader = sc.c
	dr := (*deadlineReader)(nil)
	if s.h == nil {
		dr = &deadlineReader{c: sc.c, timeout: s.cfg.Timeout}
		r = dr
	}
	br := bufio.NewReaderSize(&readRecorder{r: r, t: sc.tap}, 64)
	for {
		_, err := br.ReadSlice('\n')
		if err == nil {
			sc.heartbeats++
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// When the server's side ended: in ticker mode the Read
			// returning the deadline's error, now; in wheel mode the
			// wheel's Close of the tap, unless this Read failed first
			// (the wheel marks the conn closed, then closes the socket).
			// Either is no sooner than the decision to close.
			at := s.since()
			if c := sc.tap.closeAt.Load(); c != 0 && c < at {
				at = c
			}
			var deadline time.Time
			if dr != nil {
				deadline = dr.deadline
			} else {
				deadline = sc.c.(netidle.Control).IdleDeadline()
			}
			late := s.base.Add(time.Duration(at)).Sub(deadline)
			sc.idle, sc.closedAt = true, at
			sc.early = time.Duration(at-sc.tap.lastRead) < s.cfg.Timeout || late < 0
			s.mu.Lock()
			s.closeLate = append(s.closeLate, late)
			s.mu.Unlock()
		}
		break
	}
	sc.c.Close()
	if sc.quit != nil {
		close(sc.quit)
	}
}

// messages sends the server's own rare messages: each conn gets one about
// every Msg, to a random conn at a time, from one goroutine.
func (s *server) messages(stop <-chan struct{}, rng *rand.Rand) {
	const every = 10 * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	perTick := float64(s.cfg.Conns) * float64(every) / float64(s.cfg.Msg)
	owed := 0.0
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		conns := s.conns
		s.mu.Unlock()
		for owed += perTick; owed >= 1; owed-- {
			sc := conns[rng.IntN(len(conns))]
			s.msgs.Add(1)
			if sc.send != nil {
				select {
				case sc.send <- struct{}{}:
				default: // one is queued already
				}
			} else {
				s.write(sc, msgLine)
			}
		}
	}
}

// client is one of the demo's clients: it sends a heartbeat about every
// Interval (a silent one stops at quietAt) and counts the pings it gets.
type client struct {
	conn    net.Conn
	silent  bool
	quietAt int64 // ns since base
	pings   atomic.Int64
	endAt   atomic.Int64 // ns since base when its Read failed; 0 while open
	hb      *time.Timer
	rng     *rand.Rand
}

func (cl *client) heartbeat(s *server) {
	now := s.since()
	if cl.silent && now >= cl.quietAt {
		return
	}
	if _, err := cl.conn.Write([]byte("hb\n")); err != nil {
		return
	}
	iv := s.cfg.Interval
	cl.hb.Reset(iv*4/5 + time.Duration(cl.rng.Int64N(int64(iv*2/5)+1)))
}

func (cl *client) read(s *server) {
	br := bufio.NewReaderSize(cl.conn, 64)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			cl.endAt.Store(max(s.since(), 1))
			return
		}
		if string(line) == "ping\n" {
			cl.pings.Add(1)
		}
	}
}

// memory returns HeapAlloc and StackInuse after a GC, and the goroutines.
func memory() (heap, stack uint64, goroutines int) {
	ms := demo.MemAfterGC()
	return ms.HeapAlloc, ms.StackInuse, runtime.NumGoroutine()
}

// run runs one mode: the server, cfg.Conns clients, cfg.Duration, and the
// report.
func run(cfg config) (*report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Mode == modeBoth {
		return nil, errors.New("run takes one mode; main runs both in turn")
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	n := cfg.Conns
	if limit, _ := demo.RaiseFileLimit(demo.FDsNeeded(n)); limit != 0 && limit < demo.FDsNeeded(n) {
		n = demo.ConnsThatFit(limit)
		fmt.Fprintf(progress, "pinger: running %d conns, not %d: the open file limit is %d (both ends are in this process)\n", n, cfg.Conns, limit)
	}
	if n < 1 {
		return nil, errors.New("the open file limit leaves room for no connection; raise it with ulimit -n")
	}
	cfg.Conns = n
	rep := &report{Mode: cfg.Mode, How: modeHow[cfg.Mode], Conns: n}
	s := &server{cfg: cfg, base: time.Now()}
	if cfg.Mode == modeWheel {
		h, err := timingwheel.New()
		if err != nil {
			return nil, err
		}
		h.Start()
		defer h.Stop()
		s.h = h
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	heap0, stack0, g0 := memory()
	acceptDone := make(chan struct{})
	go func() { defer close(acceptDone); s.accept(ln) }()

	rng := rand.New(rand.NewPCG(cfg.Seed, 0x9196))
	clients := make([]*client, n)
	nSilent := int(math.Round(cfg.Silent * float64(n)))
	for i, j := range rng.Perm(n) {
		clients[j] = &client{silent: i < nSilent, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(j)))}
	}
	teardown := sync.OnceFunc(func() {
		ln.Close()
		<-acceptDone
		for _, cl := range clients {
			if cl.hb != nil {
				cl.hb.Stop()
			}
			if cl.conn != nil {
				cl.conn.Close()
			}
		}
		s.mu.Lock()
		for _, sc := range s.conns {
			sc.c.Close()
		}
		s.mu.Unlock()
		if s.h != nil {
			s.h.Stop() // no event runs any more, so no ping starts
		}
		s.pingWrites.Wait()
		s.wg.Wait()
	})
	defer teardown()
	var readers sync.WaitGroup
	dialStart := time.Now()
	if _, err := demo.DialAll(ln.Addr().String(), n, func(i int, c net.Conn) { clients[i].conn = c }); err != nil {
		return nil, fmt.Errorf("connecting the clients: %w", err)
	}
	for wait := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		got := len(s.conns)
		s.mu.Unlock()
		if got == n || time.Now().After(wait) {
			break
		}
	}
	for _, cl := range clients {
		readers.Go(func() { cl.read(s) })
	}
	heap1, stack1, g1 := memory()
	rep.HeapPerConn = (float64(heap1) - float64(heap0)) / float64(n)
	rep.StackPerConn = (float64(stack1) - float64(stack0)) / float64(n)
	rep.GoroutinesPerConn = float64(g1-g0) / float64(n)
	fmt.Fprintf(progress, "pinger: mode %s (%s)\n", cfg.Mode, rep.How)
	fmt.Fprintf(progress, "pinger: %d clients connected in %v (%d will fall silent); ping after %v of write silence, close after %v of read silence, running %v\n",
		n, time.Since(dialStart).Round(time.Millisecond), nSilent, cfg.Ping, cfg.Timeout, cfg.Duration)

	// Run: heartbeats start, silent clients stop at random moments that
	// leave their last deadline slack before the end.
	start := s.since()
	cpu0, _ := demo.ProcessCPU()
	window := cfg.Duration - cfg.Timeout - slack
	for _, cl := range clients {
		if cl.silent {
			cl.quietAt = start + cl.rng.Int64N(int64(window))
		}
		cl.hb = time.AfterFunc(time.Hour, func() { cl.heartbeat(s) }) // armed once cl.hb is set: heartbeat reads it
		cl.hb.Reset(time.Duration(cl.rng.Int64N(int64(cfg.Interval))))
	}
	stop := make(chan struct{})
	msgDone := make(chan struct{})
	go func() { defer close(msgDone); s.messages(stop, rand.New(rand.NewPCG(cfg.Seed, 0x4d5))) }()
	tick := time.NewTicker(time.Second)
	end := time.NewTimer(cfg.Duration)
	lastPings := int64(0)
loop:
	for {
		select {
		case <-end.C:
			break loop
		case <-tick.C:
			p := s.pings.Load()
			closed := 0
			for _, cl := range clients {
				if cl.endAt.Load() != 0 {
					closed++
				}
			}
			fmt.Fprintf(progress, "%5.1fs  open %6d  pings/s %6d  closed idle %6d  goroutines %6d\n",
				time.Duration(s.since()-start).Seconds(), n-closed, p-lastPings, closed, runtime.NumGoroutine())
			lastPings = p
		}
	}
	tick.Stop()
	close(stop)
	<-msgDone
	endAt := s.since()
	rep.Elapsed = time.Duration(endAt - start)
	cpu1, _ := demo.ProcessCPU()
	rep.CPU = cpu1 - cpu0
	for _, cl := range clients {
		cl.hb.Stop()
	}
	hbEnd := s.since() // no heartbeat is due after this

	// Judge on the server's side, where the promises are: each idle close
	// came no sooner than Timeout after the server last read data from the
	// conn (and not before the deadline it was closed for), and every
	// silent client was closed. A silent client is closed Timeout after the
	// server read its last heartbeat, at the latest slack before the end;
	// a loaded machine's driver may wake later than that, so the run waits
	// for it a while (nothing else closes a conn until teardown).
	byPort := make(map[int]*client, n) // all on 127.0.0.1
	for _, cl := range clients {
		byPort[port(cl.conn.LocalAddr())] = cl
	}
	s.mu.Lock()
	conns := s.conns
	s.mu.Unlock()
	for wait := time.Now().Add(10 * time.Second); time.Now().Before(wait); time.Sleep(5 * time.Millisecond) {
		open := 0
		for _, sc := range conns {
			if cl := byPort[sc.port]; cl != nil && cl.silent && sc.tap.closeAt.Load() == 0 {
				open++
			}
		}
		if open == 0 {
			break
		}
	}
	for _, cl := range clients {
		rep.PingsReceived += cl.pings.Load()
		if cl.silent {
			rep.Silent++
		}
	}
	s.mu.Lock()
	rep.PingsSent, rep.Msgs = s.pings.Load(), s.msgs.Load()
	rep.PingEarly = s.pingEarly
	rep.PingLate = quantiles(s.pingLate)
	s.mu.Unlock()
	teardown() // every reader has ended: the sconns' records are final
	rep.LeftOpen = rep.Silent
	for _, sc := range conns {
		rep.HeartbeatsRead += sc.heartbeats
		cl := byPort[sc.port]
		if !sc.idle || cl == nil {
			continue
		}
		if sc.early {
			rep.CloseEarly++
		}
		switch {
		case cl.silent:
			rep.Closes++
			rep.LeftOpen--
		case !sc.early && sc.closedAt < hbEnd:
			rep.LagCloses++
		}
	}
	s.mu.Lock()
	rep.CloseLate = quantiles(s.closeLate)
	s.mu.Unlock()
	teardown()
	readers.Wait()
	return rep, nil
}

// quantiles returns p50, p99 and the max of ds, in µs.
func quantiles(ds []time.Duration) []int {
	if len(ds) == 0 {
		return nil
	}
	at := func(q float64) int { return int(demo.Quantile(ds, q) / time.Microsecond) }
	return []int{at(0.5), at(0.99), at(1)}
}
