package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/timingwheel/timingwheel"
	gnetwheel "github.com/timingwheel/timingwheel/gnet"
	"github.com/timingwheel/timingwheel/internal/demo"
	"golang.org/x/sys/unix"
)

// The three ways the demo's server keeps its idle timeouts (-impl).
const (
	implWheel     = "wheel"     // gnetwheel.Idle per conn
	implScan      = "scan"      // OnTick every scanTick scans every conn's last-activity time
	implAfterFunc = "afterfunc" // a time.AfterFunc per conn, Reset on traffic
	implAll       = "all"       // each of the three in a fresh process, compared
)

var impls = []string{implWheel, implScan, implAfterFunc}

// implHow says in a few words what each impl does.
var implHow = map[string]string{
	implWheel:     "gnetwheel.Idle per conn (lazy per-loop buckets, 1 ms tick)",
	implScan:      "OnTick every 4 ms scans every conn's last-activity time",
	implAfterFunc: "time.AfterFunc per conn, Reset on traffic, re-checked on the loop",
}

// scanTick is the scan's period: gnet's OnTick returns it as its delay.
const scanTick = 4 * time.Millisecond

// server is the gnet handler. With -impl wheel everything about idle
// timeouts is in OnOpen, OnTraffic and OnClose: one line each. The scan
// and AfterFunc baselines are what a gnet user writes without gnetwheel.
// The rest is bookkeeping for the report.
type server struct {
	gnet.BuiltinEventEngine
	impl    string
	h       *timingwheel.Hierarchy // impl wheel only
	idler   *gnetwheel.Idler       // impl wheel only
	timeout time.Duration
	epoch   time.Time // impl scan: last-activity times are nanoseconds since epoch

	booted     chan struct{}
	eng        gnet.Engine
	addr       string
	open       atomic.Int64
	opened     atomic.Int64 // ever: run waits for every client's open on it (open drops if one is closed meanwhile)
	heartbeats atomic.Int64

	scanMu    sync.Mutex                // impl scan: OnTick runs on a goroutine of its own
	scanConns map[*scanSession]struct{} // impl scan: the open conns not yet found idle
	scanDue   []*scanSession            // impl scan: OnTick's scratch

	mu     sync.Mutex
	conns  map[gnet.Conn]struct{} // the open conns: run measures the traffic work's allocations on one
	closes []closeRecord
}

// session is the per-conn state every impl shares: what the report needs.
// Each impl's own session embeds it, and c.Context() holds a pointer to
// that.
type session struct {
	id   int       // the client's id, from its first line; -1 until then
	peer string    // the client's address: who it is even before its first line
	last time.Time // the last traffic, on the server's clock (now)
	// Loop-owned, impls scan and afterfunc: set when they close the conn.
	closed     bool
	idleClosed bool      // closed for idle, with deadline
	deadline   time.Time // last + timeout, when closed for idle
}

func (ss *session) base() *session { return ss }

type sess interface{ base() *session }

// wheelSession: the Idle held by value.
type wheelSession struct {
	session
	idle gnetwheel.Idle
}

// scanSession: the last-activity time, read by the OnTick goroutine.
type scanSession struct {
	session
	lastNano atomic.Int64 // since server.epoch
	c        gnet.Conn
	check    gnet.RunnableFunc // runs on the loop: closes if idle really passed
}

// afterFuncSession: a timer of the runtime's, Reset on traffic.
type afterFuncSession struct {
	session
	t     *time.Timer
	check gnet.RunnableFunc // runs on the loop: closes if idle really passed
}

type closeRecord struct {
	id       int
	peer     string
	at, last time.Time
	deadline time.Time
	idle     bool // the impl closed it for idle (wheel: Idle.Err is ErrIdle)
}

// now is the server's clock: the hierarchy's with the wheel (the clock its
// deadlines are on), else the runtime's.
func (s *server) now() time.Time {
	if s.h != nil {
		return s.h.Now()
	}
	return time.Now()
}

func (s *server) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng = eng
	if fd, err := eng.Dup(); err == nil {
		if sa, err := unix.Getsockname(fd); err == nil {
			if in, ok := sa.(*unix.SockaddrInet4); ok {
				s.addr = fmt.Sprintf("127.0.0.1:%d", in.Port)
			}
		}
		unix.Close(fd)
	}
	close(s.booted)
	return gnet.None
}

