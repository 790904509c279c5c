package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
	"golang.org/x/perf/benchunit"
)

// Reading go test -bench output (benchfmt) and its statistics (benchmath),
// as benchstat reads and computes them.

// confidence is the level of every confidence interval, and
// benchmath.DefaultThresholds's α=0.05 that of every comparison: both
// benchstat's defaults.
const confidence = 0.95

// A ref names the values of one metric of one benchmark at one GOMAXPROCS:
// the full benchmark name as benchfmt gives it, without "Benchmark" and
// without its -N suffix ("Churn/impl=wheel/live=1000"); the GOMAXPROCS ("1"
// when go test printed no suffix); and the unit as benchfmt tidies it
// ("sec/op" for ns/op, "cpu-sec/op" for cpu-ns/op, "B/op", "B/timer", ...).
type ref struct{ name, procs, unit string }

// results is one results file.
type results struct {
	values map[ref][]float64 // in the order read
	order  []ref             // first-seen order
	units  benchfmt.UnitMetadataMap
	config map[string]string // goos, cpu, ... as go test printed them
	meta   meta              // the run's "# key: value" lines

	wakeups []wakeup
	skipped []string // why a benchmark size did not run, one per distinct reason
	logs    []string // what benchmarks logged (b.Logf): "name: message"
	errs    []string // lines benchfmt could not read
	rawRel  string   // the results file, relative to the repository root
	head    string   // its first line, if a "#" comment
}

type wakeup struct {
	impl, scenario, window, wakeups, calls, note string
}

const (
	wakeupPrefix  = "Wakeups "
	skippedPrefix = "Skipped "
)

var (
	wakeupLine = regexp.MustCompile(`impl=(\S+) scenario=(\S+) window=(\S+) wakeups=(\d+) clock-calls=(\d+) note="(.*)"`)
	benchHead  = regexp.MustCompile(`^--- (?:BENCH|FAIL|SKIP): (\S+)`)
	logLine    = regexp.MustCompile(`^\s+\S+_test\.go:\d+: (.*)$`)
)

func readFile(path string) (*results, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parse(path, data), nil
}

// parse reads the benchmark results with benchfmt, and the lines it leaves
// alone that cmd/report and package bench add: the run's "# key: value"
// header, the wake-up counts, the sizes skipped and the benchmarks' logs.
func parse(fileName string, data []byte) *results {
	res := &results{values: map[ref][]float64{}, config: map[string]string{}, meta: meta{}}
	r := benchfmt.NewReader(bytes.NewReader(data), fileName)
	for r.Scan() {
		switch rec := r.Result().(type) {
		case *benchfmt.Result:
			name, procs := splitProcs(rec.Name)
			for _, v := range rec.Values {
				k := ref{name, procs, v.Unit}
				if _, ok := res.values[k]; !ok {
					res.order = append(res.order, k)
				}
				res.values[k] = append(res.values[k], v.Value)
			}
			for _, c := range rec.Config {
				if c.File {
					res.config[c.Key] = string(c.Value)
				}
			}
		case *benchfmt.SyntaxError:
			res.errs = append(res.errs, rec.Error())
		}
	}
	res.units = r.Units()
	if first, _, _ := strings.Cut(string(data), "\n"); strings.HasPrefix(first, "#") {
		res.head = strings.TrimSpace(strings.TrimPrefix(first, "#"))
	}

	logging := "" // the benchmark whose log lines follow
	for line := range strings.Lines(string(data)) {
		line = strings.TrimRight(line, "\n")
		if m := benchHead.FindStringSubmatch(line); m != nil {
			logging = strings.TrimPrefix(m[1], "Benchmark")
			continue
		}
		if m := logLine.FindStringSubmatch(line); m != nil && logging != "" {
			res.logs = append(res.logs, logging+": "+m[1])
			continue
		}
		logging = ""
		if m := metaLine.FindStringSubmatch(line); m != nil {
			res.meta[m[1]] = m[2]
		} else if m := wakeupLine.FindStringSubmatch(line); m != nil && strings.HasPrefix(line, wakeupPrefix) {
			res.wakeups = append(res.wakeups, wakeup{m[1], m[2], m[3], m[4], m[5], m[6]})
		} else if rest, ok := strings.CutPrefix(line, skippedPrefix); ok && !slices.Contains(res.skipped, rest) {
			res.skipped = append(res.skipped, rest)
		}
	}
	return res
}

// splitProcs splits a benchmark name into the name without its GOMAXPROCS
// suffix and the GOMAXPROCS, which is 1 when go test printed none.
func splitProcs(n benchfmt.Name) (name, procs string) {
	base, parts := n.Parts()
	procs = "1"
	var b strings.Builder
	b.Write(base)
	for _, p := range parts {
		if p[0] == '-' {
			procs = string(p[1:])
			continue
		}
		b.Write(p)
	}
	return b.String(), procs
}

