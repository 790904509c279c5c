package main

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchmath"
)

// doc builds the page: its sections write tables of samples, and every
// ratio of another implementation's median to the wheel's is kept for the
// list of the rows where the wheel costs more and for benchmarks.json.
type doc struct {
	res, old *results // old: -stall-before, or nil
	m        meta
	root     string // the repository root, relative to the page's directory
	plots    map[string]string
	body     strings.Builder
	section  string
	cmps     []comparison
}

// A comparison is one ratio cell of a table: another way's median ÷ the
// wheel's (versus), or any other ratio the page shows.
type comparison struct {
	section, what string
	aHead, bHead  string
	a, b          *sample
	ratio         float64
	c             benchmath.Comparison
	versus        bool // a is another implementation, b the wheel's
}

func newDoc(res, old *results, root string, plots map[string]string) *doc {
	return &doc{res: res, old: old, m: res.meta, root: root, plots: plots}
}

func (d *doc) p(format string, args ...any) { fmt.Fprintf(&d.body, format, args...) }

func (d *doc) heading(title string) {
	d.section = title
	d.p("## %s\n\n", title)
}

// get is the sample of unit for name at GOMAXPROCS procs, or nil.
func (d *doc) get(name, procs, unit string) *sample { return d.res.get(name, procs, unit) }

// A table has label columns, then value columns (each cell a sample: its
// median and confidence interval), then ratio columns.
type table struct {
	labels []string
	values []string
	ratios []ratio
	texts  []string   // headings of plain-text columns after the ratios, which the caller fills
	rows   [][]string // rendered
}

// A ratio column is value column a's median ÷ value column b's, with the
// U-test's verdict. versus: a is another implementation and b the wheel, so
// above 1 the wheel costs less.
type ratio struct {
	a, b   int
	head   string
	versus bool
}

func newTable(labels, values []string, ratios ...ratio) *table {
	return &table{labels: labels, values: values, ratios: ratios}
}

// add adds a row unless every cell is missing.
func (d *doc) add(t *table, labels []string, cells ...*sample) {
	if !slices.ContainsFunc(cells, func(s *sample) bool { return s != nil }) {
		return
	}
	row := slices.Clone(labels)
	for _, s := range cells {
		row = append(row, s.String())
	}
	for _, r := range t.ratios {
		a, b := cells[r.a], cells[r.b]
		if a == nil || b == nil {
			row = append(row, "—")
			continue
		}
		x, c := d.res.compare(a, b)
		row = append(row, ratioText(x, c))
		if !math.IsNaN(x) { // 0 ÷ 0 compares nothing
			var what []string
			for i, l := range labels {
				if t.labels[i] == "GOMAXPROCS" {
					l = "GOMAXPROCS=" + l
				}
				what = append(what, l)
			}
			d.cmps = append(d.cmps, comparison{d.section, strings.Join(what, ", "), t.values[r.a], t.values[r.b], a, b, x, c, r.versus})
		}
	}
	t.rows = append(t.rows, row)
}

// tablePerProcs adds to t a row for each of names at each GOMAXPROCS it
// ran at, whose labels and cells row gives, and writes t.
func (d *doc) tablePerProcs(t *table, names []string, row func(name, procs string) ([]string, []*sample)) {
	for _, n := range names {
		for _, pr := range d.res.procsOf(n) {
			labels, cells := row(n, pr)
			d.add(t, labels, cells...)
		}
	}
	d.table(t)
}

// units is the sample of each of units for name at GOMAXPROCS procs.
func (d *doc) units(name, procs string, units []string) []*sample {
	var cells []*sample
	for _, u := range units {
		cells = append(cells, d.get(name, procs, u))
	}
	return cells
}

// newThreeWayTable is a table of the wheel against the runtime and
// go-zero: labels, the three value columns (a row's cells from threeWays)
// and the ratio of each other way to the wheel.
func newThreeWayTable(labels []string) *table {
	return newTable(labels, []string{"timingwheel", "runtime", "go-zero"},
		ratio{1, 0, "runtime ÷ timingwheel", true}, ratio{2, 0, "go-zero ÷ timingwheel", true})
}

