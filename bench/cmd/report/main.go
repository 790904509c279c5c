// Command report runs the comparison benchmarks of package bench and writes
// docs/benchmarks.md: benchstat tables, the ratios against Go's runtime timers
// for each target of issue 4, the machine and the exact commands, and a plot
// of churn cost against the number of live timers (docs/churn.png).
//
// Run it from the bench module:
//
//	cd bench && go run ./cmd/report [-count 6] [-bench 'Churn|Reset|Advance'] [-fresh 'Heap|Expiry']
//
// It runs -count rounds. Each round is one go test run of the -bench
// benchmarks with -count=1, then one of the -fresh benchmarks with
// -count=1 -benchtime=1x. Rounds interleave the samples, so that a slow
// spell on a shared machine does not fall on one implementation's samples
// only; and each -fresh sample comes from a fresh process, because the
// runtime's first 10^6 timers or goroutines in a process cost more than
// later ones, and users pay for the first.
//
// With -in it skips running and rebuilds the documents from saved output.
// Paths in flags are relative to the repository root.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"log"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// benchstatPkg is pinned so that the tables do not change format under us.
// It is run with "go run pkg@version", which leaves bench/go.mod alone.
const benchstatPkg = "golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"

// implOrder is the column order: the runtime is the baseline.
var implOrder = []string{"runtime", "wheel", "gozero"}

