package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/internal/demo"
)

// config is everything run needs; the flags fill it in main.
type config struct {
	Packets    int
	Size       int // payload bytes per packet
	Window     int // packets in flight at most
	Loss       float64
	MinRTO     time.Duration
	InitialRTO time.Duration
	MaxRTO     time.Duration
	Seed       uint64        // 0: pick one at random
	GiveUp     time.Duration // stop and fail if the transfer takes longer

	Progress io.Writer // one line per second; nil for none
}

func defaultConfig() config {
	return config{
		Packets:    100_000,
		Size:       1000,
		Window:     64,
		Loss:       0.1,
		MinRTO:     10 * time.Millisecond,
		InitialRTO: time.Second,
		MaxRTO:     60 * time.Second,
		GiveUp:     2 * time.Minute,
	}
}

const (
	headerSize  = 9 // kind byte + sequence number
	maxDatagram = 65507
	tick        = time.Millisecond // the hierarchy's default; RFC 6298's G
)

func (c config) validate() error {
	switch {
	case c.Packets < 1:
		return fmt.Errorf("-packets must be at least 1, got %d", c.Packets)
	case c.Size < 1 || c.Size > maxDatagram-headerSize:
		return fmt.Errorf("-size must be between 1 and %d bytes (one UDP datagram), got %d", maxDatagram-headerSize, c.Size)
	case c.Window < 1:
		return fmt.Errorf("-window must be at least 1, got %d", c.Window)
	case math.IsNaN(c.Loss) || c.Loss < 0 || c.Loss >= 1:
		return fmt.Errorf("-loss is the fraction of packets the receiver drops and must be at least 0 and below 1, got %v", c.Loss)
	case c.MinRTO <= 0:
		return fmt.Errorf("-min-rto must be positive, got %v", c.MinRTO)
	case c.InitialRTO <= 0:
		return fmt.Errorf("-initial-rto must be positive, got %v", c.InitialRTO)
	case c.MaxRTO < c.MinRTO:
		return fmt.Errorf("-max-rto (%v) must not be below -min-rto (%v)", c.MaxRTO, c.MinRTO)
	case c.GiveUp <= 0:
		return fmt.Errorf("give-up time must be positive, got %v", c.GiveUp)
	}
	return nil
}

// putData writes the data datagram of packet seq into b, whose length is
// headerSize plus the payload size. A data datagram is 'D', the sequence
// number, then the payload, which is a function of the sequence number so
// the receiver can check it. An ack is 'A' and the sequence number it
// acknowledges.
func putData(b []byte, seq uint64) {
	b[0] = 'D'
	binary.BigEndian.PutUint64(b[1:], seq)
	fillPayload(b[headerSize:], seq)
}

func fillPayload(p []byte, seq uint64) {
	x := seq*0x9e3779b97f4a7c15 + 1
	for i := range p {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		p[i] = byte(x)
	}
}

// sender keeps up to window packets in flight, each in a record that holds
// its retransmission timer by value. Records are reused, so once the first
// window is out, sending a packet allocates nothing: no record, no timer,
// no datagram.
type sender struct {
	conn *net.UDPConn
	h    *timingwheel.Hierarchy
	size int // payload bytes per packet

	mu       sync.Mutex
	space    sync.Cond // signalled when a packet leaves the window
	est      rtoEstimator
	window   int
	inflight map[uint64]*packet
	free     *packet // records no longer in flight, ready for the next packet
	closed   bool
	err      error // first send error

	sent, retransmits, staleAcks int64
	maxRetx                      int
	late                         []time.Duration // how late each retransmit timer fired
	records                      int             // records made, each with its timer
	lastRecord                   uint64          // the packet the last record was made for
	acked                        atomic.Int64
}

// packet is the record of one packet in flight. A record is reused for a
// later packet only once no callback of its timer can still run: an ack
// whose Stop returns true cancelled the callback, and frees the record at
// once; when Stop returns false the callback has started and is waiting
// for s.mu, and it frees the record, finding it acked. So a late callback
// never resends, or re-arms the timer of, the packet that reuses its record.
type packet struct {
	rto   timingwheel.Timer // bound once to s.expired(p), then only Reset and Stopped
	dgram []byte            // the data datagram, rewritten for each packet
	next  *packet           // on the free list

	// Guarded by s.mu.
	seq    uint64
	sentAt time.Time // of the latest transmission
	retx   int       // retransmissions so far
	acked  bool
}

// send transmits packets 0..n-1 and returns once all are acked or the sender
// is closed.
func (s *sender) send(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for seq := range uint64(n) {
		// Until the first RTT sample, one packet at a time: like TCP's
		// handshake, it measures the path before the window opens.
		for !s.closed && (len(s.inflight) >= s.window || (!s.est.sampled && len(s.inflight) > 0)) {
			s.space.Wait()
		}
		if s.closed {
			return
		}
		s.sendLocked(seq)
	}
	for !s.closed && len(s.inflight) > 0 {
		s.space.Wait()
	}
}

