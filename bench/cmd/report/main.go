// Command report runs the benchmarks of package bench and writes
// docs/benchmarks.md: what was measured, at which commit, on which machine,
// with which commands; every number as a median with its 95% confidence
// interval, and every comparison as a ratio of medians with the p-value of
// a Mann-Whitney U-test ("~" when it cannot tell the two apart at α=0.05),
// as benchstat computes them (golang.org/x/perf's benchfmt, benchmath and
// benchunit). Beside the page it writes docs/benchmarks.json, the same
// numbers for scripts, and two plots (docs/churn.png, docs/scaling.png).
//
// Run it from the bench module; the defaults are the full run:
//
//	cd bench && go run ./cmd/report
//
// It runs -count rounds. A round is one go test process per group (see
// groups): the timed groups with -benchtime=<-benchtime>, the groups that
// take one measurement per process with -benchtime=1x. Rounds interleave the
// samples, so that a slow spell on a shared machine does not fall on one
// implementation's samples only; and each one-shot sample comes from a
// fresh process, because the runtime's first 10^6 timers or goroutines in a
// process cost more than later ones, and users pay for the first.
//
// Benchmarks that need an optional build tag (idleconn, parallelcallbacks,
// idleevents) are added when they compile against the library (-tags auto).
//
// A quick check of the pipeline, a few groups, outputs out of the tree (the
// page then says in its first line that it is a short run; with -benchtime
// Nx, BenchmarkAdvance in group single runs N Advances through 10^6 timers):
//
//	cd bench && go run ./cmd/report -count 1 -benchtime 100x -groups '^(context|periodic|heap-keys)$' -md /tmp/b/benchmarks.md -raw /tmp/b/raw.txt
//
// With -in it skips running and rebuilds the page from saved output. With
// -check README.md it only checks that every number the README quotes from
// the page (between <!-- benchmarks.md --> and <!-- /benchmarks.md -->) is
// on the page. Paths in flags are relative to the repository root.
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
	"strconv"
	"strings"
	"time"
)

// A group is one go test process per round.
type group struct {
	name  string
	bench string // -bench regexp
	cpu   string // -cpu list
	times string // "": -benchtime=<-benchtime>; "N": -benchtime=Nx, N measurements per process
	tags  string // the optional build tag the group needs, if any
}

// groups is the full run. The one-shot groups that measure heap keep apart
// what would see the runtime's timer heaps already grown by an earlier
// benchmark in the same process.
var groups = []group{
	{"scaling", `^Benchmark(ArmStopParallel|ResetParallel|TimeoutsParallel|ByValue|Heartbeat|IdleConnRead)$`, "1,2", "", ""},
	{"server", `^BenchmarkServer(Reset|ConnRead)$`, "1,2", "", ""},
	{"single", `^Benchmark(Churn|Reset|ResetAt|Advance)$`, "2", "", ""},
	{"context", `^BenchmarkWithTimeout`, "2", "", ""},
	{"periodic", `^BenchmarkPeriodicArmStop$`, "2", "", ""},
	{"idleevents", `^BenchmarkIdleEvents(Rearm|IO)$`, "2", "", "idleevents"},
	{"heap-expiry", `^Benchmark(Heap|Expiry)$`, "2", "1", ""},
	{"heap-keys", `^Benchmark(HeapByValue|HeapPerKey)$`, "2", "1", ""},
	{"heap-periodic", `^BenchmarkHeapPeriodic$`, "2", "1", ""},
	{"heap-conns", `^BenchmarkHeapPerConn$/^impl=(wheel|runtime)$/^api=(SetReadDeadline|Timeouts|Timer|IdleConn)$`, "2", "1", ""},
	{"heap-conns-afterfunc", `^BenchmarkHeapPerConn$/^impl=runtime$/^api=AfterFunc$`, "2", "1", ""},
	{"heap-idleevents", `^BenchmarkHeapIdleEvents$/^impl=wheel$`, "2", "1", "idleevents"},
	{"heap-idleevents-ticker", `^BenchmarkHeapIdleEvents$/^impl=runtime$/^api=Ticker\+SetReadDeadline$`, "2", "1", "idleevents"},
	{"heap-idleevents-goroutine", `^BenchmarkHeapIdleEvents$/^impl=runtime$/^api=Ticker\+SetReadDeadline\+goroutine$`, "2", "1", "idleevents"},
	{"expiry-1", `^BenchmarkSlowExpiry$`, "1", "1", ""},
	{"expiry-2", `^BenchmarkSlowExpiry$`, "2", "1", ""},
	// A stall sample is the median of 7 large calls in one process: a
	// single call's longest wait is at the mercy of one scheduling hiccup.
	{"pauses-1", `^BenchmarkStall$`, "1", "7", ""},
	{"pauses-2", `^BenchmarkStall$`, "2", "7", ""},
}

// optionalTags are build tags that add benchmarks of library features that
// are newer than some library versions.
var optionalTags = []string{"idleconn", "parallelcallbacks", "idleevents"}

