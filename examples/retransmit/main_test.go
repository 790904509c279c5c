package main

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/internal/demotest"
	"github.com/timingwheel/timingwheel/wheeltest"
)

// TestRun transfers a few hundred packets through a lossy receiver and
// applies the same checks as the demo's exit status.
func TestRun(t *testing.T) {
	for _, tt := range []struct {
		name   string
		loss   float64
		window int
		minRTO time.Duration
	}{
		{"loss=0.1", 0.1, 64, 10 * time.Millisecond},
		{"loss=0.3,window=8", 0.3, 8, 10 * time.Millisecond},
		{"loss=0", 0, 16, 10 * time.Millisecond},
		// An RTO of about a millisecond: spurious retransmissions, whose
		// duplicates the receiver must absorb.
		{"loss=0.2,min-rto=1µs", 0.2, 32, time.Microsecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.Packets = 500
			cfg.Loss = tt.loss
			cfg.Window = tt.window
			cfg.MinRTO = tt.minRTO
			cfg.Seed = 7
			cfg.GiveUp = time.Minute
			cfg.Progress = t.Output()

			rep, err := run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			demotest.LogReport(t, rep.print, rep.problems())
			if rep.Delivered != int64(cfg.Packets) {
				t.Errorf("delivered %d packets, want %d", rep.Delivered, cfg.Packets)
			}
			// Every drop costs a retransmission; the kernel may drop more.
			if rep.Retransmissions < rep.Dropped {
				t.Errorf("%d retransmissions for %d dropped datagrams, want at least as many", rep.Retransmissions, rep.Dropped)
			}
			if tt.loss > 0 && rep.Dropped == 0 {
				t.Errorf("no datagram dropped at -loss %v", tt.loss)
			}
			if rep.Sent != int64(cfg.Packets)+rep.Retransmissions {
				t.Errorf("sent %d datagrams, want %d packets + %d retransmissions", rep.Sent, cfg.Packets, rep.Retransmissions)
			}
			if rep.RTO < cfg.MinRTO || rep.RTO > cfg.MaxRTO {
				t.Errorf("final RTO %v outside [-min-rto %v, -max-rto %v]", rep.RTO, cfg.MinRTO, cfg.MaxRTO)
			}
		})
	}
}