func (s *server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	now := s.now()
	base := session{id: -1, last: now}
	if a := c.RemoteAddr(); a != nil {
		base.peer = a.String()
	}
	switch s.impl {
	case implWheel:
		ss := &wheelSession{session: base}
		ss.idle.Init(s.idler, c) // the idle timeout starts now
		c.SetContext(ss)
	case implScan:
		ss := &scanSession{session: base, c: c}
		ss.lastNano.Store(int64(now.Sub(s.epoch)))
		ss.check = func(context.Context) error { s.scanCheck(ss); return nil }
		c.SetContext(ss)
		s.scanMu.Lock()
		s.scanConns[ss] = struct{}{}
		s.scanMu.Unlock()
	case implAfterFunc:
		ss := &afterFuncSession{session: base}
		ss.check = func(context.Context) error { s.afterFuncCheck(c, ss); return nil }
		ss.t = time.AfterFunc(s.timeout, func() {
			// The timer's goroutine may not touch the conn: hop onto its loop.
			c.EventLoop().Execute(context.Background(), ss.check)
		})
		c.SetContext(ss)
	}
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.open.Add(1)
	s.opened.Add(1)
	return nil, gnet.None
}

func (s *server) OnTraffic(c gnet.Conn) gnet.Action {
	now := s.now()
	x := c.Context().(sess)
	switch x := x.(type) {
	case *wheelSession:
		x.idle.Traffic() // data arrived: push the close back
	case *scanSession:
		x.lastNano.Store(int64(now.Sub(s.epoch)))
	case *afterFuncSession:
		x.t.Reset(s.timeout)
	}
	ss := x.base()
	ss.last = now
	buf, _ := c.Next(-1)
	for _, line := range splitLines(buf) {
		s.heartbeats.Add(1)
		if ss.id < 0 {
			if id, err := strconv.Atoi(string(line)); err == nil {
				ss.id = id
			}
		}
	}
	return gnet.None
}

func (s *server) OnClose(c gnet.Conn, _ error) gnet.Action {
	x := c.Context().(sess)
	ss := x.base()
	rec := closeRecord{id: ss.id, peer: ss.peer, at: s.now(), last: ss.last, deadline: ss.deadline, idle: ss.idleClosed}
	ss.closed = true
	switch x := x.(type) {
	case *wheelSession:
		rec.deadline, rec.idle = x.idle.Deadline(), x.idle.Err() != nil
		x.idle.Close() // stop its timers
	case *scanSession:
		s.scanMu.Lock()
		delete(s.scanConns, x) // the scan may have taken it out already
		s.scanMu.Unlock()
	case *afterFuncSession:
		x.t.Stop()
	}
	s.open.Add(-1)
	s.mu.Lock()
	delete(s.conns, c)
	s.closes = append(s.closes, rec)
	s.mu.Unlock()
	return gnet.None
}

// trafficFunc is what OnTraffic does for the impl, as a func whose
// allocations can be counted.
func (s *server) trafficFunc(x sess, now time.Time) func() {
	switch x := x.(type) {
	case *wheelSession:
		return x.idle.Traffic
	case *scanSession:
		return func() { x.lastNano.Store(int64(now.Sub(s.epoch))) }
	case *afterFuncSession:
		return func() { x.t.Reset(s.timeout) }
	}
	return func() {}
}

// trafficAllocs counts the allocations of what OnTraffic does for the
// impl, on the loop of an open conn, while the clients are still quiet:
// testing.AllocsPerRun counts the whole process's, so the least of a few
// tries, made when nothing else runs, is the work's own. A conn may be
// closed for idle before its loop runs the count (a machine stalled for
// the timeout): then it tries another.
func (s *server) trafficAllocs() (float64, error) {
	s.mu.Lock()
	var conns []gnet.Conn
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		done := make(chan float64, 1) // NaN: c was closed before its loop ran this
		err := c.EventLoop().Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			x, ok := c.Context().(sess)
			if !ok || x.base().closed {
				done <- math.NaN()
				return nil
			}
			now := s.now()
			a := math.Inf(1)
			for range 3 {
				a = min(a, testing.AllocsPerRun(100, s.trafficFunc(x, now)))
			}
			x.base().last = now // as OnTraffic would
			done <- a
			return nil
		}))
		if err != nil {
			return 0, err
		}
		select {
		case a := <-done:
			if !math.IsNaN(a) {
				return a, nil
			}
		case <-time.After(10 * time.Second):
			return 0, fmt.Errorf("the event loop did not run the allocation count within 10s")
		}
	}
	return 0, fmt.Errorf("no open conn to measure the traffic work's allocations on: %d tried, all closed first", len(conns))
}

