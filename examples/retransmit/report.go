package main

import (
	"fmt"
	"io"
	"time"
)

// report is what a run measured and what it found wrong.
type report struct {
	Seed    uint64
	Packets int
	Size    int
	Window  int
	Loss    float64
	MinRTO  time.Duration
	Elapsed time.Duration
	GaveUp  bool

	Delivered   int64    // packets the application got
	AppBad      int      // deliveries out of order or corrupted
	AppProblems []string // the first few of them

	Sent            int64 // data datagrams sent, first copies and retransmissions
	Retransmissions int64
	Spurious        int64 // resent copies of packets the receiver already had
	StaleAcks       int64 // acks for packets no longer in flight
	DataArrived     int64 // data datagrams that reached the receiver
	Dropped         int64 // ... and that it dropped on purpose
	MaxRetx         int   // most retransmissions of one packet
	SendErr         error

	RTO, SRTT, RTTVAR time.Duration   // at the end
	TimerLate         []time.Duration // per retransmit: firing time minus deadline, sorted
	LeftInWheel       int             // timers still armed after the transfer

	// Records is how many packet records the sender made, each with the
	// retransmit timer inside it and the timer's callback: the only
	// allocations for timers. LastRecord is the packet the last one was
	// made for; later packets reused records.
	Records    int
	LastRecord uint64
}

// timerAllocsPerPacket is the allocations made for retransmit timers (a
// record and a callback per record) per packet sent.
func (r *report) timerAllocsPerPacket() float64 {
	return float64(2*r.Records) / float64(max(r.Sent-r.Retransmissions, 1))
}

// problems lists every failed check; none means exit status 0.
func (r *report) problems() []string {
	var p []string
	if r.GaveUp {
		p = append(p, fmt.Sprintf("gave up after %v with %d of %d packets delivered", r.Elapsed.Round(time.Millisecond), r.Delivered, r.Packets))
	} else if r.Delivered != int64(r.Packets) {
		p = append(p, fmt.Sprintf("the application got %d of %d packets", r.Delivered, r.Packets))
	}
	if r.AppBad > 0 {
		p = append(p, fmt.Sprintf("%d packets reached the application out of order or corrupted, e.g. %v", r.AppBad, r.AppProblems))
	}
	if !r.GaveUp && r.LeftInWheel != 0 {
		p = append(p, fmt.Sprintf("%d retransmit timers still armed after every packet was acked", r.LeftInWheel))
	}
	// A record is in flight, or waiting for its timer's callback to free
	// it; callbacks run one at a time, so at most one record waits.
	if r.Records > r.Window+1 {
		p = append(p, fmt.Sprintf("%d packet records made for a window of %d: records are not being reused", r.Records, r.Window))
	}
	if n := len(r.TimerLate); n > 0 && r.TimerLate[0] < 0 {
		p = append(p, fmt.Sprintf("a retransmit timer fired %v before its deadline", -r.TimerLate[0]))
	}
	return p
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "\nretransmit report (seed %d)\n", r.Seed)
	row := func(name, format string, args ...any) {
		fmt.Fprintf(w, "  %-22s "+format+"\n", append([]any{name}, args...)...)
	}
	check := "in order and intact"
	if r.AppBad > 0 {
		check = fmt.Sprintf("%d out of order or corrupted", r.AppBad)
	}
	row("packets delivered", "%d of %d, %s", r.Delivered, r.Packets, check)
	row("datagrams sent", "%d: %d packets + %d retransmissions (most for one packet: %d)",
		r.Sent, r.Sent-r.Retransmissions, r.Retransmissions, r.MaxRetx)
	row("dropped by receiver", "%d of %d arrived (%.1f%%; -loss %v)",
		r.Dropped, r.DataArrived, 100*float64(r.Dropped)/float64(max(r.DataArrived, 1)), r.Loss)
	row("spurious retransmits", "%d (copies of packets the receiver already had)", r.Spurious)
	secs := r.Elapsed.Seconds()
	row("goodput", "%.1f MB/s (%.0f packets/s of %d B) over %v",
		float64(r.Delivered)*float64(r.Size)/secs/1e6, float64(r.Delivered)/secs, r.Size, r.Elapsed.Round(time.Millisecond))
	floor := ""
	if r.RTO == r.MinRTO {
		floor = " = -min-rto floor"
	}
	row("final RTO", "%v%s (SRTT %v, RTTVAR %v)", r.RTO.Round(time.Microsecond), floor, r.SRTT.Round(time.Microsecond), r.RTTVAR.Round(time.Microsecond))
	if n := len(r.TimerLate); n > 0 {
		row("timer lateness", "p50 %v  p99 %v  max %v  (each retransmit against its deadline)",
			ms(percentile(r.TimerLate, 0.50)), ms(percentile(r.TimerLate, 0.99)), ms(r.TimerLate[n-1]))
	}
	row("timer allocations", "%.2f per packet sent (%d in all for %d packets: a record holding the timer, and its callback)",
		r.timerAllocsPerPacket(), 2*r.Records, r.Sent-r.Retransmissions)
	row("packet records", "%d, all made by packet %d, then reused (-window %d)", r.Records, r.LastRecord, r.Window)
	if r.SendErr != nil {
		row("send error", "%v (recovered by retransmission)", r.SendErr)
	}
	if p := r.problems(); len(p) > 0 {
		row("result", "FAIL: %d problems", len(p))
	} else {
		row("result", "OK")
	}
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 1) of sorted d.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(float64(len(d))*p+0.999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// ms rounds a duration for display: to 10µs below 10ms, to 1ms above.
func ms(d time.Duration) time.Duration {
	if d < 10*time.Millisecond && d > -10*time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
