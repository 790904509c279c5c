package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The saved results the tests read: bench/results holds the raw output of
// earlier runs: cmd/report's own (latest.txt, the newest; run-6e40360.txt, the
// one these tests pin) and hand-run ones.
const resultsDir = "../../results"

func mustRead(t *testing.T, names ...string) *results {
	t.Helper()
	var data []byte
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(resultsDir, n))
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b...)
	}
	return parse(strings.Join(names, "+"), data)
}

// benchLine is an independent reading of a go test result line, to check
// benchfmt's against.
var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(?:-(\d+))?\s+\d+\s+(.+)$`)

func TestParseReadsEverySavedResultLine(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(resultsDir, "*.txt"))
	if err != nil || len(files) < 10 {
		t.Fatalf("want the saved results in %s, found %d files (%v)", resultsDir, len(files), err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		res := parse(f, data)
		if len(res.errs) > 0 {
			t.Errorf("%s: benchfmt could not read %q", f, res.errs)
		}
		// Count the values of each ref the way a reader of the text would.
		want := map[ref]int{}
		for line := range strings.Lines(string(data)) {
			m := benchLine.FindStringSubmatch(strings.TrimSpace(line))
			if m == nil {
				continue
			}
			procs := m[2]
			if procs == "" {
				procs = "1"
			}
			fields := strings.Fields(m[3])
			for i := 0; i+1 < len(fields); i += 2 {
				unit := fields[i+1]
				if unit == "ns/op" {
					unit = "sec/op"
				} else if unit == "cpu-ns/op" {
					unit = "cpu-sec/op"
				} else if unit == "ns/timer" {
					unit = "sec/timer"
				} else if unit == "MB/s" {
					unit = "B/s"
				}
				want[ref{m[1], procs, unit}]++
			}
		}
		if len(want) == 0 {
			t.Errorf("%s: no result lines", f)
		}
		for k, n := range want {
			if got := len(res.values[k]); got != n {
				t.Errorf("%s: %v has %d values, the file %d", f, k, got, n)
			}
		}
		if len(res.values) != len(want) {
			t.Errorf("%s: read %d refs, the file has %d", f, len(res.values), len(want))
		}
	}
}

func TestParseKeepsTheRunsHeaderWakeupsAndSkips(t *testing.T) {
	res := mustRead(t, "run-6e40360.txt")
	for k, v := range map[string]string{"commit": "6e40360", "rounds": "4", "benchtime": "0.5s", "duration": "12m8s", "fd-limit": "20000"} {
		if res.meta[k] != v {
			t.Errorf("meta %s = %q, want %q", k, res.meta[k], v)
		}
	}
	if res.config["goos"] != "linux" || res.config["cpu"] != "Intel(R) Xeon(R) Processor" {
		t.Errorf("config = %v", res.config)
	}
	if len(res.wakeups) != 5 || res.wakeups[2] != (wakeup{"wheel", "one-timer-1m30.5s", "10m0s", "3", "11", "fired-after=1m30.5s"}) {
		t.Errorf("wakeups = %v", res.wakeups)
	}
	s := res.get("Churn/impl=wheel/live=1000000", "2", "ns/op")
	var ns []float64
	for _, v := range s.s.Values {
		ns = append(ns, math.Round(v*1e10)/10)
	}
	if !slices.Equal(ns, []float64{215.1, 229.4, 286.4, 314.2}) || s.sum.Center*1e9 < 257.89 || s.sum.Center*1e9 > 257.91 {
		t.Fatalf("Churn/impl=wheel/live=1000000-2 = %v ns, median %v; want the file's four values, ascending, and their median 257.9", ns, s.sum.Center)
	}
	if got := res.get("ResetParallel/impl=wheel/live=1000000", "1", "ns/op"); got == nil || got.n() != 4 {
		t.Errorf("a result printed without -N is not read as GOMAXPROCS=1: %v", got)
	}
	if res.get("Churn/impl=wheel/live=1000000", "2", "no-such-unit") != nil || res.get("NoSuch", "2", "ns/op") != nil {
		t.Error("get of a missing ref is not nil")
	}
}

func TestSplitProcs(t *testing.T) {
	for in, want := range map[string][2]string{
		"Churn/impl=wheel/live=1000-2":                       {"Churn/impl=wheel/live=1000", "2"},
		"Churn/impl=wheel/live=1000":                         {"Churn/impl=wheel/live=1000", "1"},
		"SlowExpiry/impl=wheel-parallel/due=burst/timers=10": {"SlowExpiry/impl=wheel-parallel/due=burst/timers=10", "1"},
		"ByValue/impl=runtime-reused/mode=loop-16":           {"ByValue/impl=runtime-reused/mode=loop", "16"},
	} {
		name, procs := splitProcs([]byte(in))
		if name != want[0] || procs != want[1] {
			t.Errorf("splitProcs(%q) = %q, %q; want %q, %q", in, name, procs, want[0], want[1])
		}
	}
}

// The medians, intervals and p-values are benchstat's: the expected strings
// are what `benchstat -col /impl` (golang.org/x/perf/cmd/benchstat at the
// version in go.mod) prints for these files, in the page's format.
func TestStatisticsAreBenchstats(t *testing.T) {
	res := mustRead(t, "withtimeout-session10-new.txt")
	const w, c = "WithTimeout/parent=background/done=false/impl=wheel/pending=100000", "WithTimeout/parent=background/done=false/impl=context/pending=100000"
	a, b := res.get(c, "2", "ns/op"), res.get(w, "2", "ns/op")
	if a.String() != "896.9 ns ±30%" || b.String() != "278.4 ns ±36%" {
		t.Errorf("medians: %s and %s; benchstat prints 896.9n ± 30%% and 278.4n ± 36%%", a, b)
	}
	r, cmp := res.compare(a, b)
	if got := ratioText(r, cmp); got != "3.22x (p=0.002)" {
		t.Errorf("ratio = %s; benchstat: +222.09%% (p=0.002 n=6)", got)
	}
	if cpu := res.get(withImpl(w, "context"), "2", "cpu-ns/op"); cpu.String() != "1.127 µs ±24%" {
		t.Errorf("cpu-ns/op: %s; benchstat prints 1127.0n ± 24%%", cpu)
	}

	res = mustRead(t, "run-6e40360.txt")
	a, b = res.get("Reset/impl=runtime/live=1000000/order=random", "2", "ns/op"), res.get("Reset/impl=wheel/live=1000000/order=random", "2", "ns/op")
	if a.String() != "526.9 ns ±∞" || b.String() != "498.9 ns ±∞" {
		t.Errorf("4 samples: %s and %s; benchstat prints 526.9n ± ∞ and 498.9n ± ∞", a, b)
	}
	if r, cmp := res.compare(a, b); ratioText(r, cmp) != "~ 1.06x (p=0.200)" || significant(cmp) {
		t.Errorf("ratio = %s; benchstat: ~ (p=0.200 n=4)", ratioText(r, cmp))
	}
	if s := res.get("HeapPerKey/impl=wheel/keys=1000000", "2", "B/key"); s.String() != "77.56 B ±∞" {
		t.Errorf("B/key = %s", s)
	}
}

func TestValueFormat(t *testing.T) {
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{447.7e-9, "sec/op", "447.7 ns"},
		{1.1665e-6, "sec/op", "1.167 µs"},
		{5.189, "fire-cpu-sec/op", "5.189 s"},
		{0, "sec/op", "0.000 s"},
		{64, "B/timer", "64 B"},
		{129.94, "B/timer", "129.9 B"},
		{3064, "stack-B/conn", "2.992 KiB"},
		{0, "allocs/op", "0"},
		{1, "allocs/op", "1"},
		{7.5, "max-goroutines", "7.500"},
		{560800, "max-goroutines", "560.8k"},
		{0.2836, "call-ms", "0.2836"},
		{0.02268, "max-wait/call", "0.02268"},
	} {
		if got := value(c.v, c.unit); got != c.want {
			t.Errorf("value(%v, %q) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
	for r, want := range map[float64]string{1.7401: "1.74x", 13.2: "13x", 0.0593: "0.059x", 0.84: "0.84x"} {
		if got := times(r); got != want {
			t.Errorf("times(%v) = %q, want %q", r, got, want)
		}
	}
}

// pageOf builds the page and the summary of saved results, with the meta
// lines overridden.
func pageOf(t *testing.T, m meta, files ...string) (string, *doc) {
	t.Helper()
	res := mustRead(t, files...)
	res.rawRel = "bench/results/" + files[0]
	for k, v := range m {
		res.meta[k] = v
	}
	d := newDoc(res, mustRead(t, "stall-before.txt"), "..", map[string]string{"churn": "churn.png", "scaling": "scaling.png"})
	return d.page(), d
}

func TestPageNamesTheCommitAndEveryRowHasItsInterval(t *testing.T) {
	page, d := pageOf(t, meta{"commit": "0123456789abcdef0123456789abcdef01234567", "rounds": "6", "dirty": ""},
		"run-6e40360.txt", "withtimeout-session10-new.txt", "idleevents-heap.txt")
	if !strings.Contains(page, "at commit `0123456789abcdef0123456789abcdef01234567`.") {
		t.Error("the page does not name the commit")
	}
	if strings.Contains(page, "short run") || strings.Contains(page, "not measurements to rely on") {
		t.Error("a 6-round run at -benchtime 0.5s is called a short run")
	}
	for _, h := range []string{"## The run", "## At a glance", "## Where timingwheel costs more", "## From one core to two",
		"## Timers held by value", "## Memory", "## Idle timeouts of TCP connections", "## Request deadlines",
		"## Idle events", "## Pauses while the wheel works through a full slot", "## Mass expiry", "## Idle wake-ups", "## All results"} {
		if !strings.Contains(page, "\n"+h+"\n") {
			t.Errorf("no section %q", h)
		}
	}
	if !strings.Contains(page, loopLines(d.m["bench-command"])) || !strings.Contains(page, d.m["wakeups-command"]) {
		t.Error("the page does not give the exact commands")
	}
	// Every value cell of every table is a median with its interval.
	rows := 0
	inTable := map[string]bool{} // the rows of the table being read
	for line := range strings.Lines(page) {
		if !strings.HasPrefix(line, "| ") || strings.Contains(line, "---") {
			if !strings.HasPrefix(line, "|") {
				clear(inTable)
			}
			continue
		}
		if inTable[line] {
			t.Errorf("row twice in one table: %s", line)
		}
		inTable[line] = true
		for _, c := range strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|") {
			c = strings.TrimSpace(c)
			checkCell(t, c)
		}
		rows++
	}
	if rows < 300 {
		t.Errorf("only %d table rows", rows)
	}

	// Every comparison kept for the summary is on the page as it says.
	js, err := d.summaryJSON()
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Commit      string
		Comparisons []struct {
			Section, What, Text string
			Versus, Significant bool
			Ratio               *float64
			P                   float64
		}
		Samples []struct{ Name, Text string }
	}
	if err := json.Unmarshal(js, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Commit != d.m["commit"] || len(sum.Comparisons) < 100 || len(sum.Samples) != len(d.res.order) {
		t.Fatalf("summary: commit %q, %d comparisons, %d samples", sum.Commit, len(sum.Comparisons), len(sum.Samples))
	}
	for _, c := range sum.Comparisons {
		if !strings.Contains(page, "| "+c.Text+" |") {
			t.Errorf("comparison %s / %s: %q is not on the page", c.Section, c.What, c.Text)
		}
		if c.Significant != (c.P <= 0.05) || c.Significant == strings.HasPrefix(c.Text, "~") {
			t.Errorf("comparison %s / %s: significant=%v p=%v text %q", c.Section, c.What, c.Significant, c.P, c.Text)
		}
	}
}

var (
	cellFormat  = regexp.MustCompile(`^(—|-?\d[\d.]*(?: [a-zµnmkKMGi]*[sB])?[kM]? ±(\d+%|∞|\?))$`)
	ratioFormat = regexp.MustCompile(`^(—|(~ )?(\d[\d.]*x|∞) \(p=\d\.\d{3}\))$`)
)

// checkCell checks that a table cell with an interval is a median with its
// interval, and one with a p-value a ratio with its p-value.
func checkCell(t *testing.T, c string) {
	t.Helper()
	if strings.Contains(c, "±") && !cellFormat.MatchString(c) {
		t.Errorf("cell %q: not a median ±interval", c)
	}
	if strings.Contains(c, "(p=") && !ratioFormat.MatchString(c) {
		t.Errorf("cell %q: not a ratio (p=…)", c)
	}
}

func TestPageListsWhereTheWheelLoses(t *testing.T) {
	page, d := pageOf(t, nil, "run-6e40360.txt")
	i := strings.Index(page, "## Where timingwheel costs more")
	j := strings.Index(page[i+1:], "\n## ")
	if i < 0 || j < 0 {
		t.Fatal("no section on the losses")
	}
	losses := page[i : i+1+j]
	n := 0
	for _, c := range d.cmps {
		if c.versus && c.ratio < 1 {
			n++
			if !strings.Contains(losses, ratioText(c.ratio, c.c)) {
				t.Errorf("%s / %s: the wheel loses (%s) and the list leaves it out", c.section, c.what, ratioText(c.ratio, c.c))
			}
		}
	}
	if n == 0 {
		t.Fatal("run-6e40360.txt has rows where the wheel loses (ResetParallel at GOMAXPROCS=2, SlowExpiry's lag); the page found none")
	}
	if !strings.Contains(page, "**A short run** (4 round(s), fewer than the 6 a confidence interval needs)") {
		t.Error("a 4-round run does not say so at the top")
	}
}

func TestPageSaysWhenTheTreeWasDirtyOrTheRunShort(t *testing.T) {
	page, _ := pageOf(t, meta{"dirty": "timer.go,wheel.go", "rounds": "1", "benchtime": "100x", "groups": "single"}, "run-6e40360.txt")
	top, _, _ := strings.Cut(page, "## The run")
	if !strings.Contains(top, "with uncommitted changes to timer.go, wheel.go") {
		t.Error("a dirty tree is not said")
	}
	want := "**A short run** (1 round(s), fewer than the 6 a confidence interval needs, `-benchtime 100x`, only the groups matching `single`), not the full measurement"
	if !strings.Contains(top, want) || strings.Count(top, "short run") != 1 {
		t.Errorf("the top does not say, in one line, that the run was short:\n%s", top)
	}
}

func TestCheckFindsNumbersNotOnThePage(t *testing.T) {
	page := "| Churn | 257.9 ns ±3% | 447.7 ns ±2% | 1.74x (p=0.002) |\n10,000 connections\n"
	good := "intro 1.5x\n<!-- benchmarks.md -->\n| arm + Stop | 257.9 ns ±3% | 1.74x |\n<!-- /benchmarks.md -->\non 10^6 timers, <!-- benchmarks.md -->10,000 conns: 447.7 ns<!-- /benchmarks.md -->\n"
	if missing, err := check(good, page); err != nil || len(missing) > 0 {
		t.Errorf("good text: %v %v", missing, err)
	}
	bad := "<!-- benchmarks.md -->\narm + Stop: 258 ns, 1.74, 3%\nfrom go1.26 and p99 <!-- /benchmarks.md -->"
	missing, err := check(bad, page)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"line 2: 258 is not on the page", "line 2: 1.74 is not on the page"}
	if !slices.Equal(missing, want) {
		t.Errorf("missing = %q, want %q", missing, want)
	}
	for _, text := range []string{"no quotes at all 1.74x", "<!-- benchmarks.md --> 1.74x", "1.74x <!-- /benchmarks.md -->",
		"<!-- benchmarks.md --> <!-- benchmarks.md --> <!-- /benchmarks.md -->"} {
		if _, err := check(text, page); err == nil {
			t.Errorf("check(%q) reports no error", text)
		}
	}
}

// The README's quoted numbers are on docs/benchmarks.md, once the page is
// one this report wrote (it writes docs/benchmarks.json beside it).
func TestREADMEQuotesOnlyNumbersOnThePage(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	if _, err := os.Stat(filepath.Join(root, "docs", "benchmarks.json")); err != nil {
		t.Skip("docs/benchmarks.md is not yet written by this report (no docs/benchmarks.json)")
	}
	if err := checkFiles(filepath.Join(root, "README.md"), filepath.Join(root, "docs", "benchmarks.md")); err != nil {
		t.Error(err)
	}
}

func TestGroupsAreDistinctAndEachSelectsABenchmark(t *testing.T) {
	src, err := filepath.Glob("../../*_test.go")
	if err != nil || len(src) == 0 {
		t.Fatal("no benchmark sources", err)
	}
	var funcs []string
	for _, f := range src {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^func (Benchmark\w+)\(`).FindAllStringSubmatch(string(b), -1) {
			funcs = append(funcs, m[1])
		}
	}
	seen := map[string]bool{}
	for _, g := range groups {
		if seen[g.name] {
			t.Errorf("group %s twice", g.name)
		}
		seen[g.name] = true
		top, _, _ := strings.Cut(g.bench, "$/")
		re := regexp.MustCompile(strings.TrimSuffix(top, "$") + "$")
		if !slices.ContainsFunc(funcs, re.MatchString) {
			t.Errorf("group %s (-bench %s) matches no benchmark function", g.name, g.bench)
		}
		if g.times != "" {
			if _, err := strconv.Atoi(g.times); err != nil {
				t.Errorf("group %s: times %q", g.name, g.times)
			}
		}
	}
}

