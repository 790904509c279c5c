// Command report runs every benchmark of package bench and writes
// docs/benchmarks.md: what was measured, the numbers (medians, and ratios
// against Go's runtime timers taken within the same run), the machine, the
// exact commands, and two plots: churn cost against the number of live
// timers (docs/churn.png) and throughput at one and two cores
// (docs/scaling.png).
//
// Run it from the bench module; the defaults are the full run:
//
//	cd bench && go run ./cmd/report
//
// It runs -count rounds. A round is one go test process per group (see
// groups): the timed groups with -count=1 -benchtime=<-benchtime>, the
// groups that take one measurement per process with -benchtime=1x. Rounds
// interleave the samples, so that a slow spell on a shared machine does not
// fall on one implementation's samples only; and each one-shot sample comes
// from a fresh process, because the runtime's first 10^6 timers or
// goroutines in a process cost more than later ones, and users pay for the
// first. Groups with -cpu 1,2 run every benchmark at GOMAXPROCS=1 and 2.
//
// Benchmarks that need a newer library (build tags idleconn,
// parallelcallbacks) are added when they compile against the library
// (-tags auto), and left out otherwise; the report says which ran.
//
// For a quick check of the whole pipeline (numbers meaningless):
//
//	cd bench && go run ./cmd/report -count 1 -benchtime 100x
//
// With -in it skips running and rebuilds the documents from saved output.
// Paths in flags are relative to the repository root.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// benchstatPkg is pinned so that the tables do not change format under us.
// It is run with "go run pkg@version", which leaves bench/go.mod alone.
const benchstatPkg = "golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"

// A group is one go test process per round.
type group struct {
	name  string
	bench string // -bench regexp
	cpu   string // -cpu list
	once  bool   // -benchtime=1x: one measurement per process
	times string // if set, -benchtime=<times>x: that many measurements per process, averaged
}

// groups is the full run. The one-shot groups that measure heap keep apart
// what would see the runtime's timer heaps already grown by an earlier
// benchmark in the same process.
var groups = []group{
	{"scaling", `^Benchmark(ArmStopParallel|ResetParallel|TimeoutsParallel|ByValue|Heartbeat|IdleConnRead)$`, "1,2", false, ""},
	{"single", `^Benchmark(Churn|Reset|ResetAt|Advance)$`, "2", false, ""},
	{"heap-expiry", `^Benchmark(Heap|Expiry)$`, "2", true, ""},
	{"heap-keys", `^Benchmark(HeapByValue|HeapPerKey)$`, "2", true, ""},
	{"heap-conns", `^BenchmarkHeapPerConn$/^impl=(wheel|runtime)$/^api=(SetReadDeadline|Timeouts|Timer|IdleConn)$`, "2", true, ""},
	{"heap-conns-afterfunc", `^BenchmarkHeapPerConn$/^impl=runtime$/^api=AfterFunc$`, "2", true, ""},
	{"expiry-1", `^BenchmarkSlowExpiry$`, "1", true, ""},
	{"expiry-2", `^BenchmarkSlowExpiry$`, "2", true, ""},
	// A stall sample is the median of 7 large calls in one process: a
	// single call's longest wait is at the mercy of one scheduling hiccup.
	{"pauses-1", `^BenchmarkStall$`, "1", true, "7"},
	{"pauses-2", `^BenchmarkStall$`, "2", true, "7"},
}

// keepMarker starts the part of the report that cmd/report does not write:
// sections measured by commands of their own, each saying its command.
const keepMarker = "<!-- Sections below are measured by the commands they give; cmd/report keeps them as they are. -->"

// optionalTags are build tags that add benchmarks of library features that
// are newer than some library versions.
var optionalTags = []string{"idleconn", "parallelcallbacks", "idleevents"}