// sendLocked puts packet seq in flight: in a free record, or a new one, it
// transmits the packet and arms the record's timer. s.mu must be held.
func (s *sender) sendLocked(seq uint64) {
	p := s.free
	if p != nil {
		s.free, p.next = p.next, nil
	} else {
		p = &packet{dgram: make([]byte, headerSize+s.size)}
		// Bound before it is first armed: the callback may fire on the
		// driver at once and use p.rto.
		p.rto.Init(s.h, func() { s.expired(p) })
		s.records++
		s.lastRecord = seq
	}
	p.seq, p.retx, p.acked = seq, 0, false
	putData(p.dgram, seq)
	s.inflight[seq] = p
	s.transmitLocked(p)
	p.rto.Reset(s.est.rto())
}

// transmitLocked sends p. s.mu must be held.
func (s *sender) transmitLocked(p *packet) {
	p.sentAt = s.h.Now() // the hierarchy's clock, so a test moving it by hand sees exact RTTs
	s.sent++
	if _, err := s.conn.Write(p.dgram); err != nil && s.err == nil {
		s.err = err
	}
}

// expired is p's retransmission timer. It runs on the hierarchy's driver
// goroutine, resends p, and re-arms its own timer with the backed-off RTO.
func (s *sender) expired(p *packet) {
	now := s.h.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.acked {
		// The ack came after this callback had started, so its Stop
		// returned false and left the record to be freed here.
		s.freeLocked(p)
		return
	}
	if s.closed {
		return
	}
	s.late = append(s.late, now.Sub(p.rto.Deadline()))
	p.retx++
	s.retransmits++
	s.maxRetx = max(s.maxRetx, p.retx)
	s.transmitLocked(p)
	p.rto.Reset(s.est.backoff(p.retx))
}

// freeLocked puts p, acked and with no callback pending, on the free list.
// s.mu must be held.
func (s *sender) freeLocked(p *packet) {
	p.next = s.free
	s.free = p
}