func TestKeepDropsKeptSectionsThePageNowMeasures(t *testing.T) {
	old := "# Benchmarks\n\n## At a glance\n\nold\n\n" + keepMarker + "\n\n## Event-loop servers (gnet)\n\ngnet text\n\n### sub\n\nmore\n\n" +
		"## Request deadlines\n\nhand-run numbers\n\n## Idle events\n\nhand-run too\n"
	page := "# Benchmarks\n\n## At a glance\n\nnew\n\n## Request deadlines\n\nmeasured\n\n## Idle events\n\nmeasured\n"
	got := keep(page, old)
	want := page + "\n" + keepMarker + "\n\n## Event-loop servers (gnet)\n\ngnet text\n\n### sub\n\nmore\n"
	if got != want {
		t.Errorf("keep =\n%s\nwant\n%s", got, want)
	}
	if keep(page, "no marker") != page {
		t.Error("a page without the marker keeps something")
	}
}

// The server-shape section pairs each wheel row with the runtime's, shows
// the one-to-two-core speed-ups, and judges issue 37's targets by the
// ratio of the medians.
func TestServerSectionPairsTheImplsAndJudgesTheTargets(t *testing.T) {
	page, d := pageOf(t, nil, "server-rearm-before.txt")
	i := strings.Index(page, "\n## Timers made on one goroutine, re-armed from every core\n")
	if i < 0 {
		t.Fatal("no server-shape section")
	}
	j := strings.Index(page[i+1:], "\n## ")
	sec := page[i : i+1+j]
	for line := range strings.Lines(sec) {
		if strings.HasPrefix(line, "| ") {
			for _, c := range strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|") {
				checkCell(t, strings.TrimSpace(c))
			}
		}
	}
	for _, name := range []string{"ServerReset", "ServerConnRead"} {
		for _, live := range []string{"10000", "1000000"} {
			for _, mode := range []string{"loop", "parallel"} {
				for _, pr := range []string{"1", "2"} {
					w := d.get(name+"/impl=wheel/live="+live+"/mode="+mode, pr, "ns/op")
					r := d.get(name+"/impl=runtime/live="+live+"/mode="+mode, pr, "ns/op")
					x, c := d.res.compare(r, w)
					row := "| " + live + " | " + mode + " | " + pr + " | " + w.String() + " | " + r.String() + " | " + ratioText(x, c) + " |"
					if !strings.Contains(sec, row) {
						t.Errorf("%s: no row %s", name, row)
					}
				}
			}
			w := d.get(name+"/impl=wheel/live="+live+"/mode=parallel", "1", "ns/op")
			w2 := d.get(name+"/impl=wheel/live="+live+"/mode=parallel", "2", "ns/op")
			x, c := d.res.compare(w, w2)
			if row := "| " + name + " | " + live + " | parallel | timingwheel | " + w2.String() + " | " + w.String() + " | " + ratioText(x, c) + " |"; !strings.Contains(sec, row) {
				t.Errorf("no speed-up row %s", row)
			}
		}
	}
	if len(serverTargets) != 6 {
		t.Fatalf("%d targets; issue 37 sets 6", len(serverTargets))
	}
	for _, tg := range serverTargets {
		a, b := d.get(tg.num, tg.numProcs, "ns/op"), d.get(tg.den, tg.denProcs, "ns/op")
		if a == nil || b == nil {
			t.Errorf("target %q: the saved run lacks %s or %s", tg.what, tg.num, tg.den)
			continue
		}
		x, c := d.res.compare(a, b)
		verdict := "no"
		if x >= tg.min || (tg.orTied && !significant(c)) {
			verdict = "yes"
		}
		row := "| " + tg.what + " | " + a.String() + " | " + b.String() + " | " + ratioText(x, c) + " | "
		k := strings.Index(sec, row)
		if k < 0 {
			t.Errorf("no target row %s", row)
			continue
		}
		line, _, _ := strings.Cut(sec[k:], "\n")
		if !strings.Contains(line, " | "+verdict+" | "+tg.filed+" |") {
			t.Errorf("target %q at %s: want met=%s, filed %s: %s", tg.what, ratioText(x, c), verdict, tg.filed, line)
		}
	}
	for _, g := range []string{"ServerReset/impl=wheel/live=10000/mode=parallel", "ServerConnRead/impl=wheel/live=10000/mode=parallel"} {
		w, r := d.get(g, "2", "ns/op"), d.get(withImpl(g, "runtime"), "2", "ns/op")
		x, c := d.res.compare(r, w)
		if !strings.Contains(page, " | "+w.String()+" | "+r.String()+" | "+ratioText(x, c)+" |\n") {
			t.Errorf("At a glance has no row for %s", g)
		}
	}
}

func TestTargetMet(t *testing.T) {
	faster := target{min: 1.5}
	noSlower := target{min: 1, orTied: true}
	for _, c := range []struct {
		tg   target
		r    float64
		sig  bool
		want bool
	}{
		{faster, 1.5, true, true}, {faster, 1.49, true, false}, {faster, 1.2, false, false},
		{noSlower, 1.0, true, true}, {noSlower, 0.9, false, true}, {noSlower, 0.9, true, false},
	} {
		if got := c.tg.met(c.r, c.sig); got != c.want {
			t.Errorf("min %v orTied %v: met(%v, %v) = %v", c.tg.min, c.tg.orTied, c.r, c.sig, got)
		}
	}
}