// threeWays is the sample of unit at GOMAXPROCS procs of the wheel's
// benchmark name and of the runtime's and go-zero's same benchmark: the
// cells of a row of a newThreeWayTable.
func (d *doc) threeWays(name, procs, unit string) []*sample {
	return []*sample{d.get(name, procs, unit), d.get(withImpl(name, "runtime"), procs, unit), d.get(withImpl(name, "gozero"), procs, unit)}
}

func (d *doc) table(t *table) {
	if len(t.rows) == 0 {
		return
	}
	head := slices.Concat(t.labels, t.values)
	align := strings.Repeat("|---", len(t.labels)) + strings.Repeat("|--:", len(t.values)+len(t.ratios)) + strings.Repeat("|---", len(t.texts)) + "|\n"
	for _, r := range t.ratios {
		head = append(head, r.head)
	}
	head = append(head, t.texts...)
	d.p("| %s |\n%s", strings.Join(head, " | "), align)
	for _, row := range t.rows {
		d.p("| %s |\n", strings.Join(row, " | "))
	}
	d.p("\n")
}

// names returns the benchmark names that start with prefix, each once, in
// the order of the run.
func (res *results) names(prefix string) []string {
	var out []string
	for _, k := range res.order {
		if strings.HasPrefix(k.name, prefix) && !slices.Contains(out, k.name) {
			out = append(out, k.name)
		}
	}
	return out
}

// withImpl replaces the impl=... element of a benchmark name.
func withImpl(name, impl string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, "impl=") {
			parts[i] = "impl=" + impl
		}
	}
	return strings.Join(parts, "/")
}

// caseOf is a benchmark name without its top level and its impl element:
// "live=1000000/order=random".
func caseOf(name string) string {
	parts := strings.Split(name, "/")[1:]
	parts = slices.DeleteFunc(parts, func(p string) bool { return strings.HasPrefix(p, "impl=") })
	return strings.Join(parts, "/")
}

// smoke says why this run's numbers are not a full measurement, or "".
func (d *doc) smoke() string {
	var why []string
	if n, err := strconv.Atoi(d.m["rounds"]); err == nil && n < fullRounds {
		why = append(why, fmt.Sprintf("%d round(s), fewer than the %d a confidence interval needs", n, fullRounds))
	}
	if strings.HasSuffix(d.m["benchtime"], "x") {
		why = append(why, "`-benchtime "+d.m["benchtime"]+"`")
	}
	if d.m["groups"] != "" {
		why = append(why, "only the groups matching `"+d.m["groups"]+"`")
	}
	return strings.Join(why, ", ")
}

func (d *doc) commit() string {
	c := "`" + d.m["commit"] + "`"
	if d.m["dirty"] != "" {
		c += " with uncommitted changes to " + strings.ReplaceAll(d.m["dirty"], ",", ", ")
	}
	return c
}

