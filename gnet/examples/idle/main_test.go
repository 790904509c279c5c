package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestRun_EachImpl is the demo in small: every impl closes the silent
// conns, never before the timeout has passed since the last traffic the
// server got on the conn, and closes a heartbeating one only if the server
// really heard nothing from it for the timeout (heartbeats stalled on a
// loaded machine: logged, not a failure).
func TestRun_EachImpl(t *testing.T) {
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.Impl, cfg.Seed = impl, 42
			cfg.Conns, cfg.Duration, cfg.Timeout, cfg.Interval, cfg.Slack = 100, 1500*time.Millisecond, 600*time.Millisecond, 150*time.Millisecond, 300*time.Millisecond
			cfg.Progress = io.Discard
			if err := cfg.validate(); err != nil {
				t.Fatal(err)
			}
			rep, err := run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Stalled > 0 {
				// Not a failure: the server heard nothing from these for the
				// timeout (their heartbeats stalled on a loaded machine), and
				// no close came early (rep.Early below).
				t.Logf("%s: %d heartbeating conns closed after the server heard nothing from them for %v or more (longest silence %v)",
					impl, rep.Stalled, cfg.Timeout, rep.StalledMaxGap)
			}
			if p := rep.problems(); len(p) > 0 {
				t.Fatalf("%s: %v", impl, p)
			}
			if rep.Silent == 0 || len(rep.Late) != rep.Silent {
				t.Fatalf("%s: %d idle closes for %d silent conns", impl, len(rep.Late), rep.Silent)
			}
			var b strings.Builder
			rep.print(&b)
			printComparison(&b, []*report{rep, rep})
			if !strings.Contains(b.String(), "impl "+impl) {
				t.Fatalf("the report does not name the impl:\n%s", b.String())
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{nil, ""},
		{[]string{"-impl", "scan"}, ""},
		{[]string{"-impl", "afterfunc", "-seed", "7"}, ""},
		{[]string{"-impl", "all"}, ""},
		{[]string{"-impl", "heap"}, "-impl must be wheel, scan, afterfunc or all"},
		{[]string{"-impl", "all", "-report", "x.json"}, "-report takes one impl's report"},
	} {
		cfg, _, err := parseFlags(tc.args, io.Discard)
		if tc.err == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.args, err)
			}
			if len(tc.args) == 0 && cfg.Impl != implWheel {
				t.Errorf("the default impl is %q, want wheel", cfg.Impl)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.err)
		}
	}
}
