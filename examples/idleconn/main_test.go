package main

import (
	"context"
	"io"
	"net"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

// TestRun runs the demo at small scale and applies the same checks as its
// exit status. The margins are wide on purpose: a heartbeat gap is at most
// 300ms against a 1.5s timeout, and the last silent client's deadline falls
// a full second before the end, so only a real bug fails it, not a slow CI.
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

	rep, err := run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.print(&out)
	t.Log(out.String())

	for _, p := range rep.problems() {
		t.Error(p)
	}
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
		t.Errorf("heap per connection in the wheel = %v, want > 0", rep.WheelBytesPerConn)
	}
}

func TestRun_PortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	cfg := defaultConfig()
	cfg.Addr = ln.Addr().String()
	cfg.Conns = 1
	_, err = run(cfg)
	if err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("run on a busy port: err = %v, want one saying the port is already in use", err)
	}
}

func TestParseFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string // in the error; "" for none
	}{
		{nil, ""},
		{[]string{"-conns", "100", "-timeout", "2s", "-silent", "0"}, ""},
		{[]string{"-silent", "1", "-duration", "5s"}, ""},
		{[]string{"-conns", "0"}, "-conns must be at least 1"},
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
	} {
		_, err := parseFlags(tt.args, io.Discard)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("parseFlags(%q) = %v, want no error", tt.args, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("parseFlags(%q) = %v, want an error containing %q", tt.args, err, tt.want)
		}
	}
}

func TestConnsThatFit(t *testing.T) {
	for _, tt := range []struct {
		limit uint64
		want  int
	}{
		{0, 0},
		{fdReserve, 0},
		{fdReserve + 1, 0},
		{fdReserve + 2, 1},
		{20_000, (20_000 - fdReserve) / 2},
		{fdsNeeded(10_000), 10_000},
		{1 << 62, 1 << 30},
	} {
		if got := connsThatFit(tt.limit); got != tt.want {
			t.Errorf("connsThatFit(%d) = %d, want %d", tt.limit, got, tt.want)
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

// TestCPUByLabel checks the profile decoding behind "timer CPU": CPU burnt
// under each label must be attributed to it, and the rest counted only in
// the total.
func TestCPUByLabel(t *testing.T) {
	m, err := startCPUMeter()
	if err != nil {
		t.Skip("cannot profile here:", err)
	}
	burn := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
		}
	}
	pprof.Do(context.Background(), pprof.Labels("timer", "driver"), func(context.Context) { burn(300 * time.Millisecond) })
	pprof.Do(context.Background(), pprof.Labels("timer", "arm"), func(context.Context) { burn(300 * time.Millisecond) })
	pprof.Do(context.Background(), pprof.Labels("other", "x"), func(context.Context) { burn(300 * time.Millisecond) })
	rep, err := m.stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", rep)
	if rep.Driver <= 0 || rep.Arm <= 0 {
		t.Errorf("driver %v, arm %v: want CPU time under both labels", rep.Driver, rep.Arm)
	}
	if rep.Total <= rep.Driver+rep.Arm || rep.TimerSamples >= rep.Samples {
		t.Errorf("total %v (%d samples) should exceed the labelled %v (%d samples) by the unlabelled work",
			rep.Total, rep.Samples, rep.Driver+rep.Arm, rep.TimerSamples)
	}
}