// page is the whole page.
func (d *doc) page() string {
	d.glance()
	d.scaling()
	d.server()
	d.byValue()
	d.memory()
	d.connections()
	d.deadlines()
	d.periodic()
	d.idleEvents()
	d.churn()
	d.stall()
	d.expiry()
	d.wakeups()
	d.allResults()
	d.methods()
	body := d.body.String()

	d.body.Reset()
	p := d.p
	p("# Benchmarks\n\n")
	if why := d.smoke(); why != "" {
		p("**A short run** (%s), not the full measurement: rerun the command below for that.\n\n", why)
	}
	p("Measured %s (UTC) at commit %s.\n\n", d.m["date"], d.commit())
	p("`timingwheel` side by side with what you would write without it: Go's runtime timers\n")
	p("(`time.AfterFunc`, `*time.Timer`, `time.Ticker`), `context.WithTimeout`, `conn.SetReadDeadline`,\n")
	p("a bare `net.Conn`; in some tables also go-zero's `collection.TimingWheel` (github.com/zeromicro/go-zero\n")
	p("v1.10.3). The benchmarks are in [`bench/`](%s/bench); this page is written by\n", d.root)
	p("[`bench/cmd/report`](%s/bench/cmd/report), with its numbers for scripts in\n", d.root)
	p("[`benchmarks.json`](benchmarks.json). To measure again, from the repository root:\n\n")
	p("```sh\ncd bench && go run ./cmd/report\n```\n\n")
	p("How to read the numbers. A cell is the median over the rounds and its 95%% confidence interval\n")
	p("(\"±3%%\"), as `benchstat` prints them (golang.org/x/perf/benchmath). A ratio is the other way's\n")
	p("median ÷ timingwheel's, so above 1x timingwheel costs less, below 1x it costs more; lower is\n")
	p("better for every metric. Beside each ratio is the p-value of benchstat's test (Mann-Whitney U)\n")
	p("that the two samples come from one distribution; `~` marks a ratio the test cannot tell from\n")
	p("1 at α=0.05. Rounds interleave the implementations, so a ratio compares samples taken at the\n")
	p("same times; absolute numbers drift between runs on a shared machine.\n\n")
	d.run()
	d.section = ""
	p("%s", body)
	return d.insertLosses(d.body.String())
}

// lossesMarker is where the list of losses goes: after "At a glance",
// whose rows it needs.
const lossesMarker = "<!-- losses -->\n"

func (d *doc) insertLosses(page string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Where timingwheel costs more\n\n")
	seen := map[[2]ref]bool{}
	var lost []comparison
	sig, tied := 0, 0
	for _, c := range d.cmps {
		if !c.versus || seen[[2]ref{c.a.ref, c.b.ref}] {
			continue
		}
		seen[[2]ref{c.a.ref, c.b.ref}] = true
		if !significant(c.c) {
			tied++
		}
		if c.ratio < 1 {
			lost = append(lost, c)
			if significant(c.c) {
				sig++
			}
		}
	}
	fmt.Fprintf(&b, "Every comparison on this page in which the other way's median is lower than timingwheel's:\n")
	fmt.Fprintf(&b, "%d of the %d comparisons of timingwheel with another way. In %d of them the test tells the two\n", len(lost), len(seen), sig)
	fmt.Fprintf(&b, "apart; in the others (`~`) it cannot, as in %d of the %d in all.\n\n", tied, len(seen))
	if len(lost) > 0 {
		fmt.Fprintf(&b, "| section | case | compared | timingwheel | the other way | other ÷ timingwheel |\n|---|---|---|--:|--:|--:|\n")
		for _, c := range lost {
			fmt.Fprintf(&b, "| %s | %s | %s / %s | %s | %s | %s |\n", c.section, c.what, c.bHead, c.aHead, c.b, c.a, ratioText(c.ratio, c.c))
		}
		fmt.Fprintf(&b, "\n")
	}
	return strings.Replace(page, lossesMarker, b.String(), 1)
}

func (d *doc) run() {
	p := d.p
	p("## The run\n\n")
	p("| | |\n|---|---|\n")
	p("| date (UTC) | %s |\n", d.m["date"])
	p("| commit | %s |\n", d.commit())
	p("| machine | %s CPUs (`nproc`), %s, %s RAM |\n", d.m["nproc"], d.m["cpu-model"], d.m["memory"])
	p("| kernel | %s |\n", d.m["kernel"])
	p("| Go | %s |\n", d.m["go"])
	p("| rounds (samples per benchmark) | %s |\n", d.m["rounds"])
	p("| `-benchtime` of the timed benchmarks | %s |\n", d.m["benchtime"])
	tags := d.m["tags"]
	if tags == "" {
		tags = "none"
	}
	p("| optional benchmarks built in (`-tags`) | %s |\n", tags)
	p("| open-file limit (`ulimit -n`) | %s |\n", d.m["fd-limit"])
	if d.m["duration"] != "" {
		p("| duration | %s |\n", d.m["duration"])
	}
	if filepath.IsAbs(d.res.rawRel) {
		p("| raw output | `%s` |\n\n", d.res.rawRel)
	} else {
		p("| raw output | [`%s`](%s/%s) |\n\n", d.res.rawRel, d.root, d.res.rawRel)
	}
	p("The report command runs these (one process per group and round, rounds interleaved):\n\n```sh\n%s\n", d.m["report-command"])
	p("%s\n", loopLines(d.m["bench-command"]))
	p("%s\n```\n\n", d.m["wakeups-command"])
	if len(d.res.errs) > 0 {
		p("Lines of the raw output benchfmt could not read:\n\n")
		for _, e := range d.res.errs {
			p("- %s\n", e)
		}
		p("\n")
	}
}

