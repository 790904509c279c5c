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
// which both ran (a round is one value of each, in either order).
func pair(r io.Reader, base, other, metric string) ([]string, map[string][]float64, error) {
	var cases []string
	ratios := map[string][]float64{}
	pending := map[string]map[string]float64{} // case -> impl -> value not yet paired
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		c, impl, v, ok := parse(sc.Text(), metric)
		if !ok || (impl != base && impl != other) {
			continue
		}
		p := pending[c]
		if p == nil {
			p = map[string]float64{}
			pending[c] = p
			if _, seen := ratios[c]; !seen {
				cases = append(cases, c)
				ratios[c] = nil
			}
		}
		p[impl] = v
		if b, ok := p[base]; ok {
			if o, ok := p[other]; ok {
				ratios[c] = append(ratios[c], o/b)
				delete(pending, c)
			}
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
	var parts []string
	for _, el := range strings.Split(fields[0], "/") {
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
			return strings.TrimPrefix(strings.Join(parts, "/"), "Benchmark"), impl, x, true
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