// readAcks stops the timer of each packet acked, and feeds the RTO estimator.
func (s *sender) readAcks() {
	buf := make([]byte, 64)
	for {
		n, err := s.conn.Read(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil || n != headerSize || buf[0] != 'A' {
			continue // e.g. an ICMP error reported on the socket
		}
		now := s.h.Now()
		seq := binary.BigEndian.Uint64(buf[1:])
		s.mu.Lock()
		s.ackLocked(seq, now)
		s.mu.Unlock()
	}
}

// ackLocked takes packet seq, acked at now, out of flight. s.mu must be held.
func (s *sender) ackLocked(seq uint64, now time.Time) {
	p := s.inflight[seq]
	if p == nil {
		s.staleAcks++ // a second ack, for a copy that was resent needlessly
		return
	}
	delete(s.inflight, seq)
	p.acked = true
	if p.retx == 0 { // Karn: an ack of a resent packet is ambiguous
		s.est.sample(now.Sub(p.sentAt))
	}
	if p.rto.Stop() {
		s.freeLocked(p)
	} // else its callback has started, and frees p
	s.acked.Add(1)
	s.space.Signal()
}

func (s *sender) close() {
	s.mu.Lock()
	s.closed = true
	s.space.Broadcast()
	s.mu.Unlock()
}

// receiver drops a fraction of the data datagrams it gets, acks the rest, and
// hands packets to the application in order.
type receiver struct {
	conn *net.UDPConn
	loss float64
	rng  *rand.Rand
	app  *application

	next uint64            // next sequence number the application needs
	held map[uint64][]byte // arrived ahead of next

	data, dropped, spurious atomic.Int64
}

func (r *receiver) receive() {
	buf := make([]byte, maxDatagram)
	ack := make([]byte, headerSize)
	ack[0] = 'A'
	for {
		n, from, err := r.conn.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil || n < headerSize || buf[0] != 'D' {
			continue
		}
		r.data.Add(1)
		seq := binary.BigEndian.Uint64(buf[1:])
		_, held := r.held[seq]
		dup := seq < r.next || held
		if dup {
			r.spurious.Add(1) // resent although this end already had it
		}
		if r.rng.Float64() < r.loss {
			r.dropped.Add(1)
			continue
		}
		binary.BigEndian.PutUint64(ack[1:], seq)
		r.conn.WriteToUDPAddrPort(ack, from)
		if dup {
			continue
		}
		if seq != r.next {
			r.held[seq] = bytes.Clone(buf[headerSize:n])
			continue
		}
		r.app.deliver(seq, buf[headerSize:n])
		r.next++
		for {
			p, ok := r.held[r.next]
			if !ok {
				break
			}
			delete(r.held, r.next)
			r.app.deliver(r.next, p)
			r.next++
		}
	}
}

// application is the receiving program: it checks that it gets every packet,
// once, in order, intact.
type application struct {
	size      int
	want      []byte
	next      uint64
	delivered atomic.Int64
	problems  []string // the first few
	bad       int
}

func (a *application) deliver(seq uint64, payload []byte) {
	fillPayload(a.want, seq)
	switch {
	case seq != a.next:
		a.fail("packet %d delivered when %d was due", seq, a.next)
	case !bytes.Equal(payload, a.want):
		a.fail("packet %d delivered with a wrong payload", seq)
	}
	a.next = seq + 1
	a.delivered.Add(1)
}

func (a *application) fail(format string, args ...any) {
	a.bad++
	if len(a.problems) < 5 {
		a.problems = append(a.problems, fmt.Sprintf(format, args...))
	}
}

// run transfers cfg.Packets from a sender to a receiver over UDP on
// 127.0.0.1 and reports. An error means the run could not take place; failed
// checks are in report.problems.
func run(cfg config) (*report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Seed = demo.PickSeed(cfg.Seed)
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}

	rconn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, fmt.Errorf("receiver: %w", err)
	}
	defer rconn.Close()
	sconn, err := net.DialUDP("udp", nil, rconn.LocalAddr().(*net.UDPAddr))
	if err != nil {
		return nil, fmt.Errorf("sender: %w", err)
	}
	defer sconn.Close()
	// Room for a full window; what the kernel still drops is recovered like
	// any other loss.
	for _, c := range []*net.UDPConn{rconn, sconn} {
		c.SetReadBuffer(4 << 20)
		c.SetWriteBuffer(4 << 20)
	}

	h, err := timingwheel.New()
	if err != nil {
		return nil, err
	}
	h.Start()
	defer h.Stop()

	app := &application{size: cfg.Size, want: make([]byte, cfg.Size)}
	rcv := &receiver{
		conn: rconn, loss: cfg.Loss, app: app,
		rng:  rand.New(rand.NewPCG(cfg.Seed, 0x1055)),
		held: make(map[uint64][]byte),
	}
	snd := &sender{
		conn: sconn, h: h, size: cfg.Size, window: cfg.Window,
		inflight: make(map[uint64]*packet),
		est:      rtoEstimator{g: tick, min: cfg.MinRTO, max: cfg.MaxRTO, initial: cfg.InitialRTO},
	}
	snd.space.L = &snd.mu

	var wg sync.WaitGroup
	wg.Go(rcv.receive)
	wg.Go(snd.readAcks)
	done := make(chan struct{})
	start := time.Now()
	go func() { defer close(done); snd.send(cfg.Packets) }()

	rep := &report{Seed: cfg.Seed, Packets: cfg.Packets, Size: cfg.Size, Window: cfg.Window, Loss: cfg.Loss, MinRTO: cfg.MinRTO}
	giveUp := time.NewTimer(cfg.GiveUp)
	defer giveUp.Stop()
	second := time.NewTicker(time.Second)
	defer second.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-giveUp.C:
			rep.GaveUp = true
			break wait
		case now := <-second.C:
			snd.mu.Lock()
			inflight, rto, srtt := len(snd.inflight), snd.est.rto(), snd.est.srtt
			retx := snd.retransmits
			snd.mu.Unlock()
			fmt.Fprintf(progress, "%5.1fs  delivered %7d  retransmissions %6d  in flight %4d  RTO %v (SRTT %v)\n",
				now.Sub(start).Seconds(), app.delivered.Load(), retx, inflight, rto, srtt.Round(time.Microsecond))
		}
	}
	rep.Elapsed = time.Since(start)

	// Stop everything, then read the results.
	snd.close()
	<-done
	h.Stop()
	rconn.Close()
	sconn.Close()
	wg.Wait()

	rep.Delivered = app.delivered.Load()
	rep.AppProblems, rep.AppBad = app.problems, app.bad
	rep.Sent, rep.Retransmissions, rep.StaleAcks = snd.sent, snd.retransmits, snd.staleAcks
	rep.MaxRetx = snd.maxRetx
	rep.DataArrived, rep.Dropped, rep.Spurious = rcv.data.Load(), rcv.dropped.Load(), rcv.spurious.Load()
	rep.RTO, rep.SRTT, rep.RTTVAR = snd.est.rto(), snd.est.srtt, snd.est.rttvar
	rep.SendErr = snd.err
	rep.TimerLate = snd.late
	slices.Sort(rep.TimerLate)
	rep.LeftInWheel = h.Len()
	rep.Records, rep.LastRecord = snd.records, snd.lastRecord
	return rep, nil
}