// loopLines puts each command of a one-line shell loop
// ("for ...; do a; b; done") on its own line.
func loopLines(cmd string) string {
	head, body, ok := strings.Cut(cmd, "; do ")
	if !ok {
		return cmd
	}
	body = strings.TrimSuffix(body, "; done")
	return head + "; do\n  " + strings.ReplaceAll(body, "; ", "\n  ") + "\ndone"
}

// JSON summary.

type jsonSample struct {
	Name   string   `json:"name"`
	Procs  int      `json:"gomaxprocs"`
	Unit   string   `json:"unit"`
	Median float64  `json:"median"`
	Lo     *float64 `json:"lo"` // the confidence interval; null if infinite (too few samples)
	Hi     *float64 `json:"hi"`
	N      int      `json:"n"`
	Text   string   `json:"text"` // as on the page
}

type jsonComparison struct {
	Section     string     `json:"section"`
	What        string     `json:"what"`
	A           string     `json:"a"` // column headings
	B           string     `json:"b"`
	ASample     jsonSample `json:"a_sample"`
	BSample     jsonSample `json:"b_sample"`
	Ratio       *float64   `json:"ratio"` // a's median ÷ b's; null if b's is 0
	P           float64    `json:"p"`
	Significant bool       `json:"significant"`
	Versus      bool       `json:"versus"` // a another way, b timingwheel
	Text        string     `json:"text"`   // as on the page
}

// finite is v, or nil for JSON's sake if v is ±Inf or NaN.
func finite(v float64) *float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return nil
	}
	return &v
}

func jsonOf(s *sample) jsonSample {
	procs, _ := strconv.Atoi(s.procs)
	return jsonSample{s.name, procs, s.unit, s.sum.Center, finite(s.sum.Lo), finite(s.sum.Hi), s.n(), s.String()}
}

// summaryJSON is benchmarks.json: the run, every comparison on the page
// and every sample.
func (d *doc) summaryJSON() ([]byte, error) {
	out := struct {
		Commit      string           `json:"commit"`
		Dirty       []string         `json:"dirty"`
		Date        string           `json:"date"`
		Rounds      string           `json:"rounds"`
		Benchtime   string           `json:"benchtime"`
		Smoke       string           `json:"smoke"` // why this is not a full run, or ""
		Comparisons []jsonComparison `json:"comparisons"`
		Samples     []jsonSample     `json:"samples"`
	}{Commit: d.m["commit"], Date: d.m["date"], Rounds: d.m["rounds"], Benchtime: d.m["benchtime"], Smoke: d.smoke()}
	if d.m["dirty"] != "" {
		out.Dirty = strings.Split(d.m["dirty"], ",")
	}
	for _, c := range d.cmps {
		out.Comparisons = append(out.Comparisons, jsonComparison{c.section, c.what, c.aHead, c.bHead, jsonOf(c.a), jsonOf(c.b),
			finite(c.ratio), c.c.P, significant(c.c), c.versus, ratioText(c.ratio, c.c)})
	}
	for _, k := range d.res.order {
		out.Samples = append(out.Samples, jsonOf(d.res.get(k.name, k.procs, k.unit)))
	}
	return json.MarshalIndent(out, "", "  ")
}
