// Command pinger is a server that pings the peers it has not written to for
// a while, as WebSocket and HTTP/2 servers do, and closes the peers that
// have sent nothing for longer: built on timingwheel's idle events, and
// built the usual way, side by side.
//
//	go run ./examples/pinger
//
// It runs the server and its own clients in one process, on 127.0.0.1.
// Each client sends a heartbeat line about every -interval; a -silent
// fraction fall silent at a random moment and must be closed -timeout
// after their last heartbeat. The server writes rarely: a message to each
// conn about every -msg. A conn the server has written nothing to for
// -ping gets a ping.
//
// With -mode wheel every accepted conn is wrapped by
// [netidle.Conn] with [netidle.OnWriteIdle]: the
// hierarchy's driver closes the idle conns and decides the pings, and hands
// each ping's Write to a goroutine started for it, so that it never waits
// on a full socket (a peer that reads nothing would hold up every other
// conn's ping and close); the server has one reader goroutine per conn and
// no writer. With -mode ticker the same
// server is built the usual way (gorilla/websocket's chat example): a
// writer goroutine per conn selects on its message queue and on a
// time.Ticker for the ping (restarted after every write, so that it pings
// only a conn it has not written to), and the reader calls SetReadDeadline
// before every Read. -mode both (the default) runs each in a fresh process
// of its own, so that one's memory does not colour the other's, and
// compares them: pings, closes, lateness, CPU, memory per conn.
//
// The program exits with status 1 if a ping came before -ping of write
// silence, a conn was closed before -timeout of read silence (measured on
// the server's side, from the last Read of its socket that returned data),
// or a silent client was left open. A heartbeating client closed because
// the server read nothing from it for -timeout is reported, not a failure:
// its heartbeats did not reach the server in time, the machine did not
// keep up.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/timingwheel/timingwheel/internal/demo"
)

func main() {
	cfg, jsonOut, err := parseFlags(os.Args[1:], os.Stderr)
	demo.ExitOnFlagError("pinger", err)
	cfg.Seed = demo.PickSeed(cfg.Seed) // one workload for both modes
	cfg.Progress = os.Stdout
	if cfg.Mode != modeBoth {
		rep, err := run(cfg)
		demo.ExitOnError("pinger", err)
		rep.print(os.Stdout)
		if jsonOut != "" {
			demo.ExitOnError("pinger", demo.WriteReport(jsonOut, rep))
		}
		if demo.PrintProblems("pinger: FAIL (mode "+rep.Mode+"):", rep.problems()) {
			os.Exit(1)
		}
		return
	}
	var reps []*report
	failed := false
	for _, mode := range []string{modeWheel, modeTicker} {
		rep, err := runChild(cfg, mode)
		if err != nil {
			fmt.Fprintf(os.Stderr, "pinger: mode %s: %v\n", mode, err)
			failed = true
			continue
		}
		reps = append(reps, rep)
	}
	if len(reps) == 2 {
		printComparison(os.Stdout, reps[0], reps[1])
	}
	if failed {
		os.Exit(1)
	}
}

// runChild runs one mode in a fresh process of this program, its output
// passed through, and returns its report.
func runChild(cfg config, mode string) (*report, error) {
	rep := new(report)
	ran, err := demo.RunSelf([]string{"-mode", mode, "-conns", fmt.Sprint(cfg.Conns), "-ping", cfg.Ping.String(),
		"-timeout", cfg.Timeout.String(), "-interval", cfg.Interval.String(), "-msg", cfg.Msg.String(),
		"-silent", fmt.Sprint(cfg.Silent), "-duration", cfg.Duration.String(), "-seed", fmt.Sprint(cfg.Seed)}, "-json", rep)
	if err != nil {
		return nil, fmt.Errorf("%v (the run: %v)", err, ran)
	}
	if ran != nil {
		return rep, fmt.Errorf("failed: %v", ran)
	}
	return rep, nil
}

func parseFlags(args []string, errOut io.Writer) (cfg config, jsonOut string, err error) {
	cfg = defaultConfig()
	fs := demo.NewFlagSet("pinger", errOut, "")
	fs.StringVar(&cfg.Mode, "mode", cfg.Mode, "`wheel` (idle events of timingwheel), ticker (a Ticker and a writer goroutine per conn), or both, compared")
	fs.IntVar(&cfg.Conns, "conns", cfg.Conns, "client `connections` (fewer if the open file limit does not allow as many: each takes two here)")
	fs.DurationVar(&cfg.Ping, "ping", cfg.Ping, "ping a conn the server has written nothing to for this long")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "close a conn that has sent nothing for this long")
	fs.DurationVar(&cfg.Interval, "interval", cfg.Interval, "mean gap between a client's heartbeats (jittered by ±20%)")
	fs.DurationVar(&cfg.Msg, "msg", cfg.Msg, "mean gap between the server's own messages to a conn")
	fs.Float64Var(&cfg.Silent, "silent", cfg.Silent, "`fraction` (0..1) of clients that fall silent at a random moment")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long each mode runs once its clients are connected")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed (0: pick one)")
	fs.StringVar(&jsonOut, "json", "", "also write the report to this `file`, as JSON (for -mode both's child processes)")
	if err := demo.ParseFlags(fs, args); err != nil {
		return cfg, "", err
	}
	return cfg, jsonOut, cfg.validate()
}

