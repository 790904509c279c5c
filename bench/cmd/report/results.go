package main

import (
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Parsing go test -bench output.

const (
	wakeupPrefix  = "Wakeups "
	skippedPrefix = "Skipped "
)

// results holds every sample of every metric, keyed by benchmark name with
// the impl=... element taken out and the GOMAXPROCS suffix kept (e.g.
// "BenchmarkChurn/live=1000-2"), then impl, then unit.
type results struct {
	samples  map[string]map[string]map[string][]float64
	names    []string          // benchmark keys in first-seen order
	families []string          // "Churn", "Reset", ... in first-seen order
	config   map[string]string // goos, cpu, ... as go test printed them
	wakeups  []wakeup
	skipped  []string // why a benchmark size did not run, one per distinct reason
	logs     []string // what benchmarks logged (b.Logf): "name: message"
	rawRel   string   // the results file, relative to the repository root

	// stallBefore is BenchmarkStall on an earlier library commit, read from
	// -stall-before (written by bench/stall_at.sh), or nil.
	stallBefore     *results
	stallBeforeHead string // its first line, which names the commit
}

type wakeup struct {
	impl, scenario, window, wakeups, calls, note string
}

var (
	benchLine  = regexp.MustCompile(`^(Benchmark\S+?)(?:-(\d+))?\s+\d+\s+(.+)$`)
	wakeupLine = regexp.MustCompile(`impl=(\S+) scenario=(\S+) window=(\S+) wakeups=(\d+) clock-calls=(\d+) note="(.*)"`)
	configLine = regexp.MustCompile(`^([a-z]\S*): (.*)$`)
	benchHead  = regexp.MustCompile(`^--- (?:BENCH|FAIL|SKIP): (\S+)`)
	logLine    = regexp.MustCompile(`^\S+_test\.go:\d+: (.*)$`)
)

func parse(data string) results {
	res := results{samples: map[string]map[string]map[string][]float64{}, config: map[string]string{}}
	logging := "" // the benchmark whose log lines follow
	for line := range strings.Lines(data) {
		indented := strings.HasPrefix(line, " ")
		line = strings.TrimSpace(line)
		if m := benchHead.FindStringSubmatch(line); m != nil {
			logging = m[1]
			continue
		}
		if m := logLine.FindStringSubmatch(line); m != nil && indented && logging != "" {
			res.logs = append(res.logs, strings.TrimPrefix(logging, "Benchmark")+": "+m[1])
			continue
		}
		logging = ""
		if m := configLine.FindStringSubmatch(line); m != nil {
			res.config[m[1]] = m[2]
			continue
		}
		if strings.HasPrefix(line, wakeupPrefix) {
			if m := wakeupLine.FindStringSubmatch(line); m != nil {
				res.wakeups = append(res.wakeups, wakeup{m[1], m[2], m[3], m[4], m[5], m[6]})
			}
			continue
		}
		if rest, ok := strings.CutPrefix(line, skippedPrefix); ok {
			if !slices.Contains(res.skipped, rest) {
				res.skipped = append(res.skipped, rest)
			}
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name, impl := splitImpl(m[1])
		procs := m[2]
		if procs == "" {
			procs = "1" // go test leaves the suffix out at GOMAXPROCS=1
		}
		key := name + "-" + procs
		byImpl := res.samples[key]
		if byImpl == nil {
			byImpl = map[string]map[string][]float64{}
			res.samples[key] = byImpl
			res.names = append(res.names, key)
			if fam := family(key); !slices.Contains(res.families, fam) {
				res.families = append(res.families, fam)
			}
		}
		if byImpl[impl] == nil {
			byImpl[impl] = map[string][]float64{}
		}
		f := strings.Fields(m[3])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			byImpl[impl][f[i+1]] = append(byImpl[impl][f[i+1]], v)
		}
	}
	return res
}

// splitImpl takes the impl=X element out of a benchmark name.
func splitImpl(name string) (key, impl string) {
	parts := strings.Split(name, "/")
	kept := parts[:0]
	for _, p := range parts {
		if v, ok := strings.CutPrefix(p, "impl="); ok {
			impl = v
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, "/"), impl
}

// family is the top-level benchmark name without "Benchmark".
func family(key string) string {
	top, _, _ := strings.Cut(key, "/")
	return strings.TrimPrefix(top, "Benchmark")
}

// splitProcs splits "BenchmarkX/a=b-2" into "BenchmarkX/a=b" and "2".
func splitProcs(key string) (base, procs string) {
	i := strings.LastIndexByte(key, '-')
	if i < 0 {
		return key, ""
	}
	return key[:i], key[i+1:]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// median returns the median of unit for base at GOMAXPROCS procs.
func (res results) median(base, procs, impl, unit string) float64 {
	return median(res.samples[base+"-"+procs][impl][unit])
}

// max returns the largest sample of unit for base at GOMAXPROCS procs, or
// NaN if there is none.
func (res results) max(base, procs, impl, unit string) float64 {
	xs := res.samples[base+"-"+procs][impl][unit]
	if len(xs) == 0 {
		return math.NaN()
	}
	return slices.Max(xs)
}

// has reports whether any sample of impl exists for base at procs.
func (res results) has(base, procs, impl string) bool {
	return len(res.samples[base+"-"+procs][impl]) > 0
}

// familyKeys returns the benchmark keys of one family, in order.
func (res results) familyKeys(fam string) []string {
	var keys []string
	for _, k := range res.names {
		if family(k) == fam {
			keys = append(keys, k)
		}
	}
	return keys
}

// familyBases returns the keys of one family without their GOMAXPROCS
// suffix, each once, in order.
func (res results) familyBases(fam string) []string {
	var bases []string
	for _, k := range res.familyKeys(fam) {
		if b, _ := splitProcs(k); !slices.Contains(bases, b) {
			bases = append(bases, b)
		}
	}
	return bases
}

// impls returns the implementations measured for base at any GOMAXPROCS,
// in implOrder.
func (res results) impls(base string) []string {
	var impls []string
	for _, k := range res.names {
		if b, _ := splitProcs(k); b != base {
			continue
		}
		for impl := range res.samples[k] {
			if !slices.Contains(impls, impl) {
				impls = append(impls, impl)
			}
		}
	}
	slices.SortFunc(impls, func(a, b string) int { return implRank(a) - implRank(b) })
	return impls
}

// procsOf returns the GOMAXPROCS values base was measured at, ascending.
func (res results) procsOf(base string) []string {
	var ps []string
	for _, k := range res.names {
		if b, p := splitProcs(k); b == base && !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	slices.SortFunc(ps, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
	return ps
}

// n is the number of samples of unit.
func (res results) n(base, procs, impl, unit string) int {
	return len(res.samples[base+"-"+procs][impl][unit])
}

func (res results) wakeup(impl, scenario string) *wakeup {
	for i, w := range res.wakeups {
		if w.impl == impl && w.scenario == scenario {
			return &res.wakeups[i]
		}
	}
	return nil
}
