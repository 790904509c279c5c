// Command idle is a gnet server whose connections are closed once idle, by
// gnetwheel: one timingwheel timer per connection, re-armed by OnTraffic on
// the connection's own event loop, and closed on that loop when it fires.
//
//	cd gnet && go run ./examples/idle [-conns N] [-duration D]
//
// It runs the server and its own clients in one process, on 127.0.0.1: by
// default as many clients as the open-file limit allows, up to 10,000
// (each takes two descriptors here). Each client sends a heartbeat line
// about once a second; a fifth of them fall silent at a random moment and
// must be closed -timeout after their last heartbeat. At the end it
// reports how late each close was against its deadline, closes that came
// early, chatty clients that were closed, and the CPU and heap per
// connection, and exits with status 1 on any violation.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	cfg := defaultConfig()
	flag.IntVar(&cfg.Conns, "conns", cfg.Conns, "client `connections`; the default fits the open-file limit, up to 10000")
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long to run once every client is connected")
	flag.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "close a connection after this long without a heartbeat")
	flag.DurationVar(&cfg.Interval, "interval", cfg.Interval, "mean time between heartbeats (jittered by ±20%)")
	flag.Float64Var(&cfg.Silent, "silent", cfg.Silent, "`fraction` of clients that fall silent at a random moment")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "idle: unexpected argument %q (settings are flags; see -help)\n", flag.Arg(0))
		os.Exit(2)
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "idle:", err)
		os.Exit(2)
	}
	cfg.Progress = os.Stdout
	rep, err := run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "idle:", err)
		os.Exit(1)
	}
	rep.print(os.Stdout)
	problems := rep.problems()
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "idle: FAIL:", p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}

// config is what run needs.
type config struct {
	Conns    int
	Duration time.Duration
	Timeout  time.Duration
	Interval time.Duration
	Silent   float64
	Slack    time.Duration // a silent client's last deadline is at least this before the end
	Progress *os.File
}

func defaultConfig() config {
	return config{Conns: 10_000, Duration: 10 * time.Second, Timeout: 3 * time.Second,
		Interval: time.Second, Silent: 0.2, Slack: time.Second}
}

func (c config) validate() error {
	switch {
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
