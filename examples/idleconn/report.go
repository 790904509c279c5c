package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/timingwheel/timingwheel"
)

// report is what a run measured and what it found wrong.
type report struct {
	Mode        string
	Addr        string
	Seed        uint64
	Requested   int // -conns
	Conns       int // the demo's connections actually run (fewer if file descriptors are short)
	Timeout     time.Duration
	ConnectTime time.Duration
	Elapsed     time.Duration
	Interrupted bool // ended by Ctrl-C before -duration

	RunHeartbeats      int64 // lines received during the run, from every client
	Heartbeats         int64 // lines received from the demo's clients, all told
	Silent             int   // demo clients that fell silent
	SilentClosed       int   // ... and were closed for it
	SilentOpen         int   // ... and were still open at the end, though due (a failure)
	SilentNotDue       int   // ... and were open at the end, as not yet due (runs cut short only)
	HeartbeatingClosed int   // demo clients closed while still sending (a failure)
	NotServed          int   // demo clients the server never accepted (a failure)
	EndedEarly         int   // demo connections that ended otherwise before the end (a failure)
	FirstEndedEarly    string
	ClientErrors       int // demo clients whose heartbeat could not be sent (a failure)
	FirstClientErr     error

	Lateness []time.Duration // per idle close of a demo client: seen by its reader minus its deadline, sorted

	// Wheel is the hierarchy's own account, from h.Stats() at the end of
	// the run (before the teardown closes the rest): nil in deadline mode.
	Wheel *timingwheel.Stats

	Outside outsideReport

	HeapPerConn       float64 // heap after GC freed by closing the demo's connections, over them: both ends
	WheelBytesPerConn float64 // wheel mode: the netidle conn wrapper with its Timer
	ProcessCPU        time.Duration
	CPU               cpuReport
}

// outsideReport is about the clients that were not the demo's own. They
// never count toward the result.
type outsideReport struct {
	Conns    int
	Names    []string
	Lines    int64
	TimedOut int
	Left     int // closed by the client
	Errors   int
	Open     int // still open at the end
	Lateness []time.Duration
}

// judge fills in the verdict from the clients (after they stopped) and the
// server's records of its connections, counting only what happened before
// end. byAddr maps a demo client's local address to it; every other
// connection is an outside client's.
func (r *report) judge(clients []*client, byAddr map[string]*client, conns []*sconn, end time.Time, slack time.Duration) {
	type outcome struct {
		end  endKind
		at   time.Time
		late time.Duration
		err  error
	}
	served := make(map[*client]outcome, len(clients))
	r.Lateness = r.Lateness[:0]
	r.Outside = outsideReport{}
	for _, sc := range conns {
		sc.mu.Lock()
		o := outcome{sc.end, sc.at, sc.late, sc.err}
		lines, name := sc.lines, sc.name
		sc.mu.Unlock()
		if o.end != stillOpen && o.at.After(end) {
			o.end = stillOpen // it ended after the run: teardown
		}
		if cl := byAddr[sc.remote]; cl != nil {
			served[cl] = o
			r.Heartbeats += lines
			continue
		}
		out := &r.Outside
		out.Conns++
		out.Lines += lines
		if name != "" {
			out.Names = append(out.Names, name)
		}
		switch o.end {
		case endTimedOut:
			out.TimedOut++
			out.Lateness = append(out.Lateness, o.late)
		case endPeerClosed:
			out.Left++
		case endError:
			out.Errors++
		default:
			out.Open++
		}
	}
	slices.Sort(r.Outside.Lateness)

	for _, cl := range clients {
		o, ok := served[cl]
		if !ok {
			r.NotServed++
			continue
		}
		closed := o.end == endTimedOut
		if closed {
			r.Lateness = append(r.Lateness, o.late)
		}
		due := !cl.lastSent.Add(r.Timeout + slack).After(end) // idle long enough before the end
		switch {
		case cl.silent && closed && o.at.Before(cl.quietAt):
			r.Silent++
			r.HeartbeatingClosed++
		case cl.silent && closed:
			r.Silent++
			r.SilentClosed++
		case cl.silent && due:
			r.Silent++
			r.SilentOpen++
		case cl.silent:
			r.Silent++
			r.SilentNotDue++
		case closed:
			r.HeartbeatingClosed++
		}
		if o.end == endPeerClosed || o.end == endClosed || o.end == endError {
			r.EndedEarly++
			if r.FirstEndedEarly == "" {
				r.FirstEndedEarly = fmt.Sprintf("client %d: %v", cl.id, o.err)
			}
		}
		if cl.err != nil {
			r.ClientErrors++
			if r.FirstClientErr == nil {
				r.FirstClientErr = fmt.Errorf("client %d: %w", cl.id, cl.err)
			}
		}
	}
	slices.Sort(r.Lateness)
}

