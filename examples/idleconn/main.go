// Command idleconn is the job timingwheel exists for: a TCP server that closes
// connections which have been idle for too long, with one timeout per
// connection re-armed on every heartbeat.
//
// It runs the server and its own clients in one process, on 127.0.0.1:
//
//	go run ./examples/idleconn
//
// The server listens through [netidle.Listener], so every
// connection it accepts is closed by the hierarchy's driver goroutine once
// it has sent nothing for -timeout; its reader just reads lines and sees a
// read timeout when that happens. With -mode deadline the same server
// instead calls SetReadDeadline before every Read, and -mode both runs one
// after the other for a side-by-side comparison.
//
// Each client sends a heartbeat line about once a second; a fraction of
// them fall silent at a random moment and must be closed -timeout after
// their last heartbeat. After -duration the program reports how late each
// close was against its deadline and what the timeouts cost, and exits with
// status 1 if a heartbeating client was closed or a silent one was left
// open.
//
// Outside clients may connect too (nc 127.0.0.1 PORT): every line is a
// heartbeat, and a line "id NAME" or a bare number names the client in the
// report. They are reported apart and never fail the run. With -conns 0
// the server serves outside clients only, until Ctrl-C (or -duration).
package main

import (
	"context"
	"flag"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/timingwheel/timingwheel/internal/demo"
)

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	demo.ExitOnFlagError("idleconn", err)
	cfg.Progress = os.Stdout
	cfg.Notes = os.Stdout // in order with the progress lines
	cfg.CPUProfile = true

	// Ctrl-C ends the run early, with a report; a second one ends the
	// program at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { <-ctx.Done(); stop() }()

	modes := []string{cfg.Mode}
	if cfg.Mode == modeBoth {
		modes = []string{modeWheel, modeDeadline}
	}
	cfg.Seed = demo.PickSeed(cfg.Seed) // one workload for every mode
	var reps []*report
	failed := false
	for _, mode := range modes {
		c := cfg
		c.Mode = mode
		rep, err := run(ctx, c)
		demo.ExitOnError("idleconn", err)
		rep.print(os.Stdout)
		if demo.PrintProblems("idleconn: FAIL (mode "+mode+"):", rep.problems()) {
			failed = true
		}
		reps = append(reps, rep)
		if rep.Interrupted {
			break
		}
	}
	if len(reps) > 1 {
		printComparison(os.Stdout, reps)
	}
	if failed {
		os.Exit(1)
	}
}

// parseFlags turns command-line arguments into a validated config.
// usage is what -help says before the flags.
const usage = `Runs a TCP server on 127.0.0.1 that closes connections idle for -timeout, plus
-conns clients of its own that send heartbeats (a -silent fraction of them fall
silent), then reports how it went and what it cost. Ctrl-C ends the run early,
with the report.

Outside clients may connect as well, for example with
    nc 127.0.0.1 PORT        (PORT as printed, or fixed with -addr 127.0.0.1:9123)
Protocol: every line a client sends is a heartbeat and pushes its timeout back.
A line "id NAME" (or a bare number) names the client in the report; any other
line is an anonymous heartbeat. A client silent for -timeout is closed. Outside
clients are reported apart and never fail the run: only the demo's own clients
decide the result (exit status 1 if one that was heartbeating was closed, or
one that fell silent was left open). With -conns 0 the server serves outside
clients only, until Ctrl-C or -duration.`

func parseFlags(args []string, errOut io.Writer) (config, error) {
	cfg := defaultConfig()
	fs := demo.NewFlagSet("idleconn", errOut, usage)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "`host:port` for the server; port 0 picks a free one")
	fs.StringVar(&cfg.Mode, "mode", cfg.Mode, "how the server keeps its idle timeouts: `wheel` (netidle.Listener), "+
		"deadline (SetReadDeadline before every Read), or both, one after the other, compared")
	fs.IntVar(&cfg.Conns, "conns", cfg.Conns, "number of the demo's own client `connections`; 0 serves outside clients only")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "close a connection after this long without a heartbeat")
	fs.DurationVar(&cfg.Interval, "interval", cfg.Interval, "mean time between heartbeats (each gap is jittered by ±20%)")
	fs.Float64Var(&cfg.Silent, "silent", cfg.Silent, "`fraction` (0..1) of clients that stop sending at a random moment")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long to run once every client is connected "+
		"(with -conns 0 the default is 0: until Ctrl-C)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed for jitter and for who goes silent when (0: pick one)")
	if err := demo.ParseFlags(fs, args); err != nil {
		return config{}, err
	}
	durationSet := false
	fs.Visit(func(f *flag.Flag) { durationSet = durationSet || f.Name == "duration" })
	if cfg.Conns == 0 && !durationSet {
		cfg.Duration = 0 // outside clients only: until Ctrl-C
	}
	if err := cfg.validate(); err != nil {
		return config{}, err
	}
	return cfg, nil
}