// fullRounds is the fewest rounds for which benchmath gives a 95%
// confidence interval of a median; fewer make a smoke run.
const fullRounds = 6

// keepMarker starts the part of the page that cmd/report does not write:
// sections measured by commands of their own, each saying its command.
const keepMarker = "<!-- Sections below are measured by the commands they give; cmd/report keeps them as they are. -->"

func main() {
	log.SetFlags(0)
	log.SetPrefix("report: ")
	var (
		count     = flag.Int("count", fullRounds, "rounds, i.e. samples per benchmark")
		benchtime = flag.String("benchtime", "0.5s", "go test -benchtime of the timed groups")
		only      = flag.String("groups", "", "run only the groups whose name matches this regexp (a partial run is marked as one on the page)")
		tags      = flag.String("tags", "auto", `build tags: "auto" adds each optional tag that compiles, "" none, or a comma-separated list`)
		procs     = flag.Int("procs", 2, "GOMAXPROCS of the go test processes (-cpu sets it per benchmark)")
		in        = flag.String("in", "", "read saved results from this file instead of running")
		raw       = flag.String("raw", "bench/results/latest.txt", "where to save the raw results")
		md        = flag.String("md", "docs/benchmarks.md", "page to write; benchmarks.json, churn.png and scaling.png go beside it")
		before    = flag.String("stall-before", "bench/results/stall-before.txt", "BenchmarkStall on an earlier library commit (bench/stall_at.sh), shown beside this run's if the file exists")
		check     = flag.String("check", "", "check that the numbers this file quotes from the page (-md) are on it, and exit")
	)
	flag.Parse()

	root, err := repoRoot()
	if err != nil {
		log.Fatal(err)
	}
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(root, p)
	}
	if *check != "" {
		if err := checkFiles(abs(*check), abs(*md)); err != nil {
			log.Fatal(err)
		}
		log.Printf("every number %s quotes from %s is on it", *check, *md)
		return
	}

	if *in == "" {
		if *only != "" {
			if _, err := regexp.Compile(*only); err != nil {
				log.Fatalf("-groups: %v", err)
			}
		}
		*in = abs(*raw)
		start := time.Now()
		if err := run(root, *in, *count, *benchtime, *only, *tags, *procs); err != nil {
			log.Fatal(err)
		}
		if err := appendMeta(*in, "duration", time.Since(start).Round(time.Second).String()); err != nil {
			log.Fatal(err)
		}
	} else {
		*in = abs(*in)
	}

	res, err := readFile(*in)
	if err != nil {
		log.Fatal(err)
	}
	if len(res.order) == 0 {
		log.Fatalf("no benchmark results in %s", *in)
	}
	if res.rawRel = relTo(root, *in); strings.HasPrefix(res.rawRel, "../") {
		res.rawRel = *in // outside the repository
	}
	var old *results
	if o, err := readFile(abs(*before)); err == nil {
		old = o
	}
	page := abs(*md)
	dir := filepath.Dir(page)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	plots := map[string]string{}
	if ok, err := churnPlot(res, filepath.Join(dir, "churn.png")); err != nil {
		log.Fatal(err)
	} else if ok {
		plots["churn"] = "churn.png"
	}
	if ok, err := scalingPlot(res, filepath.Join(dir, "scaling.png")); err != nil {
		log.Fatal(err)
	} else if ok {
		plots["scaling"] = "scaling.png"
	}
	d := newDoc(res, old, relTo(dir, root), plots)
	text := d.page()
	if prev, err := os.ReadFile(page); err == nil {
		text = keep(text, string(prev))
	}
	if err := os.WriteFile(page, []byte(text), 0o644); err != nil {
		log.Fatal(err)
	}
	js, err := d.summaryJSON()
	if err != nil {
		log.Fatal(err)
	}
	jsonPath := strings.TrimSuffix(page, filepath.Ext(page)) + ".json"
	if err := os.WriteFile(jsonPath, js, 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %s and %s", page, jsonPath)
}

// keep appends to the new page the sections of the old one that follow
// keepMarker (measured by commands of their own), except those whose
// heading the new page has: the report measures them now.
func keep(page, old string) string {
	i := strings.Index(old, keepMarker)
	if i < 0 {
		return page
	}
	kept := []string{keepMarker + "\n"}
	for _, sec := range strings.SplitAfter(old[i+len(keepMarker):], "\n## ")[1:] {
		sec = "## " + strings.TrimSuffix(sec, "## ")
		title, _, _ := strings.Cut(sec, "\n")
		if strings.Contains(page, "\n"+title+"\n") {
			log.Printf("dropping the kept section %q: the report measures it now", title)
			continue
		}
		kept = append(kept, strings.TrimRight(sec, "\n")+"\n")
	}
	return strings.TrimRight(page, "\n") + "\n\n" + strings.Join(kept, "\n")
}

