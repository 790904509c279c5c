package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/internal/demotest"
)

// outsider is an outside client of a test run: it connects once the server
// listens, sends lines, and records how its connection ended.
type outsider struct {
	lines []string      // sent at once
	every time.Duration // then the last line again at this interval, if > 0
	leave bool          // then close the connection itself

	err  chan error // the error its read saw: io.EOF when the server closed it
	stop chan struct{}
}

func newOutsider(every time.Duration, leave bool, lines ...string) *outsider {
	return &outsider{lines: lines, every: every, leave: leave, err: make(chan error, 1), stop: make(chan struct{})}
}

// start connects to addr and runs the client in the background.
func (o *outsider) start(t *testing.T, addr string) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Errorf("outside client: %v", err)
		o.err <- err
		return
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		for _, l := range o.lines {
			fmt.Fprintln(c, l)
		}
		if o.leave {
			c.Close()
			o.err <- io.EOF
			return
		}
		if o.every > 0 {
			tick := time.NewTicker(o.every)
			defer tick.Stop()
			go func() {
				for {
					select {
					case <-o.stop:
						return
					case <-tick.C:
						fmt.Fprintln(c, o.lines[len(o.lines)-1])
					}
				}
			}()
		}
		c.SetReadDeadline(time.Now().Add(20 * time.Second)) // watchdog
		_, err := c.Read(make([]byte, 1))
		o.err <- err
	}()
}

// TestRun runs the demo at small scale and applies the same checks as its
// exit status. The margins are wide on purpose: a heartbeat gap is at most
// 300ms against a 1.5s timeout, and the last silent client's deadline falls
// a full second before the end, so only a real bug fails it, not a slow CI.
// An outside client that says hello and then nothing is timed out too, and
// must not fail the run.
func TestRun(t *testing.T) {
	cfg := defaultConfig()
	cfg.Conns = 200
	cfg.Timeout = 1500 * time.Millisecond
	cfg.Interval = 250 * time.Millisecond
	cfg.Duration = 4 * time.Second
	cfg.Slack = time.Second
	cfg.Seed = 5
	cfg.Progress = t.Output()
	cfg.Notes = t.Output()
	cfg.CPUProfile = true
	hello := newOutsider(0, false, "hello")
	cfg.Listening = func(addr string) { hello.start(t, addr) }

	rep, err := demotest.Within(t, 60*time.Second, "a run of 4s", func() (*report, error) { return run(context.Background(), cfg) })
	if err != nil {
		t.Fatal(err)
	}
	out := demotest.LogReport(t, rep.print, rep.problems())
	if rep.Conns != cfg.Conns {
		t.Errorf("ran %d connections, want %d", rep.Conns, cfg.Conns)
	}
	if want := 40; rep.Silent != want || rep.SilentClosed != want {
		t.Errorf("%d silent clients, %d of them closed; want %d and %d", rep.Silent, rep.SilentClosed, want, want)
	}
	if len(rep.Lateness) != rep.SilentClosed {
		t.Errorf("%d closes recorded, want one per silent client (%d)", len(rep.Lateness), rep.SilentClosed)
	}
	// Every client says hello, then heartbeats for the whole run unless silent.
	if least := int64(cfg.Conns) * 5; rep.Heartbeats < least {
		t.Errorf("server handled %d heartbeats, want at least %d", rep.Heartbeats, least)
	}
	if !(rep.WheelBytesPerConn > 0) {
		t.Errorf("heap per connection for the idle timeout = %v, want > 0", rep.WheelBytesPerConn)
	}
	if o := rep.Outside; o.Conns != 1 || o.TimedOut != 1 || o.Lines != 1 {
		t.Errorf("outside clients: %+v; want the hello client, with 1 line, closed idle", o)
	}
	if err := <-hello.err; err != io.EOF {
		t.Errorf("the outside client's read ended with %v, want io.EOF (closed by the server)", err)
	}
	if !strings.Contains(out, "result                 OK") {
		t.Errorf("the report does not say OK")
	}

	// The hierarchy's own account agrees with the demo's: each idle close
	// was one firing, besides which a conn's timer fires about once per
	// idle period to look at its Reads and is armed again (netidle's one
	// mechanism: a Read only stores the clock), each accepted connection
	// (the outside one too) started a timer, and the heartbeating ones are
	// still armed.
	st := rep.Wheel
	if st == nil {
		t.Fatal("the wheel-mode report has no h.Stats()")
	}
	closes := uint64(rep.SilentClosed + rep.Outside.TimedOut)
	looks := uint64(rep.Conns+rep.Outside.Conns) * (uint64(rep.Elapsed/rep.Timeout) + 2)
	if st.Fired < closes || st.Fired > closes+looks {
		t.Errorf("h.Stats().Fired = %d, want one per idle close (%d) and at most one look per conn per idle period besides (%d)", st.Fired, closes, looks)
	}
	if least := uint64(rep.Conns + rep.Outside.Conns); st.Started < least {
		t.Errorf("h.Stats().Started = %d, want at least one per connection (%d)", st.Started, least)
	}
	if want := rep.Conns - rep.Silent; st.Armed != want {
		t.Errorf("h.Stats().Armed = %d, want one per heartbeating client (%d)", st.Armed, want)
	}
	var counted uint64
	for _, c := range st.Lateness {
		counted += c
	}
	if counted != st.Fired || st.MaxLateness <= 0 {
		t.Errorf("lateness histogram holds %d firings (want %d), max %v (want > 0)", counted, st.Fired, st.MaxLateness)
	}
	for _, want := range []string{"\n  wheel lateness         p50 ≤", "\n  wheel timers           ", "due tick to the Advance"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report does not say %q", want)
		}
	}
}

