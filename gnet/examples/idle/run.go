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
	"golang.org/x/sys/unix"
)

// server is the gnet handler. Everything about idle timeouts is in
// OnOpen, OnTraffic and OnClose: one line each. The rest is bookkeeping
// for the report.
type server struct {
	gnet.BuiltinEventEngine
	h       *timingwheel.Hierarchy
	idler   *gnetwheel.Idler
	timeout time.Duration

	booted     chan struct{}
	eng        gnet.Engine
	addr       string
	open       atomic.Int64
	heartbeats atomic.Int64
	allocs     atomic.Pointer[float64] // Idle.Traffic's allocations, measured once on a loop

	mu     sync.Mutex
	closes []closeRecord
}

// session is the per-conn state: the Idle held by value, and what the
// report needs.
type session struct {
	idle gnetwheel.Idle
	id   int       // the client's id, from its first line; -1 until then
	last time.Time // the last traffic, on the hierarchy's clock
}

type closeRecord struct {
	id       int
	at, last time.Time
	deadline time.Time
	err      error // Idle.Err: ErrIdle if the wheel closed it
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
	ss := &session{id: -1, last: s.h.Now()}
	ss.idle.Init(s.idler, c) // the idle timeout starts now
	c.SetContext(ss)
	s.open.Add(1)
	return nil, gnet.None
}

func (s *server) OnTraffic(c gnet.Conn) gnet.Action {
	ss := c.Context().(*session)
	ss.idle.Traffic() // data arrived: push the close back
	ss.last = s.h.Now()
	if s.allocs.Load() == nil {
		a := testing.AllocsPerRun(100, ss.idle.Traffic)
		s.allocs.Store(&a)
	}
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
	ss := c.Context().(*session)
	rec := closeRecord{id: ss.id, at: s.h.Now(), last: ss.last, deadline: ss.idle.Deadline(), err: ss.idle.Err()}
	ss.idle.Close() // stop its timers
	s.open.Add(-1)
	s.mu.Lock()
	s.closes = append(s.closes, rec)
	s.mu.Unlock()
	return gnet.None
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

// client sends its id, then a heartbeat about every interval; a silent one
// stops at quietAt.
type client struct {
	id       int
	conn     net.Conn
	silent   bool
	quietAt  time.Time
	lastSent time.Time
	rng      *rand.Rand
}

func (cl *client) run(interval time.Duration, stop <-chan struct{}) {
	line := strconv.AppendInt(nil, int64(cl.id), 10)
	line = append(line, '\n')
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		now := time.Now()
		if cl.silent && !cl.lastSent.IsZero() && !now.Before(cl.quietAt) {
			return
		}
		if _, err := cl.conn.Write(line); err != nil {
			return
		}
		cl.lastSent = now
		t.Reset(interval*4/5 + time.Duration(cl.rng.Int64N(int64(interval*2/5)+1)))
	}
}

// report is what a run measured.
type report struct {
	Conns, Silent   int
	Note            string
	Timeout         time.Duration
	Elapsed         time.Duration
	Heartbeats      int64
	Late            []time.Duration // per idle close: when OnClose ran minus the deadline
	Early           int             // closes before timeout had passed since the last traffic
	ChattyClosed    int             // heartbeating clients closed before the end
	SilentOpen      int             // silent clients still open at the end
	CPU             time.Duration   // process CPU over the run (server and its clients)
	WheelP99        time.Duration   // the wheel's own firing lateness (before the hop onto the loop), p99 bound
	HeapPerConn     float64         // heap with every conn open minus before any, per conn
	IdleBytes       float64         // an Idle and its share of its loop's buckets, per conn
	TrafficAllocs   float64         // allocations of one Idle.Traffic, measured on a loop
	MallocsPerEvent float64         // process-wide allocations per heartbeat over the run (clients included)
}

