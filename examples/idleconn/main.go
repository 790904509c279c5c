// Command idleconn is the job timingwheel exists for: a TCP server that closes
// connections which have been idle for too long, with one timeout per
// connection re-armed on every heartbeat.
//
// It runs the server and its clients in one process, on 127.0.0.1:
//
//	go run ./examples/idleconn
//
// The server keeps every connection in a [timingwheel.Timeouts] keyed by
// net.Conn, driven by the hierarchy's own goroutine ([timingwheel.Hierarchy.Start]).
// Each client sends a heartbeat line about once a second; a fraction of them
// fall silent at a random moment and must be closed -timeout after their last
// heartbeat. After -duration the program reports how late each close was
// against its deadline and what the timers cost, and exits with status 1 if a
// heartbeating client was closed or a silent one was left open.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "idleconn:", err)
		os.Exit(2)
	}
	cfg.Progress = os.Stdout
	cfg.Notes = os.Stdout // in order with the progress lines
	cfg.CPUProfile = true

	rep, err := run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "idleconn:", err)
		os.Exit(1)
	}
	rep.print(os.Stdout)
	if problems := rep.problems(); len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "idleconn: FAIL:", p)
		}
		os.Exit(1)
	}
}

// parseFlags turns command-line arguments into a validated config.
func parseFlags(args []string, errOut io.Writer) (config, error) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("idleconn", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "`host:port` for the server; port 0 picks a free one")
	fs.IntVar(&cfg.Conns, "conns", cfg.Conns, "number of client `connections`")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "close a connection after this long without a heartbeat")
	fs.DurationVar(&cfg.Interval, "interval", cfg.Interval, "mean time between heartbeats (each gap is jittered by ±20%)")
	fs.Float64Var(&cfg.Silent, "silent", cfg.Silent, "`fraction` (0..1) of clients that stop sending at a random moment")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long to run once every client is connected")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed for jitter and for who goes silent when (0: pick one)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: idleconn [flags]\n\n"+
			"Runs a TCP server on 127.0.0.1 that closes idle connections using timingwheel,\n"+
			"plus clients that heartbeat (or fall silent), then reports how it went.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q (all settings are flags; see -help)", fs.Arg(0))
	}
	if err := cfg.validate(); err != nil {
		return config{}, err
	}
	return cfg, nil
}