// TestReport_WheelStats checks the rows printed from h.Stats(), on a
// hierarchy driven by a mock clock so that every number is known: ten
// timers fire 10ms to 19ms late, one is stopped, one stays armed.
func TestReport_WheelStats(t *testing.T) {
	mock := clock.NewMock()
	h := demotest.NewHierarchy(t, timingwheel.WithClock(mock))
	for i := range 10 {
		h.AfterFunc(time.Duration(i+1)*time.Millisecond, func() {})
	}
	h.AfterFunc(time.Hour, func() {}).Stop()
	h.AfterFunc(time.Hour, func() {})
	before := h.Stats()
	mock.Add(20 * time.Millisecond)
	if n := h.Advance(); n != 10 {
		t.Fatalf("Advance ran %d callbacks, want 10", n)
	}
	st := h.Stats()

	rep := &report{Mode: modeWheel, Wheel: &st}
	var out strings.Builder
	rep.print(&out)
	t.Log(out.String())
	for _, want := range []string{
		// The median is in the bucket below 16.384ms; p99 is capped at the max.
		"\n  wheel lateness         p50 ≤16.384ms  p99 ≤19ms  max 19ms, from each timer's due tick to the Advance that ran it (h.Stats)\n",
		"\n                         closing lateness also counts the rounding up to the tick",
		"\n  wheel timers           1 armed at the end; since New: 12 started, 10 fired, 1 stopped (h.Stats)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report does not say %q", want)
		}
	}

	// A progress line's quantile covers only what fired since the last.
	if sec := latenessSince(before, st); sec.Fired != 10 || sec.LatenessQuantile(0.99) != 19*time.Millisecond {
		t.Errorf("since the first snapshot: %d fired, p99 %v; want 10 and 19ms", sec.Fired, sec.LatenessQuantile(0.99))
	}
	if sec := latenessSince(st, st); sec.Fired != 0 || sec.LatenessQuantile(0.99) != 0 {
		t.Errorf("since itself: %d fired, p99 %v; want 0 and 0", sec.Fired, sec.LatenessQuantile(0.99))
	}

	// Deadline mode has no hierarchy, and no such rows.
	out.Reset()
	(&report{Mode: modeDeadline}).print(&out)
	if strings.Contains(out.String(), "wheel") {
		t.Errorf("a deadline-mode report mentions the wheel:\n%s", out.String())
	}
}

