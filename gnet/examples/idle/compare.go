package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/timingwheel/timingwheel/internal/demo"
)

// runAll runs each impl in a fresh process of this program, one after the
// other, on the same workload (cfg.Seed), then prints them side by side. A
// fresh process each keeps one impl's heap, goroutines and CPU out of the
// next one's numbers. It returns the exit status: 1 if any run failed.
func runAll(cfg config) int {
	status := 0
	var reps []*report
	for i, impl := range impls {
		if i > 0 {
			fmt.Println()
		}
		rep := new(report)
		ran, err := demo.RunSelf(childArgs(cfg, impl), "-report", rep)
		if ran != nil {
			fmt.Fprintf(os.Stderr, "idle: impl %s: %v\n", impl, ran)
			status = 1
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "idle: impl %s: %v\n", impl, err)
			status = 1
			continue
		}
		if len(rep.problems()) > 0 {
			status = 1
		}
		reps = append(reps, rep)
	}
	if len(reps) > 0 {
		printComparison(os.Stdout, reps)
	}
	if status != 0 {
		fmt.Fprintln(os.Stderr, "idle: FAIL: see above")
	}
	return status
}

// childArgs are the flags of one impl's run, with everything else as cfg
// has it (RunSelf adds -report).
func childArgs(cfg config, impl string) []string {
	return []string{
		"-impl", impl,
		"-seed", strconv.FormatUint(cfg.Seed, 10),
		"-conns", strconv.Itoa(cfg.Conns),
		"-duration", cfg.Duration.String(),
		"-timeout", cfg.Timeout.String(),
		"-interval", cfg.Interval.String(),
		"-silent", strconv.FormatFloat(cfg.Silent, 'g', -1, 64),
	}
}

// printComparison prints the impls' reports side by side, one column each.
func printComparison(w io.Writer, reps []*report) {
	r0 := reps[0]
	fmt.Fprintf(w, "\ncomparison, seed %d: %d connections (%d fall silent), timeout %v, heartbeats every %v±20%%, each impl in a fresh process\n",
		r0.Seed, r0.Conns, r0.Silent, r0.Timeout, r0.Interval)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, f func(r *report) string) {
		fmt.Fprintf(tw, "%-36s\t", name) // padded: left-aligned in a right-aligned table
		for _, r := range reps {
			fmt.Fprintf(tw, "%s\t", f(r))
		}
		fmt.Fprintln(tw)
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
	row("impl", func(r *report) string { return r.Impl })
	row("conns", func(r *report) string { return strconv.Itoa(r.Conns) })
	row("idle closes", func(r *report) string { return strconv.Itoa(len(r.Late)) })
	row("lateness p50", func(r *report) string { return ms(demo.Quantile(r.Late, 0.5)) })
	row("lateness p99", func(r *report) string { return ms(demo.Quantile(r.Late, 0.99)) })
	row("lateness max", func(r *report) string { return ms(demo.Quantile(r.Late, 1)) })
	row("early closes (must be 0)", func(r *report) string { return strconv.Itoa(r.Early) })
	row("chatty closed, not idle (must be 0)", func(r *report) string { return strconv.Itoa(r.ChattyClosed) })
	row("chatty closed after a stall (right)", func(r *report) string { return strconv.Itoa(r.Stalled) })
	row("silent conns left open (must be 0)", func(r *report) string { return strconv.Itoa(r.SilentOpen) })
	row("process CPU per second", func(r *report) string {
		return fmt.Sprintf("%.0f ms/s", r.CPU.Seconds()/r.Elapsed.Seconds()*1000)
	})
	row("  per conn per second", func(r *report) string {
		return fmt.Sprintf("%.1f µs", float64(r.CPU.Microseconds())/float64(r.Conns)/r.Elapsed.Seconds())
	})
	row("heap per conn (both ends)", func(r *report) string { return fmt.Sprintf("%.0f B", r.HeapPerConn) })
	row("allocs per traffic event", func(r *report) string { return fmt.Sprintf("%.0f", r.TrafficAllocs) })
	tw.Flush()
}