func main() {
	log.SetFlags(0)
	log.SetPrefix("report: ")
	var (
		count     = flag.Int("count", 6, "rounds, i.e. samples per benchmark (6 is the fewest for which benchstat gives a 95% confidence interval)")
		bench     = flag.String("bench", "Churn|Reset|Advance", "go test -bench regexp, run once per round")
		fresh     = flag.String("fresh", "Heap|Expiry", "go test -bench regexp, run once per round with -benchtime=1x")
		benchtime = flag.String("benchtime", "", "go test -benchtime, if set")
		procs     = flag.Int("procs", 2, "GOMAXPROCS for the benchmarks")
		in        = flag.String("in", "", "read saved results from this file instead of running")
		raw       = flag.String("raw", "bench/results/latest.txt", "where to save the raw results")
		md        = flag.String("md", "docs/benchmarks.md", "markdown report to write")
		png       = flag.String("plot", "docs/churn.png", "churn plot to write")
	)
	flag.Parse()

	root, err := repoRoot()
	if err != nil {
		log.Fatal(err)
	}
	benchDir := filepath.Join(root, "bench")
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(root, p)
	}

	// One round: the go test runs that give every benchmark one sample.
	var round [][]string
	if *bench != "" {
		args := []string{"test", "-run=^$", "-bench=" + *bench, "-count=1", "-timeout=60m"}
		if *benchtime != "" {
			args = append(args, "-benchtime="+*benchtime)
		}
		round = append(round, append(args, "."))
	}
	if *fresh != "" {
		round = append(round, []string{"test", "-run=^$", "-bench=" + *fresh, "-count=1", "-benchtime=1x", "-timeout=60m", "."})
	}
	wakeArgs := []string{"test", "-run=^TestWakeups$", "-count=1", "-v", "."}

	if *in == "" {
		m := machineMeta(root, benchDir)
		m["date"] = time.Now().UTC().Format(time.RFC3339)
		m["report-command"] = "cd bench && go run ./cmd/report"
		for _, a := range os.Args[1:] {
			m["report-command"] += " " + shellQuote(a)
		}
		shell := func(args []string) string {
			quoted := make([]string, len(args))
			for i, a := range args {
				quoted[i] = shellQuote(a)
			}
			return fmt.Sprintf("cd bench && GOMAXPROCS=%d go %s", *procs, strings.Join(quoted, " "))
		}
		var cmds []string
		for _, args := range round {
			cmds = append(cmds, strings.TrimPrefix(shell(args), "cd bench && "))
		}
		m["bench-command"] = fmt.Sprintf("cd bench && for round in $(seq %d); do %s; done", *count, strings.Join(cmds, "; "))
		m["wakeups-command"] = shell(wakeArgs)
		*in = abs(*raw)
		if err := runAll(benchDir, *in, m, *procs, *count, round, wakeArgs); err != nil {
			log.Fatal(err)
		}
	} else {
		*in = abs(*in)
	}

	data, err := os.ReadFile(*in)
	if err != nil {
		log.Fatal(err)
	}
	res := parse(string(data))
	if len(res.samples) == 0 {
		log.Fatalf("no benchmark results in %s", *in)
	}
	res.rawRel, _ = filepath.Rel(root, *in)
	res.rawRel = filepath.ToSlash(res.rawRel)

	tables, err := benchstatTables(benchDir, *in, res.families)
	if err != nil {
		log.Fatal(err)
	}
	plotRel := ""
	if len(res.familyKeys("Churn")) > 0 {
		if err := churnPlot(res, abs(*png)); err != nil {
			log.Fatal(err)
		}
		plotRel, _ = filepath.Rel(filepath.Dir(abs(*md)), abs(*png))
		plotRel = filepath.ToSlash(plotRel)
	}
	doc := parseMeta(string(data)).markdown(res, tables, plotRel)
	if err := os.MkdirAll(filepath.Dir(abs(*md)), 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(abs(*md), []byte(doc), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %s", *md)
}

// runAll runs the benchmarks and the wake-up count, and saves their output
// under a header describing the run.
func runAll(benchDir, path string, m meta, procs, rounds int, round [][]string, wakeArgs []string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var h strings.Builder
	m.write(&h)
	if _, err := f.WriteString(h.String()); err != nil {
		return err
	}
	for i := range rounds {
		for _, args := range round {
			log.Printf("round %d of %d: GOMAXPROCS=%d go %s", i+1, rounds, procs, strings.Join(args, " "))
			start := time.Now()
			if err := goCmd(benchDir, procs, io.MultiWriter(f, os.Stderr), args...); err != nil {
				return err
			}
			log.Printf("took %v", time.Since(start).Round(time.Second))
		}
	}
	log.Print(m["wakeups-command"])
	var out bytes.Buffer
	if err := goCmd(benchDir, procs, &out, wakeArgs...); err != nil {
		os.Stderr.Write(out.Bytes())
		return err
	}
	for line := range strings.Lines(out.String()) {
		if strings.HasPrefix(line, wakeupPrefix) {
			if _, err := f.WriteString(line); err != nil {
				return err
			}
		}
	}
	return f.Close()
}

// shellQuote quotes s for a POSIX shell if it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\|&;<>()$`*?[]{}^!#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// repoRoot walks up from the working directory to the directory that holds
// bench/go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "bench", "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run me inside the repository (no bench/go.mod above the working directory)")
		}
		dir = parent
	}
}

func goCmd(dir string, procs int, stdout io.Writer, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(procs))
	cmd.Stdout, cmd.Stderr = stdout, os.Stderr
	return cmd.Run()
}

func output(dir string, name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.TrimSpace(string(out))
}

// Parsing go test -bench output.

const wakeupPrefix = "Wakeups "

// results holds every sample of every metric, keyed by benchmark name with
// the impl=... element taken out (e.g. "BenchmarkChurn/live=1000"), then
// impl, then unit.
type results struct {
	samples  map[string]map[string]map[string][]float64
	names    []string          // benchmark keys in first-seen order
	families []string          // "Churn", "Reset", ... in first-seen order
	config   map[string]string // goos, cpu, ... as go test printed them
	procs    string            // GOMAXPROCS, from the -N name suffix
	wakeups  []wakeup
	rawRel   string // the results file, relative to the repository root
}

type wakeup struct {
	impl, scenario, window, wakeups, calls, note string
}

var (
	benchLine  = regexp.MustCompile(`^(Benchmark\S+?)(?:-(\d+))?\s+\d+\s+(.+)$`)
	wakeupLine = regexp.MustCompile(`impl=(\S+) scenario=(\S+) window=(\S+) wakeups=(\d+) clock-calls=(\d+) note="(.*)"`)
	configLine = regexp.MustCompile(`^([a-z]\S*): (.*)$`)
)