func run(cfg config) (*report, error) {
	n, note, err := fitConns(cfg.Conns)
	if err != nil {
		return nil, err
	}
	rep := &report{Conns: n, Note: note, Timeout: cfg.Timeout}
	h, err := timingwheel.New() // 1ms tick
	if err != nil {
		return nil, err
	}
	h.Start()
	defer h.Stop()
	w := gnetwheel.New(h)
	s := &server{h: h, idler: w.Idler(cfg.Timeout), timeout: cfg.Timeout, booted: make(chan struct{})}
	runErr := make(chan error, 1)
	go func() {
		runErr <- gnet.Run(s, "tcp://127.0.0.1:0", gnet.WithMulticore(true), gnet.WithLogger(quiet{}))
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

	heapBefore := heapAfterGC()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x1d1e))
	rep.Silent = int(math.Round(cfg.Silent * float64(n)))
	window := cfg.Duration - cfg.Timeout - cfg.Slack
	clients := make([]*client, n)
	for i, j := range rng.Perm(n) {
		clients[j] = &client{id: j, silent: i < rep.Silent, rng: rand.New(rand.NewPCG(rng.Uint64(), uint64(j)))}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if err := dialAll(s.addr, clients); err != nil {
		return nil, err
	}
	defer func() {
		for _, cl := range clients {
			if cl.conn != nil {
				cl.conn.Close()
			}
		}
	}()
	for wait := time.Now().Add(10 * time.Second); s.open.Load() < int64(n) && time.Now().Before(wait); {
		time.Sleep(time.Millisecond)
	}
	rep.HeapPerConn = float64(int64(heapAfterGC())-int64(heapBefore)) / float64(n)
	rep.IdleBytes = idleBytes(w)
	fmt.Fprintf(cfg.Progress, "idle: %d clients connected to the gnet server on %s (%d will fall silent); timeout %v, running %v\n",
		n, s.addr, rep.Silent, cfg.Timeout, cfg.Duration)

	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0, _ := processCPU()
	start := time.Now()
	for _, cl := range clients {
		if cl.silent {
			cl.quietAt = start.Add(time.Duration(cl.rng.Int64N(int64(window))))
		}
		wg.Go(func() { cl.run(cfg.Interval, stop) })
	}
	tick := time.NewTicker(time.Second)
	end := time.After(cfg.Duration)
	beats := s.heartbeats.Load()
loop:
	for {
		select {
		case now := <-tick.C:
			b := s.heartbeats.Load()
			fmt.Fprintf(cfg.Progress, "%5.1fs  open %6d  heartbeats/s %6d  wheel.Len %6d\n",
				now.Sub(start).Seconds(), s.open.Load(), b-beats, h.Len())
			beats = b
		case <-end:
			break loop
		}
	}
	tick.Stop()
	rep.Elapsed = time.Since(start)
	cpu1, _ := processCPU()
	runtime.ReadMemStats(&ms1)
	rep.CPU = cpu1 - cpu0
	rep.Heartbeats = s.heartbeats.Load()
	rep.MallocsPerEvent = float64(ms1.Mallocs-ms0.Mallocs) / float64(max(rep.Heartbeats, 1))
	if a := s.allocs.Load(); a != nil {
		rep.TrafficAllocs = *a
	}
	close(stop)
	wg.Wait()
	endAt := h.Now()

	// Judge what happened up to the end.
	s.mu.Lock()
	closes := slices.Clone(s.closes)
	s.mu.Unlock()
	closed := make(map[int]bool, len(closes))
	for _, c := range closes {
		if c.at.After(endAt) {
			continue
		}
		closed[c.id] = true
		if c.at.Before(c.last.Add(cfg.Timeout)) {
			rep.Early++
		}
		if c.err != nil {
			rep.Late = append(rep.Late, c.at.Sub(c.deadline))
		}
		if c.id >= 0 && c.id < n && !clients[c.id].silent {
			rep.ChattyClosed++
		}
	}
	for _, cl := range clients {
		if cl.silent && !closed[cl.id] {
			rep.SilentOpen++
		}
	}
	st := h.Stats()
	rep.WheelP99 = st.LatenessQuantile(0.99)
	return rep, nil
}

