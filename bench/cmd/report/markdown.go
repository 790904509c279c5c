package main

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// meta is what a run records about itself in the "# key: value" header of
// the raw results file, so that -in can rebuild the report later.
type meta map[string]string

// metaKeys is the header order.
var metaKeys = []string{
	"date", "cpu-model", "nproc", "memory", "kernel", "go", "commit",
	"report-command", "bench-command", "wakeups-command",
}

func machineMeta(root, benchDir string) meta {
	m := meta{
		"nproc":  output(root, "nproc"),
		"kernel": output(root, "uname", "-sr"),
		"go":     output(benchDir, "go", "version"),
		"commit": output(root, "git", "rev-parse", "--short", "HEAD"),
	}
	if output(root, "git", "status", "--porcelain", "--untracked-files=no") != "" {
		m["commit"] += " (with uncommitted changes)"
	}
	m["cpu-model"] = procField("/proc/cpuinfo", "model name")
	m["memory"] = procField("/proc/meminfo", "MemTotal")
	return m
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

func (m meta) write(w *strings.Builder) {
	for _, k := range metaKeys {
		fmt.Fprintf(w, "# %s: %s\n", k, m[k])
	}
}

func parseMeta(data string) meta {
	m := meta{}
	for line := range strings.Lines(data) {
		rest, ok := strings.CutPrefix(line, "# ")
		if !ok {
			break
		}
		k, v, _ := strings.Cut(strings.TrimSpace(rest), ": ")
		m[k] = v
	}
	return m
}

// A target is one row of issue 4's table: runtime ÷ wheel of the median of
// unit in benchmark key (a prefix) must be at least ratio.
type target struct {
	what, key, unit string
	ratio           float64
	text            string
}

var targets = []target{
	{"`Timer.Reset` of a live timer to a later deadline (random order)", "BenchmarkReset/live=1000000/order=random", "ns/op", 4, ">= 4x faster, 0 allocs/op"},
	{"arm + Stop (`AfterFunc(d, f).Stop()`)", "BenchmarkChurn/live=1000000", "ns/op", 3, ">= 3x faster"},
	{"heap bytes per live timer (shared callback)", "BenchmarkHeap/live=1000000", "B/timer", 2.4, "<= 1/2.4 of the runtime's"},
	{"`Reset` from many goroutines (`b.RunParallel`)", "BenchmarkResetParallel/live=1000000", "ns/op", 3, ">= 3x faster"},
	{"CPU to fire 10^6 timers due within one second: first time in the process", "BenchmarkExpiry/timers=1000000/state=cold", "fire-cpu-sec/op", 15, ">= 15x less"},
	{"the same, a second time (the runtime reuses the goroutines the first left)", "BenchmarkExpiry/timers=1000000/state=warm", "fire-cpu-sec/op", 15, ">= 15x less"},
}

// familyUnits are the metrics the ratio table shows for each benchmark family;
// the others are in the benchstat tables, but mean little (see the notes).
var familyUnits = map[string][]string{
	"Churn":         {"ns/op", "B/op", "allocs/op"},
	"Reset":         {"ns/op", "B/op", "allocs/op"},
	"ResetAt":       {"ns/op", "B/op", "allocs/op"},
	"ResetParallel": {"ns/op", "B/op", "allocs/op"},
	"Heap":          {"B/timer"},
	"Expiry":        {"fire-cpu-sec/op", "cpu-sec/op", "wall-sec/op", "max-goroutines"},
	"Advance":       {"ns/timer"},
}

func (m meta) markdown(res results, tables map[string]string, plotRel string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	p("# Benchmarks\n\n")
	p("`timingwheel` side by side with Go's runtime timers (`time.AfterFunc`, one per item: what users\n")
	p("would otherwise write) and go-zero's `collection.TimingWheel` (github.com/zeromicro/go-zero v1.10.3).\n")
	p("The benchmarks are in [`bench/`](../bench) (a separate module); this page is written by\n")
	p("[`bench/cmd/report`](../bench/cmd/report) — rerun it rather than editing by hand.\n\n")
	p("Absolute numbers drift from run to run on shared VMs; ratios taken within one run hold.\n")
	p("Every ratio below compares medians from the same run.\n\n")

	p("## Run\n\n")
	p("| | |\n|---|---|\n")
	p("| date (UTC) | %s |\n", m["date"])
	p("| machine | %s CPUs (`nproc`), %s, %s RAM |\n", m["nproc"], m["cpu-model"], m["memory"])
	p("| kernel | %s |\n", m["kernel"])
	p("| Go | %s |\n", m["go"])
	p("| GOMAXPROCS | %s |\n", res.procs)
	p("| library commit | %s |\n", m["commit"])
	p("| raw output | [`%s`](../%s) |\n\n", res.rawRel, res.rawRel)
	p("Commands (the report command runs the others):\n\n```sh\n%s\n", m["report-command"])
	p("%s\n", m["bench-command"])
	p("%s\n```\n\n", m["wakeups-command"])

	p("## Targets (issue 4)\n\n")
	p("Each target is a ratio against `time.AfterFunc` in the same run, GOMAXPROCS=%s, 10^6 live timers.\n\n", res.procs)
	p("| what | target | runtime | timingwheel | runtime ÷ wheel | verdict |\n|---|---|--:|--:|--:|---|\n")
	for _, t := range targets {
		key := res.find(t.key)
		rt, wh := res.median(key, "runtime", t.unit), res.median(key, "wheel", t.unit)
		ratio := rt / wh
		verdict := "no data"
		switch {
		case math.IsNaN(ratio):
		case ratio >= t.ratio:
			verdict = "**met**"
		default:
			verdict = fmt.Sprintf("**missed**: %.2fx of %.4gx (wheel needs %.0f%% less)", ratio, t.ratio, 100*(1-ratio/t.ratio))
		}
		if strings.Contains(t.text, "0 allocs") {
			if a := res.median(key, "wheel", "allocs/op"); a != 0 {
				verdict += fmt.Sprintf("; **%.3g allocs/op, not 0**", a)
			} else {
				verdict += "; 0 allocs/op"
			}
		}
		p("| %s | %s | %s %s | %s %s | %s | %s |\n", t.what, t.text, num(rt), t.unit, num(wh), t.unit, times(ratio), verdict)
	}
	if idle := res.wakeup("wheel", "idle"); idle != nil {
		verdict := "**met**"
		if idle.wakeups != "0" {
			verdict = "**missed**: wakes while nothing is armed"
		}
		var ones []string
		for _, w := range res.wakeups {
			if w.impl != "wheel" || !strings.HasPrefix(w.scenario, "one-timer-") {
				continue
			}
			ones = append(ones, fmt.Sprintf("%s for one timer %s away", w.wakeups, strings.TrimPrefix(w.scenario, "one-timer-")))
			if n, _ := strconv.Atoi(w.wakeups); n > 3 {
				verdict = fmt.Sprintf("**missed**: %d wake-ups for one timer (it passes at most 3 levels)", n)
			}
		}
		p("| idle wake-ups over %s | none while nothing is armed; for one timer a minute away, at most one per level it cascades through (<= 3 with the default levels) | — | %s idle; %s | — | %s |\n",
			idle.window, idle.wakeups, strings.Join(ones, "; "), verdict)
	}
	p("\n")
	if key := res.find("BenchmarkResetAt/"); key != "" {
		rt := res.median(res.find("BenchmarkReset/live=1000000/order=random"), "runtime", "ns/op")
		at := res.median(key, "wheel", "ns/op")
		p("Beside the targets: with `ResetAt` and one clock read per batch of re-arms (`%s`), a\n", strings.TrimPrefix(key, "Benchmark"))
		p("heartbeat costs %s ns/op, %s less than the runtime's `Reset` in random order (which has\n", num(at), times(rt/at))
		p("no batched form).\n\n")
	}
	p("CPU for expiry is process CPU (user + system, all threads, GC included) from the end of arming until\n")
	p("the last callback ran; \"cpu-sec/op\" below also counts arming.\n\n")

	if keys := res.familyKeys("Expiry"); len(keys) > 0 {
		p("Every expiry sample, in run order (fire-cpu-sec/op, and in brackets max-goroutines). The\n")
		p("runtime's cost is bimodal: while goroutine creation keeps up with the expiries it needs about a\n")
		p("second of CPU and thousands of goroutines; once it falls behind, hundreds of thousands of\n")
		p("goroutines pile up and it needs several times more.")
		for _, key := range keys {
			gs := res.samples[key]["runtime"]["max-goroutines"]
			piled := 0
			for _, g := range gs {
				if g > 100_000 {
					piled++
				}
			}
			if len(gs) > 0 {
				p(" %s: %d of %d runtime samples passed 10^5 goroutines.", strings.TrimPrefix(key, "BenchmarkExpiry/timers=1000000/"), piled, len(gs))
			}
		}
		p("\n\n")
		p("| benchmark | impl | samples |\n|---|---|---|\n")
		for _, key := range keys {
			for _, impl := range implOrder {
				cpu, gs := res.samples[key][impl]["fire-cpu-sec/op"], res.samples[key][impl]["max-goroutines"]
				if len(cpu) == 0 {
					continue
				}
				var cells []string
				for i, v := range cpu {
					c := num(v)
					if i < len(gs) {
						c += fmt.Sprintf(" (%.0f)", gs[i])
					}
					cells = append(cells, c)
				}
				p("| %s | %s | %s |\n", strings.TrimPrefix(key, "Benchmark"), impl, strings.Join(cells, ", "))
			}
		}
		p("\n")
	}

	if plotRel != "" {
		p("## Churn: arm + Stop next to N live timers\n\n")
		p("![ns/op of AfterFunc(d, f).Stop() against the number of live timers, per implementation](%s)\n\n", plotRel)
	}

	p("## All results: medians, and ratios against the runtime\n\n")
	p("\"÷ wheel\" is the other implementation's median divided by timingwheel's: above 1 means timingwheel\n")
	p("is cheaper. Lower is better for every metric.\n\n")
	p("| benchmark | metric | runtime | timingwheel | go-zero | runtime ÷ wheel | go-zero ÷ wheel |\n|---|---|--:|--:|--:|--:|--:|\n")
	for _, key := range res.names {
		units := familyUnits[family(key)]
		for _, u := range units {
			rt, wh, gz := res.median(key, "runtime", u), res.median(key, "wheel", u), res.median(key, "gozero", u)
			if math.IsNaN(rt) && math.IsNaN(wh) && math.IsNaN(gz) {
				continue
			}
			p("| %s | %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(key, "Benchmark"), u,
				num(rt), num(wh), num(gz), times(rt/wh), times(gz/wh))
		}
	}
	p("\n")

	if len(res.wakeups) > 0 {
		p("## Idle wake-ups\n\n")
		p("Counted in a `testing/synctest` bubble (`TestWakeups`): fake time jumps whenever every goroutine\n")
		p("is blocked, so the window is exact. For timingwheel a wake-up is a distinct instant at which its\n")
		p("driver used the clock (a counting `clock.Clock` wrapper); for go-zero, a tick of its ticker. The\n")
		p("instant of arming (the caller's own clock read) is not counted. The runtime's timers have no\n")
		p("driver of their own to count.\n\n")
		p("| impl | scenario | window | wake-ups | clock calls | note |\n|---|---|--:|--:|--:|---|\n")
		for _, w := range res.wakeups {
			calls := w.calls
			if w.impl != "wheel" {
				calls = "—"
			}
			p("| %s | %s | %s | %s | %s | %s |\n", implLabel(w.impl), w.scenario, w.window, w.wakeups, calls, w.note)
		}
		p("\n")
	}

	p("## benchstat\n\n")
	p("`benchstat -col '/impl@(%s)' -filter .name:<family>` on the raw output: the runtime is the\n", strings.Join(implOrder, " "))
	p("base column, and the deltas are against it.\n\n")
	for _, fam := range res.families {
		p("### %s\n\n```\n%s```\n\n", fam, tables[fam])
	}

	p("## What each benchmark does\n\n")
	p("Live timers are armed 30–60 s out with one shared no-op callback (so no closure is allocated per\n")
	p("timer), and none fires while a benchmark runs. timingwheel runs with its defaults (1 ms tick,\n")
	p("levels 1000, 60, 60, 24) and its driver goroutine started (`h.Start()`).\n\n")
	p("- **Churn** `live=N`: arm one more timer 30–60 s out and stop it, next to N live timers.\n")
	p("- **Reset** `order=random|sequential`: re-arm one of 10^6 live timers to 90 s from now (later than\n")
	p("  its deadline: a heartbeat). The timers are picked in a precomputed random order, which is what\n")
	p("  heartbeats from many connections look like; the sequential order is the cache-friendly best case,\n")
	p("  shown so the numbers are honest (the runtime's Reset is several times cheaper in it).\n")
	p("- **ResetAt** (timingwheel only): Reset in random order through `ResetAt(deadline)`, reading the\n")
	p("  clock once per 64 re-arms, as an event loop handling a batch of heartbeats can.\n")
	p("- **ResetParallel**: Reset in random order from 8×GOMAXPROCS goroutines (`b.RunParallel`).\n")
	p("- **Heap** `B/timer`: `runtime.ReadMemStats` HeapAlloc after a GC, before and after arming 10^6\n")
	p("  timers, divided by 10^6. The handles callers keep (a pointer each; go-zero's boxed keys) are\n")
	p("  allocated before the first reading. Its ns/op, B/op and allocs/op count the arming and the GCs.\n")
	p("  One sample per fresh process: the runtime's per-P timer heaps keep their capacity once 10^6\n")
	p("  timers have been in them, so a second measurement in the same process would miss those bytes.\n")
	p("- **Expiry**: 10^6 timers with deadlines uniform over one second, starting 2 s after arming begins\n")
	p("  (so arming is done first), real clock. `fire-cpu-sec/op` is process CPU from the end of arming\n")
	p("  until the last callback; `wall-sec/op` is from the first deadline to the last callback (1 s is\n")
	p("  ideal); `max-goroutines` is sampled every 5 ms. Its ns/op includes arming and the 2 s lead.\n")
	p("  `state=cold` is the first mass expiry in a fresh process, `state=warm` the second in the same\n")
	p("  process, which reuses the goroutine structures the first one left.\n")
	p("- **Advance** (timingwheel only) `ns/timer`: 10^3 or 10^6 timers 30–60 s out on a fake clock, then\n")
	p("  only the Advance calls are timed. `drive=jump`: `clock.Mock.Add` past every deadline (untimed),\n")
	p("  then one Advance. `drive=next`: step a fake clock to each `h.Next()` and Advance there, as the\n")
	p("  driver does (a plain fake clock, because `clock.Mock.Set` sleeps 1 ms per call). Its ns/op,\n")
	p("  B/op and allocs/op count the arming.\n\n")
	p("### go-zero's TimingWheel, and how the benchmarks map onto it\n\n")
	p("- Created with a 1 ms interval (the resolution of timingwheel's default tick) and 60,000 slots, so\n")
	p("  that the 30–60 s live timers need no extra turns of the wheel.\n")
	p("- It is keyed: `SetTimer(key, value, d)` arms, `RemoveTimer(key)` stops, `MoveTimer(key, d)`\n")
	p("  re-arms. Keys are ints boxed ahead of time, so boxing is not measured; churn reuses one key.\n")
	p("- Every call is a send on an unbuffered channel to the wheel's own goroutine, which does the\n")
	p("  work; a loop of calls measures the hand-off plus the work.\n")
	p("- `RemoveTimer` only marks an entry; it stays in its slot until the wheel turns to it, so churn\n")
	p("  leaves garbage for 30–60 s.\n")
	p("- It has one callback for the whole wheel; due entries run sequentially in a new goroutine per\n")
	p("  tick. Its ticker fires every interval whether or not anything is armed.\n")
	p("- It takes durations only; expiry converts each deadline with `time.Until` (as for the runtime).\n")
	p("- Importing it pulls in go.uber.org/automaxprocs, which would lower GOMAXPROCS to a container's\n")
	p("  CPU quota at init; the runs set GOMAXPROCS explicitly, which it honours.\n")
	return b.String()
}

func (res results) wakeup(impl, scenario string) *wakeup {
	for i, w := range res.wakeups {
		if w.impl == impl && w.scenario == scenario {
			return &res.wakeups[i]
		}
	}
	return nil
}

// num formats a median for a table: no exponents, about 3 significant digits.
func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case v == 0:
		return "0"
	case math.Abs(v) >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case math.Abs(v) >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

// times formats a ratio.
func times(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "—"
	}
	if r >= 10 {
		return fmt.Sprintf("%.0fx", r)
	}
	return fmt.Sprintf("%.2fx", r)
}
