package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel/internal/demotest"
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
			// run waits up to 10s for the opens and 5s for the silent
			// clients' closes on a loaded machine.
			rep, err := demotest.Within(t, 60*time.Second, "a run of 1.5s", func() (*report, error) { return run(cfg) })
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
	demotest.CheckFlags(t, func(args []string) error {
		_, _, err := parseFlags(args, io.Discard)
		return err
	}, demotest.FlagCases{
		{nil, ""},
		{[]string{"-impl", "scan"}, ""},
		{[]string{"-impl", "afterfunc", "-seed", "7"}, ""},
		{[]string{"-impl", "all"}, ""},
		{[]string{"-impl", "heap"}, "-impl must be wheel, scan, afterfunc or all"},
		{[]string{"-impl", "all", "-report", "x.json"}, "-report takes one impl's report"},
		{[]string{"extra"}, "unexpected argument"},
	})
	if cfg, _, _ := parseFlags(nil, io.Discard); cfg.Impl != implWheel {
		t.Errorf("the default impl is %q, want wheel", cfg.Impl)
	}
}
