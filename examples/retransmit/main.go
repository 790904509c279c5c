// Command retransmit moves packets reliably over a lossy link: a sender and
// a receiver talk UDP on 127.0.0.1, the receiver drops a fraction of what it
// gets, and every packet in flight has a retransmission timer in a
// timingwheel hierarchy.
//
//	go run ./examples/retransmit
//
// The timers follow RFC 6298: the RTO comes from smoothed RTT samples
// (SRTT, RTTVAR) with a floor of -min-rto, doubles with each retransmission,
// and is re-armed from inside the timer's own callback ([timingwheel.Timer.Reset]);
// an ack stops it ([timingwheel.Timer.Stop]). Each timer is held by value in
// its packet's record and bound once ([timingwheel.Timer.Init]) before it is
// first armed, so its callback can use it with no lock of its own; records
// are reused for later packets, so in steady state the timers allocate
// nothing, which the report shows per packet sent.
//
// The receiver hands packets to the application in order, and the
// application checks each one. The program exits with status 1 if any
// packet was lost, duplicated, reordered or corrupted on the way to the
// application.
package main

import (
	"io"
	"os"

	"github.com/timingwheel/timingwheel/internal/demo"
)

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	demo.ExitOnFlagError("retransmit", err)
	cfg.Progress = os.Stdout

	rep, err := run(cfg)
	demo.ExitOnError("retransmit", err)
	rep.print(os.Stdout)
	if demo.PrintProblems("retransmit: FAIL:", rep.problems()) {
		os.Exit(1)
	}
}

// usage is what -help says before the flags.
const usage = "Transfers packets over UDP on 127.0.0.1 through a receiver that drops some,\n" +
	"retransmitting on timers from timingwheel, then reports how it went."

// parseFlags turns command-line arguments into a validated config.
func parseFlags(args []string, errOut io.Writer) (config, error) {
	cfg := defaultConfig()
	fs := demo.NewFlagSet("retransmit", errOut, usage)
	fs.IntVar(&cfg.Packets, "packets", cfg.Packets, "number of packets to transfer")
	fs.IntVar(&cfg.Size, "size", cfg.Size, "payload `bytes` per packet")
	fs.IntVar(&cfg.Window, "window", cfg.Window, "most `packets` in flight (sent, not yet acked)")
	fs.Float64Var(&cfg.Loss, "loss", cfg.Loss, "`fraction` (0 up to 1) of data datagrams the receiver drops")
	fs.DurationVar(&cfg.MinRTO, "min-rto", cfg.MinRTO, "floor of the retransmission timeout (RFC 6298 says 1s; loopback needs far less)")
	fs.DurationVar(&cfg.InitialRTO, "initial-rto", cfg.InitialRTO, "retransmission timeout before the first RTT sample")
	fs.DurationVar(&cfg.MaxRTO, "max-rto", cfg.MaxRTO, "ceiling of the retransmission timeout, backoff included")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed for which datagrams are dropped (0: pick one)")
	if err := demo.ParseFlags(fs, args); err != nil {
		return config{}, err
	}
	if err := cfg.validate(); err != nil {
		return config{}, err
	}
	return cfg, nil
}