// OnTick, impl scan: every scanTick, on gnet's ticker goroutine, find the
// conns whose last activity is at least timeout ago and hand each to its
// loop, which closes it if that still holds there (traffic may have come
// in between: never close early).
func (s *server) OnTick() (time.Duration, gnet.Action) {
	now := int64(time.Since(s.epoch))
	due := s.scanDue[:0]
	s.scanMu.Lock()
	for ss := range s.scanConns {
		if now-ss.lastNano.Load() >= int64(s.timeout) {
			delete(s.scanConns, ss)
			due = append(due, ss)
		}
	}
	s.scanMu.Unlock()
	for _, ss := range due {
		ss.c.EventLoop().Execute(context.Background(), ss.check)
	}
	clear(due)
	s.scanDue = due
	return scanTick, gnet.None
}

// scanCheck runs on ss's loop.
func (s *server) scanCheck(ss *scanSession) {
	if ss.closed {
		return
	}
	if last := ss.lastNano.Load(); int64(time.Since(s.epoch))-last >= int64(s.timeout) {
		ss.idleClosed, ss.deadline = true, s.epoch.Add(time.Duration(last)+s.timeout)
		ss.c.EventLoop().Close(ss.c) // OnClose runs before this returns
		return
	}
	s.scanMu.Lock() // traffic came after the scan: back into the scan
	s.scanConns[ss] = struct{}{}
	s.scanMu.Unlock()
}

// afterFuncCheck runs on c's loop once ss's timer has fired.
func (s *server) afterFuncCheck(c gnet.Conn, ss *afterFuncSession) {
	if ss.closed {
		return
	}
	if idle := time.Since(ss.last); idle < s.timeout {
		ss.t.Reset(s.timeout - idle) // traffic came as the timer fired
		return
	}
	ss.idleClosed, ss.deadline = true, ss.last.Add(s.timeout)
	c.EventLoop().Close(c)
}

// splitLines returns the complete lines in buf (a heartbeat never spans
// two reads here: each is a few bytes, written at once).
func splitLines(buf []byte) [][]byte {
	var lines [][]byte
	for len(buf) > 0 {
		i := slices.Index(buf, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, buf[:i])
		buf = buf[i+1:]
	}
	return lines
}

// client sends its id, then a heartbeat about every interval, from before
// the run begins (its conn stays open while run measures); a silent one
// stops at quietAt, once the run has begun.
type client struct {
	id      int
	conn    net.Conn
	peer    string // conn's local address: the server's RemoteAddr for it
	silent  bool
	quietIn time.Duration // silent: how long after the run begins it falls silent
	quietAt time.Time     // silent: set before begin is closed
	rng     *rand.Rand
}

func (cl *client) run(interval time.Duration, begin, stop <-chan struct{}) {
	line := strconv.AppendInt(nil, int64(cl.id), 10)
	line = append(line, '\n')
	t := time.NewTimer(0)
	defer t.Stop()
	begun := false
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if !begun {
			select {
			case <-begin:
				begun = true
			default:
			}
		}
		if cl.silent && begun && !time.Now().Before(cl.quietAt) {
			return
		}
		if _, err := cl.conn.Write(line); err != nil {
			return
		}
		t.Reset(interval*4/5 + time.Duration(cl.rng.Int64N(int64(interval*2/5)+1)))
	}
}

// trackedName names what the progress lines count per impl.
var trackedName = map[string]string{
	implWheel: "wheel.Len",
	implScan:  "scanned",
}

