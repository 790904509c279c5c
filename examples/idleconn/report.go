package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// report is what a run measured and what it found wrong.
type report struct {
	Seed        uint64
	Requested   int // -conns
	Conns       int // connections actually run (fewer if file descriptors are short)
	Timeout     time.Duration
	ConnectTime time.Duration
	Elapsed     time.Duration

	Heartbeats         int64 // lines handled by the server, including each client's first
	RunHeartbeats      int64 // ... of which during the run, after connecting
	Silent             int   // clients that fell silent
	SilentClosed       int   // ... and were closed for it
	SilentOpen         int   // ... and were still open at the end (a failure)
	HeartbeatingClosed int   // clients closed while still sending (a failure)
	UnknownClosed      int   // connections closed before saying who they are (a failure)
	ClientErrors       int   // clients whose heartbeat could not be sent (a failure)
	FirstClientErr     error

	Lateness []time.Duration // per close: close time minus its deadline, sorted

	PeakHeap          uint64  // bytes, sampled once a second
	WheelBytesPerConn float64 // heap per connection in a Timeouts set
	CPU               cpuReport
}

// judge fills in the verdict from the clients (after they stopped) and the
// server's record of idle closes (after the hierarchy stopped).
func (r *report) judge(clients []*client, closes []closeRecord) {
	closedAt := make(map[int]time.Time, len(closes))
	r.Lateness = r.Lateness[:0]
	for _, rec := range closes {
		r.Lateness = append(r.Lateness, rec.late)
		if rec.id < 0 || rec.id >= len(clients) {
			r.UnknownClosed++
			continue
		}
		closedAt[rec.id] = rec.at
	}
	slices.Sort(r.Lateness)
	for _, cl := range clients {
		at, closed := closedAt[cl.id]
		switch {
		case cl.silent && closed && at.Before(cl.quietAt):
			r.Silent++
			r.HeartbeatingClosed++
		case cl.silent && closed:
			r.Silent++
			r.SilentClosed++
		case cl.silent:
			r.Silent++
			r.SilentOpen++
		case closed:
			r.HeartbeatingClosed++
		}
		if cl.err != nil {
			r.ClientErrors++
			if r.FirstClientErr == nil {
				r.FirstClientErr = fmt.Errorf("client %d: %w", cl.id, cl.err)
			}
		}
	}
}

// problems lists every failed check; none means exit status 0.
func (r *report) problems() []string {
	var p []string
	if r.HeartbeatingClosed > 0 {
		p = append(p, fmt.Sprintf("%d connections were closed while their client was still sending heartbeats", r.HeartbeatingClosed))
	}
	if r.SilentOpen > 0 {
		p = append(p, fmt.Sprintf("%d of %d silent connections were still open at the end", r.SilentOpen, r.Silent))
	}
	if r.UnknownClosed > 0 {
		p = append(p, fmt.Sprintf("%d connections were closed before their client's first line arrived", r.UnknownClosed))
	}
	if r.ClientErrors > 0 {
		p = append(p, fmt.Sprintf("%d clients could not send a heartbeat (first: %v)", r.ClientErrors, r.FirstClientErr))
	}
	if n := len(r.Lateness); n > 0 && r.Lateness[0] < 0 {
		early := 0
		for _, l := range r.Lateness {
			if l < 0 {
				early++
			}
		}
		p = append(p, fmt.Sprintf("%d connections were closed before their deadline (the earliest by %v)", early, -r.Lateness[0]))
	}
	return p
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 1) of sorted d.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(float64(len(d))*p+0.999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "\nidleconn report (seed %d)\n", r.Seed)
	row := func(name, format string, args ...any) {
		fmt.Fprintf(w, "  %-22s "+format+"\n", append([]any{name}, args...)...)
	}
	if r.Conns < r.Requested {
		row("connections opened", "%d of %d requested, in %v (file descriptor limit)", r.Conns, r.Requested, ms(r.ConnectTime))
	} else {
		row("connections opened", "%d in %v", r.Conns, ms(r.ConnectTime))
	}
	row("heartbeats handled", "%d (%.0f/s)", r.Heartbeats, float64(r.RunHeartbeats)/r.Elapsed.Seconds())
	row("silent clients", "%d: %d closed, %d left open", r.Silent, r.SilentClosed, r.SilentOpen)
	row("heartbeating closed", "%d of %d", r.HeartbeatingClosed, r.Conns-r.Silent)
	if n := len(r.Lateness); n > 0 {
		row("closing lateness", "p50 %v  p99 %v  max %v  (min %v), from each deadline to its close",
			ms(percentile(r.Lateness, 0.50)), ms(percentile(r.Lateness, 0.99)), ms(r.Lateness[n-1]), ms(r.Lateness[0]))
	}
	row("heap per connection", "%.0f B in the timing wheel (the Timeouts entry and its timer); %s for the whole process",
		r.WheelBytesPerConn, bytesIEC(float64(r.PeakHeap)/float64(max(r.Conns, 1))))
	if c := r.CPU; c.Samples > 0 {
		timer := c.Driver + c.Arm
		row("timer CPU", "%v over %v (driver %v, re-arming %v) = %.1f%% of one core, %.1f%% of the process's %v",
			ms(timer), r.Elapsed.Round(10*time.Millisecond), ms(c.Driver), ms(c.Arm),
			100*timer.Seconds()/r.Elapsed.Seconds(), 100*timer.Seconds()/c.Total.Seconds(), ms(c.Total))
		row("", "(%d CPU profile samples at 100 Hz, %d of them in timer code)", c.Samples, c.TimerSamples)
	}
	if p := r.problems(); len(p) > 0 {
		row("result", "FAIL: %d problems", len(p))
	} else {
		row("result", "OK")
	}
}

// ms rounds a duration for display: to 10µs below 10ms, to 1ms above.
func ms(d time.Duration) time.Duration {
	if d < 10*time.Millisecond && d > -10*time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

func bytesIEC(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}