// problems lists every failed check; none means exit status 0. Only the
// demo's own clients are judged: outside clients never fail a run.
func (r *report) problems() []string {
	var p []string
	if r.HeartbeatingClosed > 0 {
		p = append(p, fmt.Sprintf("%d connections were closed while their client was still sending heartbeats", r.HeartbeatingClosed))
	}
	if r.SilentOpen > 0 {
		p = append(p, fmt.Sprintf("%d of %d silent connections were still open at the end", r.SilentOpen, r.Silent))
	}
	if r.NotServed > 0 {
		p = append(p, fmt.Sprintf("%d connected clients were never accepted by the server", r.NotServed))
	}
	if r.EndedEarly > 0 {
		p = append(p, fmt.Sprintf("%d connections ended for another reason than being idle (first: %s)", r.EndedEarly, r.FirstEndedEarly))
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
	fmt.Fprintf(w, "\nidleconn report, mode %s: %s (seed %d)\n", r.Mode, modeHow[r.Mode], r.Seed)
	row := func(name, format string, args ...any) {
		fmt.Fprintf(w, "  %-22s "+format+"\n", append([]any{name}, args...)...)
	}
	if r.Interrupted {
		row("run", "interrupted after %v", r.Elapsed.Round(100*time.Millisecond))
	}
	if r.Conns > 0 {
		if r.Conns < r.Requested {
			row("connections", "%d of %d requested, in %v (file descriptor limit)", r.Conns, r.Requested, ms(r.ConnectTime))
		} else {
			row("connections", "%d, in %v", r.Conns, ms(r.ConnectTime))
		}
		row("heartbeats", "%.0f/s (%d lines from the demo's clients in all)", float64(r.RunHeartbeats)/r.Elapsed.Seconds(), r.Heartbeats)
		silent := fmt.Sprintf("%d: %d closed, %d left open", r.Silent, r.SilentClosed, r.SilentOpen)
		if r.SilentNotDue > 0 {
			silent += fmt.Sprintf(", %d open but not yet due when the run was cut short", r.SilentNotDue)
		}
		row("silent clients", "%s", silent)
		row("heartbeating closed", "%d of %d", r.HeartbeatingClosed, r.Conns-r.Silent)
		if n := len(r.Lateness); n > 0 {
			row("closing lateness", "p50 %v  p99 %v  max %v  (min %v), from each deadline to its reader seeing the timeout",
				ms(percentile(r.Lateness, 0.50)), ms(percentile(r.Lateness, 0.99)), ms(r.Lateness[n-1]), ms(r.Lateness[0]))
		}
	}
	if st := r.Wheel; st != nil {
		if st.Fired > 0 {
			row("wheel lateness", "p50 %s  p99 %s  max %v, from each timer's due tick to the Advance that ran it (h.Stats)",
				bound(st.LatenessQuantile(0.50)), bound(st.LatenessQuantile(0.99)), ms(st.MaxLateness))
			row("", "closing lateness also counts the rounding up to the tick, the close and the reader's wake-up")
		}
		row("wheel timers", "%d armed at the end; since New: %d started, %d fired, %d stopped (h.Stats)",
			st.Armed, st.Started, st.Fired, st.Stopped)
	}
	if r.ProcessCPU > 0 {
		whose := "user+sys of the whole process"
		if r.Conns > 0 {
			whose += ": both ends of every connection"
		}
		row("process CPU", "%v over %v = %.1f%% of one core (%s)",
			ms(r.ProcessCPU), r.Elapsed.Round(10*time.Millisecond), 100*r.ProcessCPU.Seconds()/r.Elapsed.Seconds(), whose)
	}
	if c := r.CPU; c.Samples > 0 {
		switch r.Mode {
		case modeWheel:
			timer := c.Driver + c.Rearm
			row("timer CPU", "%v = %.1f%% of one core (driver %v, re-arming on Read %v), %d of %d profile samples",
				ms(timer), 100*timer.Seconds()/r.Elapsed.Seconds(), ms(c.Driver), ms(c.Rearm), c.TimerSamples, c.Samples)
		case modeDeadline:
			row("timer CPU", "%v = %.1f%% of one core setting read deadlines, %d of %d profile samples",
				ms(c.Deadline), 100*c.Deadline.Seconds()/r.Elapsed.Seconds(), c.TimerSamples, c.Samples)
			row("", "(not counted: the runtime's timers that fire them, which share code with the clients' own timers)")
		}
	}
	if r.Conns > 0 {
		row("process heap", "%.0f B per connection, both ends of every connection included (live heap after GC; goroutine stacks not counted)",
			r.HeapPerConn)
		switch r.Mode {
		case modeWheel:
			row("", "of which the idle timeout: %.0f B (the netidle conn wrapper with its Timer)", r.WheelBytesPerConn)
		case modeDeadline:
			row("", "of which the idle timeout: 16 B, the deadline's entry in the runtime's timer heap (the timer itself is part of the socket's poll descriptor, off the Go heap)")
		}
	}
	if o := r.Outside; o.Conns > 0 {
		named := ""
		if len(o.Names) > 0 {
			shown := o.Names[:min(len(o.Names), 10)]
			named = fmt.Sprintf(" (named: %s", strings.Join(shown, ", "))
			if len(o.Names) > len(shown) {
				named += ", …"
			}
			named += ")"
		}
		row("outside clients", "%d%s, %s; %d closed idle, %d left, %d still open%s",
			o.Conns, named, plural(o.Lines, "line"), o.TimedOut, o.Left, o.Open, errorsNote(o.Errors))
		if n := len(o.Lateness); n > 0 {
			row("", "closing lateness p50 %v  max %v; outside clients do not count toward the result",
				ms(percentile(o.Lateness, 0.5)), ms(o.Lateness[n-1]))
		} else {
			row("", "outside clients do not count toward the result")
		}
	} else if r.Conns == 0 {
		row("outside clients", "none connected")
	}
	switch p := r.problems(); {
	case len(p) > 0:
		row("result", "FAIL: %d problems", len(p))
	case r.Conns == 0:
		row("result", "OK (no clients of the demo's own to judge)")
	default:
		row("result", "OK")
	}
}

// plural returns "1 line", "2 lines".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func errorsNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d ended with an error", n)
}