func TestBound(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{time.Microsecond, "≤1µs"},
		{1024 * time.Microsecond, "≤1.024ms"},
		{16384 * time.Microsecond, "≤16.384ms"},
		{1234567 * time.Nanosecond, "≤1.23ms"}, // the max, not a bucket's bound
		{19 * time.Millisecond, "≤19ms"},
	} {
		if got := bound(tt.d); got != tt.want {
			t.Errorf("bound(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// TestRun_Deadline runs the same workload on read deadlines instead of the
// wheel.
func TestRun_Deadline(t *testing.T) {
	cfg := defaultConfig()
	cfg.Mode = modeDeadline
	cfg.Conns = 100
	cfg.Timeout = time.Second
	cfg.Interval = 200 * time.Millisecond
	cfg.Duration = 2500 * time.Millisecond
	cfg.Slack = 500 * time.Millisecond
	cfg.Seed = 7
	cfg.Progress = t.Output()
	cfg.Notes = t.Output()

	rep, err := demotest.Within(t, 60*time.Second, "a run of 2.5s", func() (*report, error) { return run(context.Background(), cfg) })
	if err != nil {
		t.Fatal(err)
	}
	out := demotest.LogReport(t, rep.print, rep.problems())
	if want := 20; rep.Silent != want || rep.SilentClosed != want || len(rep.Lateness) != want {
		t.Errorf("%d silent clients, %d closed, %d closes recorded; want %d each", rep.Silent, rep.SilentClosed, len(rep.Lateness), want)
	}
	if !strings.Contains(out, "mode deadline") || !strings.Contains(out, "SetReadDeadline") {
		t.Errorf("the report does not say it ran on read deadlines")
	}
	if rep.Wheel != nil {
		t.Errorf("a deadline-mode run reports h.Stats(): %+v", rep.Wheel)
	}
}

// TestRun_OutsideClientsOnly runs with -conns 0 until interrupted. Outside
// clients are served whatever their lines say: one says hello and falls
// silent, one names itself and heartbeats, one leaves. The run is judged OK.
func TestRun_OutsideClientsOnly(t *testing.T) {
	cfg, err := parseFlags([]string{"-conns", "0", "-timeout", "300ms", "-interval", "100ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Duration != 0 {
		t.Fatalf("-conns 0 runs for %v, want until interrupted (0)", cfg.Duration)
	}
	var notes strings.Builder
	cfg.Notes = &notes
	silent := newOutsider(0, false, "hello")
	named := newOutsider(100*time.Millisecond, false, "id 42", "still here")
	leaving := newOutsider(0, true, "bye")
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Listening = func(addr string) {
		for _, o := range []*outsider{silent, named, leaving} {
			o.start(t, addr)
		}
		time.AfterFunc(time.Second, cancel) // Ctrl-C
	}
	rep, err := run(ctx, cfg)
	close(named.stop)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.print(&out)
	t.Log(notes.String(), out.String())

	if p := rep.problems(); len(p) > 0 {
		t.Errorf("outside clients failed the run: %q", p)
	}
	if !rep.Interrupted {
		t.Error("the report does not say the run was interrupted")
	}
	o := rep.Outside
	if o.Conns != 3 || o.TimedOut != 1 || o.Left != 1 || o.Open != 1 || !slices.Equal(o.Names, []string{"42"}) {
		t.Errorf("outside clients: %+v; want 3: 1 closed idle, 1 left, 1 still open, named [42]", o)
	}
	if err := <-silent.err; err != io.EOF {
		t.Errorf("the silent client's read ended with %v, want io.EOF (closed by the server)", err)
	}
	for _, want := range []string{"nc 127.0.0.1 ", `is "42"`, "closed: idle for 300ms", "left", "result                 OK"} {
		if !strings.Contains(notes.String()+out.String(), want) {
			t.Errorf("the output does not say %q", want)
		}
	}
}

// TestRun_Interrupted cuts a run short: silent clients whose deadline has
// not come yet are not counted as left open.
func TestRun_Interrupted(t *testing.T) {
	cfg := defaultConfig()
	cfg.Conns = 40
	cfg.Silent = 0.5
	cfg.Timeout = time.Second
	cfg.Interval = 200 * time.Millisecond
	cfg.Duration = 10 * time.Second
	cfg.Seed = 3
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Listening = func(string) { time.AfterFunc(500*time.Millisecond, cancel) }
	rep, err := run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Interrupted || rep.Elapsed > 5*time.Second {
		t.Errorf("interrupted %v after %v, want true and well before -duration", rep.Interrupted, rep.Elapsed)
	}
	if p := rep.problems(); len(p) > 0 {
		t.Errorf("a run cut short failed: %q", p)
	}
	if rep.SilentNotDue == 0 {
		t.Errorf("no silent client counted as not yet due: %+v", rep)
	}
}

func TestRun_PortInUse(t *testing.T) {
	ln := demotest.Listen(t)

	cfg := defaultConfig()
	cfg.Addr = ln.Addr().String()
	cfg.Conns = 1
	_, err := run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("run on a busy port: err = %v, want one saying the port is already in use", err)
	}
}

func TestParseFlags(t *testing.T) {
	demotest.CheckParse(t, parseFlags, demotest.FlagCases{
		{nil, ""},
		{[]string{"-conns", "100", "-timeout", "2s", "-silent", "0"}, ""},
		{[]string{"-silent", "1", "-duration", "5s"}, ""},
		{[]string{"-conns", "0"}, ""},
		{[]string{"-conns", "0", "-addr", "127.0.0.1:9123", "-duration", "1m"}, ""},
		{[]string{"-conns", "0", "-duration", "2s"}, ""}, // no silent clients of its own to wait for
		{[]string{"-mode", "deadline"}, ""},
		{[]string{"-mode", "both"}, ""},
		{[]string{"-conns", "-1"}, "-conns must be 0"},
		{[]string{"-mode", "heap"}, "-mode must be wheel, deadline or both"},
		{[]string{"-conns", "0", "-mode", "both"}, "-mode both needs a -duration"},
		{[]string{"-duration", "0s"}, "-duration 0 (run until Ctrl-C) needs -conns 0"},
		{[]string{"-timeout", "-1s"}, "-timeout must be positive"},
		{[]string{"-interval", "0s"}, "-interval must be positive"},
		{[]string{"-interval", "2s"}, "-interval (2s) must be at most half of -timeout (3s)"},
		{[]string{"-silent", "1.5"}, "between 0 and 1"},
		{[]string{"-silent", "-0.1"}, "between 0 and 1"},
		{[]string{"-silent", "NaN"}, "between 0 and 1"},
		{[]string{"-duration", "-10s"}, "-duration must be positive"},
		{[]string{"-duration", "4s"}, "-duration (4s) must be longer than -timeout (3s) plus 1s"},
		{[]string{"-addr", "127.0.0.1"}, "not host:port"},
		{[]string{"-timeout", "soon"}, "invalid value"},
		{[]string{"extra"}, "unexpected argument"},
	})
}

// TestUsage checks that -h states the protocol for outside clients.
func TestUsage(t *testing.T) {
	var out strings.Builder
	if _, err := parseFlags([]string{"-h"}, &out); err == nil {
		t.Fatal("-h returned no error, want flag.ErrHelp")
	}
	for _, want := range []string{"nc 127.0.0.1 PORT", "every line a client sends is a heartbeat", `"id NAME"`, "-mode", "never fail the run"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage does not say %q:\n%s", want, out.String())
		}
	}
}

func TestNameIn(t *testing.T) {
	for _, tt := range []struct{ line, want string }{
		{"42\n", "42"},
		{"id 42\n", "42"},
		{"id alice\r\n", "alice"},
		{"hello\n", ""},
		{"\n", ""},
		{"-3\n", ""},
		{"id \n", ""},
		{"id " + strings.Repeat("x", 40) + "\n", strings.Repeat("x", 32)},
	} {
		if got := nameIn([]byte(tt.line)); got != tt.want {
			t.Errorf("nameIn(%q) = %q, want %q", tt.line, got, tt.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	d := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tt := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 5}, {0.99, 10}, {1, 10}, {0.1, 1}, {0.11, 2}} {
		if got := percentile(d, tt.p); got != tt.want {
			t.Errorf("percentile(1..10, %v) = %v, want %v", tt.p, got, tt.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile(nil, 0.5) = %v, want 0", got)
	}
}

func TestWheelWork(t *testing.T) {
	const lib = libPrefix
	for _, tt := range []struct {
		frames []string // leaf first
		want   bool
	}{
		{[]string{lib + "(*Timer).resetTo", lib + "(*Timer).Reset", lib + "(*idleConn).Read", "bufio.(*Reader).fill"}, true},
		{[]string{"runtime.nanotime", "time.Since", lib + "(*Hierarchy).after", lib + "(*idleConn).Read"}, true},
		{[]string{lib + "(*idleConn).Read", "bufio.(*Reader).fill"}, true}, // the wrapper's own code
		{[]string{"internal/poll.(*FD).Read", "net.(*conn).Read", lib + "(*idleConn).Read"}, false},
		{[]string{"syscall.Syscall", "net.(*conn).Close", lib + "(*idleConn).expire", lib + "(*idleConn).expire-fm", lib + "(*Hierarchy).Advance"}, false},
		{[]string{"runtime.lock2", lib + "(*Hierarchy).Advance", lib + "(*Hierarchy).drive"}, true},
		{[]string{"main.(*server).serve"}, false},
	} {
		if got := wheelWork(tt.frames); got != tt.want {
			t.Errorf("wheelWork(%q) = %v, want %v", tt.frames, got, tt.want)
		}
	}
}

// TestCPUByStack checks the profile decoding behind "timer CPU": CPU spent
// in the timing wheel is attributed to the driver when the goroutine has
// the driver's label and to re-arming otherwise, CPU spent setting read
// deadlines in deadline mode's reader to that, and the rest only to the
// total.
func TestCPUByStack(t *testing.T) {
	m, err := startCPUMeter()
	if err != nil {
		t.Skip("cannot profile here:", err)
	}
	h := demotest.NewHierarchy(t)
	tm := h.AfterFunc(time.Hour, func() {})
	resetFor := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
			for range 1000 {
				tm.Reset(time.Hour)
			}
		}
	}
	pprof.Do(context.Background(), driverLabels, func(context.Context) { resetFor(200 * time.Millisecond) })
	resetFor(200 * time.Millisecond)

	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	dr := &deadlineReader{c: c1, timeout: -time.Second} // already passed: Read returns at once
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
		dr.Read(nil) // net.Pipe's Read is not net.(*conn).Read: all of it counts
	}
	burn := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
		}
	}
	burn(200 * time.Millisecond)
	rep, err := m.stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", rep)
	if raceEnabled {
		t.Skip("with the race detector most samples are in its C code, without a Go stack to attribute")
	}
	if rep.Driver <= 0 || rep.Rearm <= 0 || rep.Deadline <= 0 {
		t.Errorf("driver %v, re-arming %v, deadlines %v: want CPU time in each", rep.Driver, rep.Rearm, rep.Deadline)
	}
	if rep.Total <= rep.Driver+rep.Rearm+rep.Deadline || rep.TimerSamples >= rep.Samples {
		t.Errorf("total %v (%d samples) should exceed the timer work %v (%d samples) by the burn",
			rep.Total, rep.Samples, rep.Driver+rep.Rearm+rep.Deadline, rep.TimerSamples)
	}
}