// report is what a run measured.
type report struct {
	Impl            string
	Seed            uint64
	Conns, Silent   int
	Note            string
	Timeout         time.Duration
	Interval        time.Duration
	Elapsed         time.Duration
	Heartbeats      int64
	Late            []time.Duration // per idle close: when OnClose ran minus the deadline
	Early           int             // closes before timeout had passed since the last traffic
	ChattyClosed    int             // heartbeating clients closed before the end other than for idle
	Stalled         int             // heartbeating clients closed for idle, rightly: the server heard nothing from them for the timeout
	StalledMaxGap   time.Duration   // of those, the longest silence the server saw (close minus last traffic)
	SilentOpen      int             // silent clients still open at the end
	CPU             time.Duration   // process CPU over the run (server and its clients)
	WheelP99        time.Duration   // the wheel's own firing lateness (before the hop onto the loop), p99 bound
	HeapPerConn     float64         // heap with every conn open minus before any, per conn
	IdleBytes       float64         // an Idle and its share of its loop's buckets, per conn
	TrafficAllocs   float64         // allocations of the impl's work per traffic event (Idle.Traffic, ...), measured on a loop
	MallocsPerEvent float64         // process-wide allocations per heartbeat over the run (clients included)
}

func run(cfg config) (*report, error) {
	n, note, err := demo.FitConns(cfg.Conns)
	if err != nil {
		return nil, err
	}
	rep := &report{Impl: cfg.Impl, Seed: cfg.Seed, Conns: n, Note: note, Timeout: cfg.Timeout, Interval: cfg.Interval}
	s := &server{impl: cfg.Impl, timeout: cfg.Timeout, epoch: time.Now(), booted: make(chan struct{}), conns: map[gnet.Conn]struct{}{}}
	opts := []gnet.Option{gnet.WithMulticore(true), gnet.WithLogger(demo.Quiet{})}
	var w *gnetwheel.Wheel
	var tracked func() int
	switch cfg.Impl {
	case implWheel:
		h, err := timingwheel.New() // 1ms tick
		if err != nil {
			return nil, err
		}
		h.Start()
		defer h.Stop()
		w = gnetwheel.New(h)
		s.h, s.idler = h, w.Idler(cfg.Timeout)
		tracked = h.Len
	case implScan:
		s.scanConns = map[*scanSession]struct{}{}
		opts = append(opts, gnet.WithTicker(true))
		tracked = func() int { s.scanMu.Lock(); defer s.scanMu.Unlock(); return len(s.scanConns) }
	case implAfterFunc:
	default:
		return nil, fmt.Errorf("run takes one of %v as the impl, got %q", impls, cfg.Impl)
	}
	runErr := make(chan error, 1)
	go func() {
		runErr <- gnet.Run(s, "tcp://127.0.0.1:0", opts...)
	}()
	select {
	case <-s.booted:
	case err := <-runErr:
		return nil, fmt.Errorf("gnet: %v", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.eng.Stop(ctx)
		<-runErr
	}()

	heapBefore := demo.MemAfterGC().HeapAlloc
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x1d1e)) // the same workload for every impl
	rep.Silent = int(math.Round(cfg.Silent * float64(n)))
	window := cfg.Duration - cfg.Timeout - cfg.Slack
	clients := make([]*client, n)
	for i, j := range rng.Perm(n) {
		clients[j] = &client{id: j, silent: i < rep.Silent, rng: rand.New(rand.NewPCG(rng.Uint64(), uint64(j)))}
	}
	for _, cl := range clients {
		if cl.silent {
			cl.quietIn = time.Duration(cl.rng.Int64N(int64(window)))
		}
	}
	begin, stop := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	if _, err := demo.DialAll(s.addr, n, func(i int, c net.Conn) { clients[i].conn, clients[i].peer = c, c.LocalAddr().String() }); err != nil {
		return nil, fmt.Errorf("connecting: %v (lower -conns or raise ulimit -n)", err)
	}
	defer func() {
		for _, cl := range clients {
			if cl.conn != nil {
				cl.conn.Close()
			}
		}
	}()
	for wait := time.Now().Add(10 * time.Second); s.opened.Load() < int64(n) && time.Now().Before(wait); {
		time.Sleep(time.Millisecond)
	}
	rep.HeapPerConn = float64(int64(demo.MemAfterGC().HeapAlloc)-int64(heapBefore)) / float64(n)
	// The clients heartbeat from now on, so the rest of what run measures
	// here, however long a loaded machine makes it, is no silence of theirs.
	for _, cl := range clients {
		wg.Go(func() { cl.run(cfg.Interval, begin, stop) })
	}
	if w != nil {
		rep.IdleBytes = idleBytes(w)
	}
	if rep.TrafficAllocs, err = s.trafficAllocs(); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Progress, "idle: impl %s, %s; seed %d\n", cfg.Impl, implHow[cfg.Impl], cfg.Seed)
	fmt.Fprintf(cfg.Progress, "idle: %d clients connected to the gnet server on %s (%d will fall silent); timeout %v, running %v\n",
		n, s.addr, rep.Silent, cfg.Timeout, cfg.Duration)

	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0, _ := demo.ProcessCPU()
	beats0 := s.heartbeats.Load()
	start := time.Now()
	for _, cl := range clients {
		cl.quietAt = start.Add(cl.quietIn)
	}
	close(begin)
	tick := time.NewTicker(time.Second)
	end := time.After(cfg.Duration)
	beats := beats0