func us(v []int, i int) string {
	if len(v) <= i {
		return "-"
	}
	return fmt.Sprintf("%.1fms", float64(v[i])/1000)
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "pinger: mode %s, %d conns, %v: pings sent %d (received %d), messages %d, idle closes %d of %d silent; CPU %v\n",
		r.Mode, r.Conns, r.Elapsed.Round(1e6), r.PingsSent, r.PingsReceived, r.Msgs, r.Closes, r.Silent, r.CPU.Round(1e6))
	fmt.Fprintf(w, "pinger: ping lateness p50 %s p99 %s max %s; close lateness p50 %s p99 %s max %s; early: %d pings, %d closes\n",
		us(r.PingLate, 0), us(r.PingLate, 1), us(r.PingLate, 2), us(r.CloseLate, 0), us(r.CloseLate, 1), us(r.CloseLate, 2),
		r.PingEarly, r.CloseEarly)
	if r.LagCloses > 0 {
		fmt.Fprintf(w, "pinger: %d heartbeating clients closed, each after the server had read nothing from it for -timeout (%d heartbeats read in all): the machine did not keep up\n", r.LagCloses, r.HeartbeatsRead)
	}
	fmt.Fprintf(w, "pinger: per conn, whole process (clients included): heap %.0f B, stacks %.0f B, %.2f goroutines\n\n",
		r.HeapPerConn, r.StackPerConn, r.GoroutinesPerConn)
}

func printComparison(w io.Writer, a, b *report) {
	row := func(name, x, y string) { fmt.Fprintf(w, "%-36s %22s %22s\n", name, x, y) }
	fmt.Fprintln(w, "pinger: side by side (same workload and seed, each mode in a fresh process)")
	row("", a.Mode, b.Mode)
	row("conns", fmt.Sprint(a.Conns), fmt.Sprint(b.Conns))
	row("pings sent / received", fmt.Sprintf("%d / %d", a.PingsSent, a.PingsReceived), fmt.Sprintf("%d / %d", b.PingsSent, b.PingsReceived))
	row("server messages", fmt.Sprint(a.Msgs), fmt.Sprint(b.Msgs))
	row("idle closes / silent clients", fmt.Sprintf("%d / %d", a.Closes, a.Silent), fmt.Sprintf("%d / %d", b.Closes, b.Silent))
	row("ping lateness p50 / p99 / max", strings.Join([]string{us(a.PingLate, 0), us(a.PingLate, 1), us(a.PingLate, 2)}, " / "),
		strings.Join([]string{us(b.PingLate, 0), us(b.PingLate, 1), us(b.PingLate, 2)}, " / "))
	row("close lateness p50 / p99 / max", strings.Join([]string{us(a.CloseLate, 0), us(a.CloseLate, 1), us(a.CloseLate, 2)}, " / "),
		strings.Join([]string{us(b.CloseLate, 0), us(b.CloseLate, 1), us(b.CloseLate, 2)}, " / "))
	row("early pings / closes", fmt.Sprintf("%d / %d", a.PingEarly, a.CloseEarly), fmt.Sprintf("%d / %d", b.PingEarly, b.CloseEarly))
	row("heartbeaters closed / left open", fmt.Sprintf("%d / %d", a.LagCloses, a.LeftOpen), fmt.Sprintf("%d / %d", b.LagCloses, b.LeftOpen))
	row("process CPU over the run", a.CPU.Round(1e6).String(), b.CPU.Round(1e6).String())
	row("heap per conn (clients included)", fmt.Sprintf("%.0f B", a.HeapPerConn), fmt.Sprintf("%.0f B", b.HeapPerConn))
	row("stacks per conn (clients included)", fmt.Sprintf("%.0f B", a.StackPerConn), fmt.Sprintf("%.0f B", b.StackPerConn))
	row("goroutines per conn", fmt.Sprintf("%.2f", a.GoroutinesPerConn), fmt.Sprintf("%.2f", b.GoroutinesPerConn))
	row("heap + stacks per conn", fmt.Sprintf("%.0f B", a.HeapPerConn+a.StackPerConn), fmt.Sprintf("%.0f B", b.HeapPerConn+b.StackPerConn))
}