func parse(data string) results {
	res := results{samples: map[string]map[string]map[string][]float64{}, config: map[string]string{}}
	for line := range strings.Lines(data) {
		line = strings.TrimSpace(line)
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
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		key, impl := splitImpl(m[1])
		if m[2] != "" {
			res.procs = m[2]
		}
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

func (res results) median(key, impl, unit string) float64 {
	return median(res.samples[key][impl][unit])
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

// find returns the first benchmark key with the given prefix.
func (res results) find(prefix string) string {
	for _, k := range res.names {
		if strings.HasPrefix(k, prefix) {
			return k
		}
	}
	return ""
}

// benchstat

func benchstatTables(benchDir, in string, families []string) (map[string]string, error) {
	tables := map[string]string{}
	for _, fam := range families {
		args := []string{"run", benchstatPkg,
			"-col", "/impl@(" + strings.Join(implOrder, " ") + ")",
			"-filter", ".name:" + fam,
			in}
		cmd := exec.Command("go", args...)
		cmd.Dir = benchDir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("benchstat: %v\n%s", err, stderr.String())
		}
		tables[fam] = string(out)
	}
	return tables, nil
}

// The plot

func churnPlot(res results, path string) error {
	var lives []string
	for _, k := range res.familyKeys("Churn") {
		lives = append(lives, strings.TrimPrefix(k, "BenchmarkChurn/live="))
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Arm + Stop one timer next to N live timers (GOMAXPROCS=%s)", res.procs)
	p.X.Label.Text = "live timers"
	p.Y.Label.Text = "ns/op (median, bars: min–max)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = ticks125{}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	labels := make([]string, len(lives))
	for i, l := range lives {
		labels[i] = humanCount(l)
	}
	p.NominalX(labels...)
	for i, impl := range implOrder {
		var pts errPoints
		for j, l := range lives {
			xs := res.samples["BenchmarkChurn/live="+l][impl]["ns/op"]
			if len(xs) == 0 {
				continue
			}
			m := median(xs)
			pts.XYs = append(pts.XYs, plotter.XY{X: float64(j), Y: m})
			pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{m - slices.Min(xs), slices.Max(xs) - m})
		}
		if len(pts.XYs) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts.XYs)
		if err != nil {
			return err
		}
		c := implColor(i)
		line.Color, points.Color = c, c
		line.Width = vg.Points(1.5)
		points.Shape = plotutil.Shape(i)
		points.Radius = vg.Points(3)
		bars, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return err
		}
		bars.Color = c
		p.Add(line, points, bars)
		p.Legend.Add(implLabel(impl), line, points)
	}
	// Head room on the log axis for the legend, which sits top left.
	p.Y.Max *= 4
	p.Y.Min /= 1.5
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

// ticks125 labels a log axis at 1, 2 and 5 times the powers of ten.
type ticks125 struct{}

func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		for _, m := range []float64{1, 2, 5} {
			if v := m * math.Pow(10, e); v >= lo && v <= hi {
				ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
			}
		}
	}
	return ts
}

type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

func implColor(i int) color.Color {
	return []color.Color{
		color.RGBA{R: 0x44, G: 0x44, B: 0x44, A: 0xff}, // runtime: grey
		color.RGBA{R: 0x00, G: 0x72, B: 0xb2, A: 0xff}, // wheel: blue
		color.RGBA{R: 0xd5, G: 0x5e, B: 0x00, A: 0xff}, // gozero: orange
	}[i%3]
}

func implLabel(impl string) string {
	switch impl {
	case "runtime":
		return "runtime (time.AfterFunc)"
	case "wheel":
		return "timingwheel"
	case "gozero":
		return "go-zero TimingWheel"
	}
	return impl
}

func humanCount(s string) string {
	switch s {
	case "0":
		return "0"
	case "1000":
		return "10^3"
	case "100000":
		return "10^5"
	case "1000000":
		return "10^6"
	}
	return s
}