loop:
	for {
		select {
		case now := <-tick.C:
			b := s.heartbeats.Load()
			fmt.Fprintf(cfg.Progress, "%5.1fs  open %6d  heartbeats/s %6d", now.Sub(start).Seconds(), s.open.Load(), b-beats)
			if name := trackedName[cfg.Impl]; name != "" {
				fmt.Fprintf(cfg.Progress, "  %s %6d", name, tracked())
			}
			fmt.Fprintln(cfg.Progress)
			beats = b
		case <-end:
			break loop
		}
	}
	tick.Stop()
	rep.Elapsed = time.Since(start)
	cpu1, _ := demo.ProcessCPU()
	runtime.ReadMemStats(&ms1)
	rep.CPU = cpu1 - cpu0
	rep.Heartbeats = s.heartbeats.Load() - beats0
	rep.MallocsPerEvent = float64(ms1.Mallocs-ms0.Mallocs) / float64(max(rep.Heartbeats, 1))
	close(stop)
	wg.Wait()
	endAt := s.now()

	// Every silent client must be closed. A loaded machine may close the
	// last of them after the end: wait for them a while.
	bySilentPeer := map[string]bool{}
	for _, cl := range clients {
		if cl.silent {
			bySilentPeer[cl.peer] = true
		}
	}
	for wait := time.Now().Add(5 * time.Second); time.Now().Before(wait); time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		left := len(bySilentPeer)
		for _, c := range s.closes {
			if bySilentPeer[c.peer] {
				left--
			}
		}
		s.mu.Unlock()
		if left == 0 {
			break
		}
	}

	// Judge every close on the server's clock, the one the impl keeps its
	// deadlines on: a close is wrong if it came before timeout had passed
	// since the last traffic the server got on that conn. A heartbeating
	// client closed after the server really heard nothing from it for the
	// timeout was closed rightly: its heartbeats stalled (a loaded machine),
	// and the report counts it apart.
	s.mu.Lock()
	closes := slices.Clone(s.closes)
	s.mu.Unlock()
	byPeer := make(map[string]*client, n)
	for _, cl := range clients {
		byPeer[cl.peer] = cl
	}
	closed := make(map[*client]bool, len(closes))
	for _, c := range closes {
		early := c.at.Before(c.last.Add(cfg.Timeout))
		if early {
			rep.Early++
		}
		cl := byPeer[c.peer]
		switch {
		case cl == nil:
			return nil, fmt.Errorf("the server closed a conn from %q, which no client of this run dialled", c.peer)
		case cl.silent:
			closed[cl] = true
			if c.idle {
				rep.Late = append(rep.Late, c.at.Sub(c.deadline))
			}
		case c.at.After(endAt):
			// The client stopped at the end: its silence since is real.
		case !c.idle:
			rep.ChattyClosed++
		case !early:
			rep.Stalled++
			rep.StalledMaxGap = max(rep.StalledMaxGap, c.at.Sub(c.last))
		}
	}
	for _, cl := range clients {
		if cl.silent && !closed[cl] {
			rep.SilentOpen++
		}
	}
	if s.h != nil {
		st := s.h.Stats()
		rep.WheelP99 = st.LatenessQuantile(0.99)
	}
	return rep, nil
}

// idleBytes measures what an Idle costs per conn: the Idle itself in a
// session of its own, and what Init allocates.
func idleBytes(w *gnetwheel.Wheel) float64 {
	const n = 10_000
	idler := w.Idler(time.Hour)
	c := &nopConn{}
	xs := make([]*gnetwheel.Idle, n)
	before := demo.MemAfterGC().HeapAlloc
	for i := range xs {
		xs[i] = new(gnetwheel.Idle).Init(idler, c)
	}
	after := demo.MemAfterGC().HeapAlloc
	for _, x := range xs {
		x.Close()
	}
	return float64(int64(after)-int64(before)) / n
}