// run runs -count rounds of the groups and the wake-up count, and saves
// their output under a header describing the run.
func run(root, path string, rounds int, benchtime, only, tagFlag string, procs int) error {
	benchDir := filepath.Join(root, "bench")
	tagList := resolveTags(benchDir, tagFlag)
	var cmds [][]string
	for _, g := range groups {
		if only != "" && !regexp.MustCompile(only).MatchString(g.name) {
			continue
		}
		if g.tags != "" && !strings.Contains(","+strings.Join(tagList, ",")+",", ","+g.tags+",") {
			log.Printf("leaving out group %s: it needs -tags %s", g.name, g.tags)
			continue
		}
		args := []string{"test", "-run=^$", "-bench=" + g.bench, "-cpu=" + g.cpu, "-count=1", "-timeout=60m"}
		if g.times != "" {
			args = append(args, "-benchtime="+g.times+"x")
		} else if benchtime != "" {
			args = append(args, "-benchtime="+benchtime)
		}
		if len(tagList) > 0 {
			args = append(args, "-tags="+strings.Join(tagList, ","))
		}
		cmds = append(cmds, append(args, "."))
	}
	if len(cmds) == 0 {
		return fmt.Errorf("-groups %q matches no group", only)
	}
	wakeArgs := []string{"test", "-run=^TestWakeups$", "-count=1", "-v", "."}
	shell := func(args []string) string {
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = shellQuote(a)
		}
		return fmt.Sprintf("GOMAXPROCS=%d go %s", procs, strings.Join(quoted, " "))
	}
	var lines []string
	for _, args := range cmds {
		lines = append(lines, shell(args))
	}

	commit, dirty := gitState(root)
	m := meta{
		"date":            time.Now().UTC().Format(time.RFC3339),
		"commit":          commit,
		"dirty":           dirty,
		"cpu-model":       procField("/proc/cpuinfo", "model name"),
		"nproc":           output(root, "nproc"),
		"memory":          procField("/proc/meminfo", "MemTotal"),
		"kernel":          output(root, "uname", "-sr"),
		"go":              output(benchDir, "go", "version"),
		"rounds":          strconv.Itoa(rounds),
		"benchtime":       benchtime,
		"groups":          only,
		"tags":            strings.Join(tagList, ","),
		"fd-limit":        output(root, "sh", "-c", "ulimit -n"),
		"report-command":  "cd bench && go run ./cmd/report" + quoteArgs(os.Args[1:]),
		"bench-command":   fmt.Sprintf("cd bench && for round in $(seq %d); do %s; done", rounds, strings.Join(lines, "; ")),
		"wakeups-command": "cd bench && " + shell(wakeArgs),
	}

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.WriteString(f, m.header()); err != nil {
		return err
	}
	for i := range rounds {
		for _, args := range cmds {
			log.Printf("round %d of %d: %s", i+1, rounds, shell(args))
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
			if _, err := io.WriteString(f, line); err != nil {
				return err
			}
		}
	}
	return f.Close()
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
		tags = append(tags, tag)
	}
	return tags
}

// gitState returns the commit checked out (git rev-parse HEAD) and the Go
// files and module files that differ from it or are not in it,
// comma-separated, or "" if none does: what would make the measured code
// differ from the commit's. Docs and results do not.
func gitState(root string) (commit, dirty string) {
	commit = output(root, "git", "rev-parse", "HEAD")
	st := output(root, "git", "status", "--porcelain", "--untracked-files=all", "--",
		":(glob)**/*.go", ":(glob)**/go.mod", ":(glob)**/go.sum")
	var files []string
	for line := range strings.Lines(st) {
		if f := strings.TrimSpace(line); len(f) > 3 {
			files = append(files, strings.TrimSpace(f[2:]))
		}
	}
	return commit, strings.Join(files, ",")
}

// meta is what a run records about itself in "# key: value" lines at the
// top of the raw results, so that -in can rebuild the page later.
type meta map[string]string

var metaKeys = []string{
	"date", "commit", "dirty", "cpu-model", "nproc", "memory", "kernel", "go",
	"rounds", "benchtime", "groups", "tags", "fd-limit",
	"report-command", "bench-command", "wakeups-command",
}

func (m meta) header() string {
	var b strings.Builder
	for _, k := range metaKeys {
		fmt.Fprintf(&b, "# %s: %s\n", k, m[k])
	}
	return b.String()
}

var metaLine = regexp.MustCompile(`^# ([a-z-]+): (.*)$`)

// appendMeta adds "# key: value" to the end of the results file; the
// reader takes such lines wherever they are.
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

// procField returns the value of the first "key : value" line of a /proc file.
func procField(path, key string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// shellQuote quotes s for a POSIX shell if it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\|&;<>()$`*?[]{}^!#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func quoteArgs(args []string) string {
	var b strings.Builder
	for _, a := range args {
		b.WriteString(" " + shellQuote(a))
	}
	return b.String()
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

// relTo is path relative to dir, with forward slashes.
func relTo(dir, path string) string {
	r, err := filepath.Rel(dir, path)
	if err != nil {
		return filepath.ToSlash(path)
	}
	return filepath.ToSlash(r)
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