// printComparison prints the reports of the same workload run in
// different modes side by side.
func printComparison(w io.Writer, reps []*report) {
	fmt.Fprintf(w, "\nidleconn: the same workload in each mode (seed %d)\n", reps[0].Seed)
	row := func(name string, cell func(r *report) string) {
		fmt.Fprintf(w, "  %-28s", name)
		for _, r := range reps {
			fmt.Fprintf(w, " %16s", cell(r))
		}
		fmt.Fprintln(w)
	}
	row("", func(r *report) string { return r.Mode })
	row("connections", func(r *report) string { return fmt.Sprint(r.Conns) })
	row("heartbeats/s", func(r *report) string {
		return fmt.Sprintf("%.0f", float64(r.RunHeartbeats)/r.Elapsed.Seconds())
	})
	row("silent closed / left open", func(r *report) string { return fmt.Sprintf("%d / %d", r.SilentClosed, r.SilentOpen) })
	row("heartbeating closed", func(r *report) string { return fmt.Sprint(r.HeartbeatingClosed) })
	for _, q := range []struct {
		name string
		p    float64
	}{{"closing lateness p50", 0.5}, {"closing lateness p99", 0.99}, {"closing lateness max", 1}} {
		row(q.name, func(r *report) string {
			if len(r.Lateness) == 0 {
				return "-"
			}
			return ms(percentile(r.Lateness, q.p)).String()
		})
	}
	row("process CPU (% of one core)", func(r *report) string {
		return fmt.Sprintf("%v (%.1f%%)", ms(r.ProcessCPU), 100*r.ProcessCPU.Seconds()/r.Elapsed.Seconds())
	})
	row("process heap per connection", func(r *report) string { return fmt.Sprintf("%.0f B", r.HeapPerConn) })
	row("result", func(r *report) string {
		if len(r.problems()) > 0 {
			return "FAIL"
		}
		return "OK"
	})
}

// bound shows a quantile from [timingwheel.Stats.LatenessQuantile]: an
// upper bound, the bound of its histogram bucket (a power of two
// microseconds, shown exactly) or the largest lateness seen.
func bound(d time.Duration) string {
	for i := range timingwheel.LatenessBuckets {
		if b := timingwheel.LatenessBound(i); d == b {
			return "≤" + d.String()
		} else if b > d {
			break
		}
	}
	return "≤" + ms(d).String()
}

// latenessSince returns cur with the lateness histogram of only the timers
// fired since prev, for quantiles over that interval. Its MaxLateness is
// still cur's, since New: the quantiles stay upper bounds.
func latenessSince(prev, cur timingwheel.Stats) timingwheel.Stats {
	d := cur
	for i := range d.Lateness {
		d.Lateness[i] -= prev.Lateness[i]
	}
	d.Fired -= prev.Fired
	return d
}

// ms rounds a duration for display: to 10µs below 10ms, to 1ms above.
func ms(d time.Duration) time.Duration {
	if d < 10*time.Millisecond && d > -10*time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