// nopConn is a gnet.Conn where only the Idle's cost matters, on nopLoop.
type nopConn struct{ gnet.Conn }

func (*nopConn) EventLoop() gnet.EventLoop { return nopLoop{} }

// nopLoop is the event loop of every nopConn: nothing reaches it within
// the measurement (the idle timeout is an hour).
type nopLoop struct{ gnet.EventLoop }

func (nopLoop) Execute(context.Context, gnet.Runnable) error { return nil }

func (r *report) print(w io.Writer) {
	if r.Note != "" {
		fmt.Fprintln(w, "idle:", r.Note)
	}
	fmt.Fprintf(w, "\nimpl %s: %s\n", r.Impl, implHow[r.Impl])
	fmt.Fprintf(w, "connections %d (%d fell silent), timeout %v, ran %v, heartbeats %d\n",
		r.Conns, r.Silent, r.Timeout, r.Elapsed.Round(time.Millisecond), r.Heartbeats)
	fmt.Fprintf(w, "idle closes %d: lateness after the deadline p50 %v  p99 %v  max %v\n", len(r.Late),
		demo.Quantile(r.Late, 0.5).Round(time.Microsecond), demo.Quantile(r.Late, 0.99).Round(time.Microsecond),
		demo.Quantile(r.Late, 1).Round(time.Microsecond))
	if r.Impl == implWheel {
		fmt.Fprintf(w, "  of which the wheel's firing (the rest is the hop onto the loop): p99 <= %v\n", r.WheelP99)
	}
	fmt.Fprintf(w, "early closes %d (must be 0)   chatty conns closed other than for idle %d (must be 0)   silent conns left open %d (must be 0)\n",
		r.Early, r.ChattyClosed, r.SilentOpen)
	if r.Stalled > 0 {
		fmt.Fprintf(w, "heartbeating conns closed for idle after the server heard nothing from them for the timeout (their heartbeats stalled; rightly closed): %d, longest silence %v\n",
			r.Stalled, r.StalledMaxGap.Round(time.Microsecond))
	}
	sec := r.Elapsed.Seconds()
	fmt.Fprintf(w, "CPU %.3f s over the run: %.1f µs per connection per second (server and its in-process clients)\n",
		r.CPU.Seconds(), float64(r.CPU.Microseconds())/float64(r.Conns)/sec)
	if r.Impl == implWheel {
		fmt.Fprintf(w, "heap per connection %.0f B (both ends, gnet's conn included); of it the idle timeout (gnetwheel.Idle and its share of the buckets) %.0f B\n",
			r.HeapPerConn, r.IdleBytes)
	} else {
		fmt.Fprintf(w, "heap per connection %.0f B (both ends, gnet's conn included)\n", r.HeapPerConn)
	}
	fmt.Fprintf(w, "allocations per traffic event: %s %.0f (must be 0); whole process %.2f per heartbeat (clients and gnet included)\n",
		trafficName[r.Impl], r.TrafficAllocs, r.MallocsPerEvent)
}

// trafficName names each impl's work per traffic event.
var trafficName = map[string]string{
	implWheel:     "Idle.Traffic",
	implScan:      "the last-activity store",
	implAfterFunc: "Timer.Reset",
}

func (r *report) problems() []string {
	var p []string
	if r.Early > 0 {
		p = append(p, fmt.Sprintf("%d conns closed before the timeout had passed since their last traffic", r.Early))
	}
	if r.ChattyClosed > 0 {
		p = append(p, fmt.Sprintf("%d heartbeating conns were closed other than for idle", r.ChattyClosed))
	}
	if r.SilentOpen > 0 {
		p = append(p, fmt.Sprintf("%d silent conns were left open", r.SilentOpen))
	}
	if r.TrafficAllocs != 0 {
		p = append(p, fmt.Sprintf("%s allocates %v times per call", trafficName[r.Impl], r.TrafficAllocs))
	}
	if len(r.Late) < r.Silent-r.SilentOpen {
		p = append(p, fmt.Sprintf("only %d idle closes were reported for %d silent conns", len(r.Late), r.Silent))
	}
	return p
}
