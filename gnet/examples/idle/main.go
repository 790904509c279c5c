// Command idle is a gnet server whose connections are closed once idle, by
// gnetwheel: OnTraffic records the clock in the connection's Idle, on its
// own event loop; the Idles wait in buckets of their loop, each bucket with
// one timingwheel timer for the conns whose deadlines fall in its span, and
// a bucket that fires closes its idle conns on that loop.
//
//	cd gnet && go run ./examples/idle [-conns N] [-duration D] [-impl wheel|scan|afterfunc|all] [-seed S]
//
// It runs the server and its own clients in one process, on 127.0.0.1: by
// default as many clients as the open-file limit allows, up to 10,000
// (each takes two descriptors here). Each client sends a heartbeat line
// about once a second; a fifth of them fall silent at a random moment and
// must be closed -timeout after their last heartbeat. At the end it
// reports how late each close was against its deadline, closes that came
// early, chatty clients that were closed, and the CPU and heap per
// connection, and exits with status 1 on any violation.
//
// -impl picks how the server keeps its idle timeouts: wheel (the default,
// gnetwheel), or one of the two things gnet users write without it: scan
// (each conn's last-activity time in c.Context(), and gnet's OnTick
// scanning every conn every 4 ms, closing on the conn's loop those idle
// for the timeout) or afterfunc (a time.AfterFunc per conn, Reset by
// OnTraffic, whose firing hops onto the loop with Execute to close the
// conn if it really is idle). -impl all runs the three one after the
// other, each in a fresh process, on the same workload (-seed), and prints
// them side by side.
package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/timingwheel/timingwheel/internal/demo"
)

func main() {
	cfg, reportTo, err := parseFlags(os.Args[1:], os.Stderr)
	demo.ExitOnFlagError("idle", err)
	cfg.Seed = demo.PickSeed(cfg.Seed) // one workload for every impl
	if cfg.Impl == implAll {
		os.Exit(runAll(cfg))
	}
	cfg.Progress = os.Stdout
	rep, err := run(cfg)
	demo.ExitOnError("idle", err)
	rep.print(os.Stdout)
	if reportTo != "" {
		demo.ExitOnError("idle", demo.WriteReport(reportTo, rep))
	}
	if demo.PrintProblems("idle: FAIL (impl "+rep.Impl+"):", rep.problems()) {
		os.Exit(1)
	}
}

// parseFlags turns command-line arguments into a validated config, and the
// file to write the report to as JSON (-report, which -impl all uses).
func parseFlags(args []string, errOut io.Writer) (config, string, error) {
	cfg := defaultConfig()
	var reportTo string
	fs := demo.NewFlagSet("idle", errOut, "")
	fs.IntVar(&cfg.Conns, "conns", cfg.Conns, "client `connections`; the default fits the open-file limit, up to 10000")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long to run once every client is connected")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "close a connection after this long without a heartbeat")
	fs.DurationVar(&cfg.Interval, "interval", cfg.Interval, "mean time between heartbeats (jittered by ±20%)")
	fs.Float64Var(&cfg.Silent, "silent", cfg.Silent, "`fraction` of clients that fall silent at a random moment")
	fs.StringVar(&cfg.Impl, "impl", cfg.Impl, "how the server keeps idle timeouts: `wheel` (gnetwheel), scan (OnTick every 4 ms "+
		"scans every conn's last activity), afterfunc (a time.AfterFunc per conn), or all: the three in turn, compared")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed for who falls silent when and for the jitter (0: pick one)")
	fs.StringVar(&reportTo, "report", "", "also write the report as JSON to this `file` (-impl all uses it)")
	if err := demo.ParseFlags(fs, args); err != nil {
		return config{}, "", err
	}
	if err := cfg.validate(); err != nil {
		return config{}, "", err
	}
	if reportTo != "" && cfg.Impl == implAll {
		return config{}, "", fmt.Errorf("-report takes one impl's report; -impl all prints the comparison")
	}
	return cfg, reportTo, nil
}

// config is what run needs.
type config struct {
	Conns    int
	Duration time.Duration
	Timeout  time.Duration
	Interval time.Duration
	Silent   float64
	Impl     string        // implWheel, implScan or implAfterFunc (main runs implAll as one process each)
	Seed     uint64        // 0: main picks one
	Slack    time.Duration // a silent client's last deadline is at least this before the end
	Progress io.Writer
}

func defaultConfig() config {
	return config{Conns: 10_000, Duration: 10 * time.Second, Timeout: 3 * time.Second,
		Interval: time.Second, Silent: 0.2, Impl: implWheel, Slack: time.Second}
}

func (c config) validate() error {
	switch {
	case c.Impl != implAll && !slices.Contains(impls, c.Impl):
		return fmt.Errorf("-impl must be wheel, scan, afterfunc or all, got %q", c.Impl)
	case c.Conns < 1:
		return fmt.Errorf("-conns must be at least 1, got %d", c.Conns)
	case c.Timeout <= 0 || c.Interval <= 0:
		return fmt.Errorf("-timeout and -interval must be positive")
	case c.Interval > c.Timeout/2:
		return fmt.Errorf("-interval (%v) must be at most half of -timeout (%v), or heartbeating clients could be closed", c.Interval, c.Timeout)
	case c.Silent < 0 || c.Silent > 1:
		return fmt.Errorf("-silent must be between 0 and 1, got %v", c.Silent)
	case c.Silent > 0 && c.Duration <= c.Timeout+c.Slack:
		return fmt.Errorf("-duration (%v) must be longer than -timeout (%v) plus %v, so silent clients are seen closed", c.Duration, c.Timeout, c.Slack)
	}
	return nil
}