// A sample is the values of one ref, with benchmath's summary of them.
type sample struct {
	ref
	s   *benchmath.Sample
	sum benchmath.Summary
}

// get returns the sample of unit for name at procs, or nil if the run has
// no such values. unit is as go test printed it ("ns/op", "B/conn"); get
// tidies it.
func (res *results) get(name, procs, unit string) *sample {
	if res == nil {
		return nil
	}
	_, unit = benchunit.Tidy(1, unit)
	k := ref{name, procs, unit}
	xs := res.values[k]
	if len(xs) == 0 {
		return nil
	}
	s := benchmath.NewSample(slices.Clone(xs), &benchmath.DefaultThresholds)
	return &sample{ref: k, s: s, sum: res.units.GetAssumption(unit).Summary(s, confidence)}
}

// n is the number of values.
func (s *sample) n() int { return len(s.s.Values) }

// compare is the ratio of a's center to b's, and benchmath's comparison of
// the two samples (a Mann-Whitney U-test under AssumeNothing, benchstat's
// default).
func (res *results) compare(a, b *sample) (float64, benchmath.Comparison) {
	return a.sum.Center / b.sum.Center, res.units.GetAssumption(a.unit).Compare(a.s, b.s)
}

// significant reports whether c rejects, at its α, that the two samples
// come from one distribution: where benchstat prints a delta, not "~".
func significant(c benchmath.Comparison) bool { return c.P <= c.Alpha }

// procsOf returns the GOMAXPROCS values name was measured at, ascending.
func (res *results) procsOf(name string) []string {
	var ps []string
	for _, k := range res.order {
		if k.name == name && !slices.Contains(ps, k.procs) {
			ps = append(ps, k.procs)
		}
	}
	slices.SortFunc(ps, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
	return ps
}

// Formatting, with benchunit's scaling to at least three significant digits.

// isTime reports whether a tidied unit measures seconds (sec/op,
// cpu-sec/op, sec/timer, ...).
func isTime(unit string) bool {
	num, _, _ := strings.Cut(unit, "/")
	return slices.Contains(strings.Split(num, "-"), "sec")
}

// value formats v of unit: "447.7 ns", "129.9 B", "1.172 KiB", "250.0k",
// "0.02268", "0" (an integer below 1000 as it is).
func value(v float64, unit string) string {
	if math.IsNaN(v) {
		return "—"
	}
	cls := benchunit.ClassOf(unit)
	suffix := ""
	switch {
	case isTime(unit):
		suffix = "s"
	case cls == benchunit.Binary:
		suffix = "B"
	}
	var num, prefix string
	sc := benchunit.CommonScale([]float64{v}, cls)
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1000 && !isTime(unit):
		num = strconv.FormatFloat(v, 'f', 0, 64)
	case sc.Factor < 1 && suffix == "":
		// No milli- or micro- on a unit of its own (call-ms, max-wait/call):
		// the digits benchunit would show, unscaled.
		num = strconv.FormatFloat(v, 'f', sc.Prec+int(math.Round(-math.Log10(sc.Factor))), 64)
	default:
		num, prefix = strconv.FormatFloat(v/sc.Factor, 'f', sc.Prec, 64), sc.Prefix
	}
	if suffix == "" {
		return num + prefix
	}
	return num + " " + prefix + suffix
}

// String is the median and its confidence interval as benchstat prints
// them: "447.7 ns ±3%" ("±∞" when there are too few values for one).
func (s *sample) String() string {
	if s == nil {
		return "—"
	}
	return value(s.sum.Center, s.unit) + " ±" + s.sum.PctRangeString()
}

// times formats a ratio: 1.74x, 13x, 0.059x; "∞" if the divisor was 0.
func times(r float64) string {
	switch {
	case math.IsInf(r, 1):
		return "∞"
	case math.IsNaN(r) || math.IsInf(r, 0):
		return "—"
	}
	switch {
	case r >= 10:
		return fmt.Sprintf("%.0fx", r)
	case r >= 0.1 || r == 0:
		return fmt.Sprintf("%.2fx", r)
	default: // two significant digits
		return strconv.FormatFloat(r, 'f', 1-int(math.Floor(math.Log10(r))), 64) + "x"
	}
}

// ratioText is a ratio with its significance: "1.74x (p=0.002)", or
// "~ 1.06x (p=0.180)" when the U-test cannot tell the two samples apart.
func ratioText(r float64, c benchmath.Comparison) string {
	if math.IsNaN(r) { // 0 ÷ 0
		return "—"
	}
	if significant(c) {
		return fmt.Sprintf("%s (p=%.3f)", times(r), c.P)
	}
	return fmt.Sprintf("~ %s (p=%.3f)", times(r), c.P)
}