func main() {
	log.SetFlags(0)
	log.SetPrefix("report: ")
	var (
		count     = flag.Int("count", 6, "rounds, i.e. samples per benchmark (6 is the fewest for which benchstat gives a 95% confidence interval)")
		benchtime = flag.String("benchtime", "0.5s", "go test -benchtime of the timed groups")
		only      = flag.String("groups", "", "run only the groups whose name matches this regexp")
		tags      = flag.String("tags", "auto", `build tags: "auto" adds each optional tag that compiles, "" none, or a comma-separated list`)
		procs     = flag.Int("procs", 2, "GOMAXPROCS of the go test processes (-cpu sets it per benchmark)")
		in        = flag.String("in", "", "read saved results from this file instead of running")
		raw       = flag.String("raw", "bench/results/latest.txt", "where to save the raw results")
		md        = flag.String("md", "docs/benchmarks.md", "markdown report to write")
		churnPNG  = flag.String("plot", "docs/churn.png", "churn plot to write")
		scalePNG  = flag.String("scaling-plot", "docs/scaling.png", "scaling plot to write")
		before    = flag.String("stall-before", "bench/results/stall-before.txt", "BenchmarkStall on an earlier library commit (bench/stall_at.sh), shown beside this run's if the file exists")
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

	if *in == "" {
		tagList := resolveTags(benchDir, *tags)
		var round [][]string
		for _, g := range groups {
			if *only != "" && !regexp.MustCompile(*only).MatchString(g.name) {
				continue
			}
			args := []string{"test", "-run=^$", "-bench=" + g.bench, "-cpu=" + g.cpu, "-count=1", "-timeout=60m"}
			if g.times != "" {
				args = append(args, "-benchtime="+g.times+"x")
			} else if g.once {
				args = append(args, "-benchtime=1x")
			} else if *benchtime != "" {
				args = append(args, "-benchtime="+*benchtime)
			}
			if len(tagList) > 0 {
				args = append(args, "-tags="+strings.Join(tagList, ","))
			}
			round = append(round, append(args, "."))
		}
		wakeArgs := []string{"test", "-run=^TestWakeups$", "-count=1", "-v", "."}

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
			return fmt.Sprintf("GOMAXPROCS=%d go %s", *procs, strings.Join(quoted, " "))
		}
		var cmds []string
		for _, args := range round {
			cmds = append(cmds, shell(args))
		}
		m["bench-command"] = fmt.Sprintf("cd bench && for round in $(seq %d); do %s; done", *count, strings.Join(cmds, "; "))
		m["wakeups-command"] = "cd bench && " + shell(wakeArgs)
		m["tags"] = strings.Join(tagList, ",")
		m["rounds"] = strconv.Itoa(*count)
		m["benchtime"] = *benchtime
		m["fd-limit"] = output(root, "sh", "-c", "ulimit -n")
		*in = abs(*raw)
		start := time.Now()
		if err := runAll(benchDir, *in, m, *procs, *count, round, wakeArgs); err != nil {
			log.Fatal(err)
		}
		if err := appendMeta(*in, "duration", time.Since(start).Round(time.Second).String()); err != nil {
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
	if b, err := os.ReadFile(abs(*before)); err == nil {
		r := parse(string(b))
		res.stallBefore = &r
		res.stallBeforeHead, _, _ = strings.Cut(string(b), "\n")
	}
	res.rawRel, _ = filepath.Rel(root, *in)
	res.rawRel = filepath.ToSlash(res.rawRel)

	tables, err := benchstatTables(benchDir, *in, res)
	if err != nil {
		log.Fatal(err)
	}
	rel := func(png string) string {
		r, _ := filepath.Rel(filepath.Dir(abs(*md)), abs(png))
		return filepath.ToSlash(r)
	}
	plots := map[string]string{}
	if len(res.familyKeys("Churn")) > 0 {
		if err := churnPlot(res, abs(*churnPNG)); err != nil {
			log.Fatal(err)
		}
		plots["churn"] = rel(*churnPNG)
	}
	if ok, err := scalingPlot(res, abs(*scalePNG)); err != nil {
		log.Fatal(err)
	} else if ok {
		plots["scaling"] = rel(*scalePNG)
	}
	doc := parseMeta(string(data)).markdown(res, tables, plots)
	// Sections measured by commands of their own (the newer features'
	// benchmarks) follow keepMarker; a report keeps them as they are.
	if old, err := os.ReadFile(abs(*md)); err == nil {
		if i := strings.Index(string(old), keepMarker); i >= 0 {
			doc = strings.TrimRight(doc, "\n") + "\n\n" + string(old[i:])
		}
	}
	if err := os.MkdirAll(filepath.Dir(abs(*md)), 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(abs(*md), []byte(doc), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %s", *md)
}

// resolveTags turns the -tags flag into a list; "auto" keeps each optional
// tag with which the benchmarks compile against this library.
func resolveTags(benchDir, flagValue string) []string {
	if flagValue != "auto" {
		if flagValue == "" {
			return nil
		}
		return strings.Split(flagValue, ",")
	}
	var tags []string
	for _, tag := range optionalTags {
		cmd := exec.Command("go", "vet", "-tags="+tag, ".")
		cmd.Dir = benchDir
		if out, err := cmd.CombinedOutput(); err != nil {
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			log.Printf("leaving out -tags %s: it does not build against this library (%s)", tag, lines[len(lines)-1])
			continue
		}
		log.Printf("adding -tags %s", tag)
		tags = append(tags, tag)
	}
	return tags
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

// appendMeta adds "# key: value" to the end of the results file; parseMeta
// reads such lines wherever they are.
func appendMeta(path, key, value string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "# %s: %s\n", key, value); err != nil {
		f.Close()
		return err
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

// benchstat

// benchstatArgs are the column options per family: the implementations in
// implOrder, or for the connection benchmarks, whose rows differ by api and
// implementation, the apis side by side.
func benchstatArgs(res results, fam string) []string {
	switch fam {
	case "Heartbeat", "HeapPerConn":
		return []string{"-col", "/api@(SetReadDeadline AfterFunc Timeouts Timer IdleConn)", "-ignore", "/impl"}
	}
	var impls []string
	for _, base := range res.familyBases(fam) {
		for _, impl := range res.impls(base) {
			if !slices.Contains(impls, impl) {
				impls = append(impls, impl)
			}
		}
	}
	slices.SortFunc(impls, func(a, b string) int { return implRank(a) - implRank(b) })
	return []string{"-col", "/impl@(" + strings.Join(impls, " ") + ")"}
}

func benchstatTables(benchDir, in string, res results) (map[string]string, error) {
	tables := map[string]string{}
	for _, fam := range res.families {
		args := append([]string{"run", benchstatPkg}, benchstatArgs(res, fam)...)
		args = append(args, "-filter", ".name:"+fam, in)
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

// implOrder is the column order wherever implementations sit side by side:
// the runtime is the baseline.
var implOrder = []string{"runtime", "runtime-reused", "raw", "wheel", "wheel-parallel", "idleconn", "gozero"}

func implRank(impl string) int {
	if i := slices.Index(implOrder, impl); i >= 0 {
		return i
	}
	return len(implOrder)
}
