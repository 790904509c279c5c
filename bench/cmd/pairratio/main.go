// Command pairratio reads `go test -bench` output in which each benchmark
// runs once per implementation, impl=<base> right before or after
// impl=<other> (as BenchmarkWithTimeout alternates them), and prints, per
// case, the median and range of other's time ÷ base's time over the
// rounds: a ratio taken from two measurements made seconds apart, which
// a noisy machine disturbs much less than it does either time alone.
//
//	pairratio [-base wheel] [-other context] [-metric ns/op] file...
//
// A case is the benchmark's name without its impl=... element. Each
// file's rounds are reported apart, so that two builds can be compared.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

func main() {
	base := flag.String("base", "wheel", "the implementation divided by")
	other := flag.String("other", "context", "the implementation divided")
	metric := flag.String("metric", "ns/op", "the unit whose values are divided (ns/op, cpu-ns/op, ...)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: pairratio [-base impl] [-other impl] [-metric unit] file...")
		os.Exit(2)
	}
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pairratio:", err)
			os.Exit(1)
		}
		cases, ratios, err := pair(f, *base, *other, *metric)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "pairratio: %s: %v\n", name, err)
			os.Exit(1)
		}
		fmt.Printf("%s: %s ÷ %s, %s\n", name, *other, *base, *metric)
		for _, c := range cases {
			r := ratios[c]
			slices.Sort(r)
			fmt.Printf("  %-70s %.2fx  [%.2f–%.2f]  n=%d\n", c, median(r), r[0], r[len(r)-1], len(r))
		}
	}
}

// pair reads benchmark lines from r and returns the cases in the order
// first seen and, per case, other's value ÷ base's for each round in
// which both ran: the k-th value of one is paired with the k-th of the
// other, whether the two alternate (one round at a time) or come in runs
// (-count n runs each sub-benchmark n times in a row).
func pair(r io.Reader, base, other, metric string) ([]string, map[string][]float64, error) {
	var cases []string
	ratios := map[string][]float64{}
	queued := map[string]map[string][]float64{} // case -> impl -> values not yet paired
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		c, impl, v, ok := parse(sc.Text(), metric)
		if !ok || (impl != base && impl != other) {
			continue
		}
		q := queued[c]
		if q == nil {
			q = map[string][]float64{}
			queued[c] = q
			cases = append(cases, c)
		}
		q[impl] = append(q[impl], v)
		if len(q[base]) > 0 && len(q[other]) > 0 {
			ratios[c] = append(ratios[c], q[other][0]/q[base][0])
			q[base], q[other] = q[base][1:], q[other][1:]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	cases = slices.DeleteFunc(cases, func(c string) bool { return len(ratios[c]) == 0 })
	return cases, ratios, nil
}

// parse splits a benchmark result line into its case (the name without
// its impl=... element), the implementation, and the value of metric.
func parse(line, metric string) (c, impl string, v float64, ok bool) {
	fields := strings.Fields(line)
	if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
		return "", "", 0, false
	}
	name, procs := fields[0], ""
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name, procs = name[:i], name[i:] // the GOMAXPROCS suffix
		}
	}
	var parts []string
	for _, el := range strings.Split(name, "/") {
		if s, found := strings.CutPrefix(el, "impl="); found {
			impl = s
			continue
		}
		parts = append(parts, el)
	}
	if impl == "" {
		return "", "", 0, false
	}
	for i := 2; i+1 < len(fields); i += 2 {
		if fields[i+1] == metric {
			x, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return "", "", 0, false
			}
			return strings.TrimPrefix(strings.Join(parts, "/"), "Benchmark") + procs, impl, x, true
		}
	}
	return "", "", 0, false
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