// dialAll connects every client, 64 at a time so the listen queue never
// overflows.
func dialAll(addr string, clients []*client) error {
	ids := make(chan int)
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := range ids {
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					continue
				}
				clients[i].conn = c
			}
		})
	}
	for i := range clients {
		if firstErr.Load() != nil {
			break
		}
		ids <- i
	}
	close(ids)
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		return fmt.Errorf("connecting: %v (lower -conns or raise ulimit -n)", *p)
	}
	return nil
}

func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// idleBytes measures what an Idle costs per conn: the Idle itself in a
// session of its own, and what Init allocates.
func idleBytes(w *gnetwheel.Wheel) float64 {
	const n = 10_000
	idler := w.Idler(time.Hour)
	c := &nopConn{}
	xs := make([]*gnetwheel.Idle, n)
	before := heapAfterGC()
	for i := range xs {
		xs[i] = new(gnetwheel.Idle).Init(idler, c)
	}
	after := heapAfterGC()
	for _, x := range xs {
		x.Close()
	}
	return float64(int64(after)-int64(before)) / n
}

// nopConn is a gnet.Conn where only the Idle's cost matters.
type nopConn struct{ gnet.Conn }

func (*nopConn) EventLoop() gnet.EventLoop { return nil }

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func (r *report) print(w io.Writer) {
	if r.Note != "" {
		fmt.Fprintln(w, "idle:", r.Note)
	}
	fmt.Fprintf(w, "\nconnections %d (%d fell silent), timeout %v, ran %v, heartbeats %d\n",
		r.Conns, r.Silent, r.Timeout, r.Elapsed.Round(time.Millisecond), r.Heartbeats)
	fmt.Fprintf(w, "idle closes %d: lateness after the deadline p50 %v  p99 %v  max %v\n", len(r.Late),
		quantile(r.Late, 0.5).Round(time.Microsecond), quantile(r.Late, 0.99).Round(time.Microsecond),
		quantile(r.Late, 1).Round(time.Microsecond))
	fmt.Fprintf(w, "  of which the wheel's firing (the rest is the hop onto the loop): p99 <= %v\n", r.WheelP99)
	fmt.Fprintf(w, "early closes %d (must be 0)   chatty conns closed %d (must be 0)   silent conns left open %d (must be 0)\n",
		r.Early, r.ChattyClosed, r.SilentOpen)
	sec := r.Elapsed.Seconds()
	fmt.Fprintf(w, "CPU %.3f s over the run: %.1f µs per connection per second (server and its in-process clients)\n",
		r.CPU.Seconds(), float64(r.CPU.Microseconds())/float64(r.Conns)/sec)
	fmt.Fprintf(w, "heap per connection %.0f B (both ends, gnet's conn included); of it the idle timeout (gnetwheel.Idle and its share of the buckets) %.0f B\n",
		r.HeapPerConn, r.IdleBytes)
	fmt.Fprintf(w, "allocations per traffic event: Idle.Traffic %.0f (must be 0); whole process %.2f per heartbeat (clients and gnet included)\n",
		r.TrafficAllocs, r.MallocsPerEvent)
}

func (r *report) problems() []string {
	var p []string
	if r.Early > 0 {
		p = append(p, fmt.Sprintf("%d conns closed before the timeout had passed since their last traffic", r.Early))
	}
	if r.ChattyClosed > 0 {
		p = append(p, fmt.Sprintf("%d heartbeating conns were closed", r.ChattyClosed))
	}
	if r.SilentOpen > 0 {
		p = append(p, fmt.Sprintf("%d silent conns were left open", r.SilentOpen))
	}
	if r.TrafficAllocs != 0 {
		p = append(p, fmt.Sprintf("Idle.Traffic allocates %v times per call", r.TrafficAllocs))
	}
	if len(r.Late) < r.Silent-r.SilentOpen {
		p = append(p, fmt.Sprintf("only %d idle closes were reported for %d silent conns", len(r.Late), r.Silent))
	}
	return p
}

// quiet is a gnet logger that drops everything.
type quiet struct{}

func (quiet) Debugf(string, ...any) {}
func (quiet) Infof(string, ...any)  {}
func (quiet) Warnf(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(string, ...any) {}