// newTestSender returns a sender whose timers run on a hierarchy with a
// clock moved by hand (wheeltest.Clock: a move costs no real time, where a
// clock.Mock's sleeps 1 ms), advanced by the test, and whose datagrams go to
// a UDP socket that nobody reads.
func newTestSender(t *testing.T) (*sender, *wheeltest.Clock) {
	t.Helper()
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	conn, err := net.DialUDP("udp", nil, sink.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	mock := wheeltest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := demotest.NewHierarchy(t, timingwheel.WithClock(mock))
	s := &sender{
		conn: conn, h: h, size: 100, window: 8,
		inflight: make(map[uint64]*packet),
		est:      rtoEstimator{g: tick, min: 10 * time.Millisecond, max: time.Second, initial: time.Second},
		late:     make([]time.Duration, 0, 10_000),
	}
	s.space.L = &s.mu
	return s, mock
}

// TestSenderAllocs checks that the timers cost no allocation per packet once
// the records exist: sending, acking and retransmitting reuse them.
func TestSenderAllocs(t *testing.T) {
	const runs = 2000 // each retransmission moves the clock: at once (a clock.Mock would sleep 2 s in all)
	s, mock := newTestSender(t)
	seq := uint64(0)
	sendAck := func() {
		s.mu.Lock()
		s.sendLocked(seq)
		s.ackLocked(seq, s.h.Now())
		s.mu.Unlock()
		seq++
	}
	retransmitAck := func() {
		s.mu.Lock()
		s.sendLocked(seq)
		deadline := s.inflight[seq].rto.Deadline()
		s.mu.Unlock()
		// To the packet's RTO: the timer fires, resends and re-arms.
		if ran := wheeltest.AdvanceTo(s.h, mock, deadline); ran != 1 {
			t.Fatalf("packet %d: Advance ran %d callbacks, want its retransmit timer", seq, ran)
		}
		s.mu.Lock()
		s.ackLocked(seq, s.h.Now())
		s.mu.Unlock()
		seq++
	}
	sendAck() // makes the one record the rest reuse
	for _, tt := range []struct {
		name string
		f    func()
	}{
		{"send+ack", sendAck},
		{"send+retransmit+ack", retransmitAck},
	} {
		// AllocsPerRun calls f once more than runs, to warm up.
		if allocs := testing.AllocsPerRun(runs, tt.f); allocs != 0 {
			t.Errorf("%s: %v allocations per packet, want 0", tt.name, allocs)
		}
	}
	const want = 1 + (runs+1)*3 // the first packet, then one or two datagrams per packet
	if s.records != 1 || s.retransmits != runs+1 || s.sent != want || len(s.inflight) != 0 {
		t.Errorf("%d records, %d retransmits, %d datagrams sent, %d in flight; want 1, %d, %d, 0",
			s.records, s.retransmits, s.sent, len(s.inflight), runs+1, want)
	}
}

// TestSenderAckDuringCallback covers the hand-off of a record whose ack comes
// after its timer's callback has started: Stop returns false, so the
// callback, not the ack, frees the record, and resends nothing.
func TestSenderAckDuringCallback(t *testing.T) {
	s, mock := newTestSender(t)
	s.mu.Lock()
	s.sendLocked(0)
	p := s.inflight[0]
	mock.Add(time.Second)
	advanced := make(chan int)
	go func() { advanced <- s.h.Advance() }() // the callback blocks on s.mu
	watchdog := time.After(10 * time.Second)
	for s.h.Len() > 0 { // Len counts the timer as armed until its callback starts
		select {
		case <-watchdog:
			s.mu.Unlock()
			t.Fatal("hung: the retransmit timer's callback did not start within 10s")
		case <-time.After(time.Millisecond):
		}
	}
	s.ackLocked(0, s.h.Now())
	if s.free != nil {
		t.Error("the ack freed the record while its callback was running")
	}
	s.mu.Unlock()
	select {
	case ran := <-advanced:
		if ran != 1 {
			t.Errorf("Advance ran %d callbacks, want 1", ran)
		}
	case <-watchdog:
		t.Fatal("hung: Advance did not return after the ack released s.mu")
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free != p || s.retransmits != 0 || s.sent != 1 {
		t.Errorf("after the callback: record freed %v, %d retransmits, %d sent; want true, 0, 1", s.free == p, s.retransmits, s.sent)
	}
	s.sendLocked(1)
	if s.inflight[1] != p || s.records != 1 {
		t.Errorf("packet 1 got a new record (%d made), want the freed one reused", s.records)
	}
}

// TestSenderBacksOffTick by tick walks an unacked packet's timer with
// wheeltest.AdvanceTo, as the driver would: before any RTT sample the RTO
// is 1s, and each retransmission re-arms the timer, from its own callback,
// for twice as long: resent at 1s, 3s, 7s and 15s, each on its tick, not
// late. An ack then stops the timer, and the RTT it measures is exact.
func TestSenderBacksOffTickByTick(t *testing.T) {
	s, clk := newTestSender(t)
	s.est.max = time.Minute
	start := clk.Now()
	s.mu.Lock()
	s.sendLocked(0)
	p := s.inflight[0]
	s.mu.Unlock()
	var at []time.Duration
	for _, d := range []time.Duration{time.Second, 3 * time.Second, 7 * time.Second, 15 * time.Second} {
		// The clock stops just before each resend, then at it.
		if ran := wheeltest.AdvanceTo(s.h, clk, start.Add(d-time.Millisecond)); ran != 0 {
			t.Fatalf("%d callbacks ran before %v, want none", ran, d)
		}
		if ran := wheeltest.AdvanceTo(s.h, clk, start.Add(d)); ran != 1 {
			t.Fatalf("%d callbacks ran at %v, want the retransmission", ran, d)
		}
		s.mu.Lock()
		at = append(at, p.sentAt.Sub(start))
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if want := []time.Duration{time.Second, 3 * time.Second, 7 * time.Second, 15 * time.Second}; !slices.Equal(at, want) {
		t.Errorf("resent at %v, want %v", at, want)
	}
	if s.retransmits != 4 || s.sent != 5 || p.retx != 4 || slices.ContainsFunc(s.late, func(d time.Duration) bool { return d != 0 }) {
		t.Errorf("%d retransmits, %d sent, retx %d, lateness %v; want 4, 5, 4, all 0", s.retransmits, s.sent, p.retx, s.late)
	}
	if d := p.rto.Deadline().Sub(start); d != 31*time.Second {
		t.Errorf("the timer is armed for %v, want 31s (15s + 16s)", d)
	}
	s.ackLocked(0, s.h.Now())
	if s.h.Len() != 0 || s.free != p {
		t.Errorf("after the ack: %d timers armed, record freed %v; want 0, true", s.h.Len(), s.free == p)
	}
}

// TestRTOEstimator checks the RFC 6298 arithmetic step by step.
func TestRTOEstimator(t *testing.T) {
	ms := time.Millisecond
	e := rtoEstimator{g: ms, min: 10 * ms, max: 60 * time.Second, initial: time.Second}
	if got := e.rto(); got != time.Second {
		t.Errorf("before any sample: rto() = %v, want the initial 1s", got)
	}
	if got := e.backoff(2); got != 4*time.Second {
		t.Errorf("before any sample: backoff(2) = %v, want 4s", got)
	}
	steps := []struct {
		sample             time.Duration
		srtt, rttvar, want time.Duration
	}{
		// First: SRTT = R, RTTVAR = R/2, RTO = R + 4(R/2) = 3R.
		{100 * ms, 100 * ms, 50 * ms, 300 * ms},
		// RTTVAR = 3/4*50 + 1/4*|100-200| = 62.5; SRTT = 7/8*100 + 1/8*200 = 112.5.
		{200 * ms, 112500 * time.Microsecond, 62500 * time.Microsecond, 362500 * time.Microsecond},
		// RTTVAR = 3/4*62.5 + 1/4*|112.5-112.5| = 46.875; SRTT stays.
		{112500 * time.Microsecond, 112500 * time.Microsecond, 46875 * time.Microsecond, 300 * ms},
	}
	for i, s := range steps {
		e.sample(s.sample)
		if e.srtt != s.srtt || e.rttvar != s.rttvar || e.rto() != s.want {
			t.Errorf("step %d: sample(%v): SRTT %v, RTTVAR %v, RTO %v; want %v, %v, %v",
				i, s.sample, e.srtt, e.rttvar, e.rto(), s.srtt, s.rttvar, s.want)
		}
	}
	if got := e.backoff(3); got != 2400*ms {
		t.Errorf("backoff(3) = %v, want 8 x 300ms", got)
	}
	if got := e.backoff(40); got != e.max {
		t.Errorf("backoff(40) = %v, want the ceiling %v", got, e.max)
	}

	// Tiny RTTs: the granularity, then the floor, take over.
	f := rtoEstimator{g: ms, min: 10 * ms, max: time.Minute, initial: time.Second}
	f.sample(50 * time.Microsecond)
	if got := f.rto(); got != 10*ms {
		t.Errorf("50µs RTT: rto() = %v, want the 10ms floor", got)
	}
	f.min = time.Microsecond
	if got, want := f.rto(), 50*time.Microsecond+ms; got != want {
		t.Errorf("50µs RTT, no floor: rto() = %v, want SRTT + G = %v", got, want)
	}
}

func TestParseFlags(t *testing.T) {
	demotest.CheckParse(t, parseFlags, demotest.FlagCases{
		{nil, ""},
		{[]string{"-packets", "10", "-loss", "0", "-window", "1"}, ""},
		{[]string{"-packets", "0"}, "-packets must be at least 1"},
		{[]string{"-size", "0"}, "-size must be between 1 and"},
		{[]string{"-size", "70000"}, "-size must be between 1 and"},
		{[]string{"-window", "0"}, "-window must be at least 1"},
		{[]string{"-loss", "1"}, "below 1"},
		{[]string{"-loss", "-0.5"}, "below 1"},
		{[]string{"-min-rto", "0s"}, "-min-rto must be positive"},
		{[]string{"-initial-rto", "-1s"}, "-initial-rto must be positive"},
		{[]string{"-max-rto", "5ms"}, "-max-rto (5ms) must not be below -min-rto (10ms)"},
		{[]string{"extra"}, "unexpected argument"},
	})
}
