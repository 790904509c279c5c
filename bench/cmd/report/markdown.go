package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// doc builds the markdown page.
type doc struct {
	strings.Builder
	res results
}

func (d *doc) p(format string, args ...any) { fmt.Fprintf(d, format, args...) }

// med is the median of unit for base at procs, formatted, or "—".
func (d *doc) med(base, procs, impl, unit string) string {
	return num(d.res.median(base, procs, impl, unit))
}

// ratio is a ÷ b of two medians, formatted.
func (d *doc) ratio(aBase, aImpl, bBase, bImpl, procs, unit string) string {
	return times(d.res.median(aBase, procs, aImpl, unit) / d.res.median(bBase, procs, bImpl, unit))
}

// speedup is the throughput at GOMAXPROCS=2 over that at 1, for ns/op.
func (d *doc) speedup(base, impl string) string {
	return times(d.res.median(base, "1", impl, "ns/op") / d.res.median(base, "2", impl, "ns/op"))
}

// A glanceRow is one line of the summary table.
type glanceRow struct {
	what           string
	rtBase, rtImpl string
	whBase, whImpl string
	procs, unit    string
}

var glance = []glanceRow{
	{"arm a timer 30–60 s out and stop it, one goroutine", "BenchmarkChurn/live=1000000", "runtime", "BenchmarkChurn/live=1000000", "wheel", "2", "ns/op"},
	{"the same from 8 goroutines per core", "BenchmarkArmStopParallel/live=1000000", "runtime", "BenchmarkArmStopParallel/live=1000000", "wheel", "2", "ns/op"},
	{"arm + Stop of a timer held by value (timingwheel) / `AfterFunc(d, f).Stop()` (runtime), one goroutine", "BenchmarkByValue/live=1000000/mode=loop", "runtime", "BenchmarkByValue/live=1000000/mode=loop", "wheel", "2", "ns/op"},
	{"re-arm a live timer (`Reset`), random order, one goroutine", "BenchmarkReset/live=1000000/order=random", "runtime", "BenchmarkReset/live=1000000/order=random", "wheel", "2", "ns/op"},
	{"the same from 8 goroutines per core, each in its own order", "BenchmarkResetParallel/live=1000000", "runtime", "BenchmarkResetParallel/live=1000000", "wheel", "2", "ns/op"},
	{"re-arm one of 10^6 keys from 8 goroutines per core: `Timeouts.Add` / sharded map of `*time.Timer`", "BenchmarkTimeoutsParallel/keys=1000000", "runtime", "BenchmarkTimeoutsParallel/keys=1000000", "wheel", "2", "ns/op"},
	{"heartbeat on one of 10,000 TCP connections: `Timer.Reset` of a held timer / `conn.SetReadDeadline`", "BenchmarkHeartbeat/api=SetReadDeadline/conns=10000", "runtime", "BenchmarkHeartbeat/api=Timer/conns=10000", "wheel", "2", "ns/op"},
	{"heap per live timer (`AfterFunc`, shared callback)", "BenchmarkHeap/live=1000000", "runtime", "BenchmarkHeap/live=1000000", "wheel", "2", "B/timer"},
	{"heap per `int` key of keyed timeouts", "BenchmarkHeapPerKey/keys=1000000", "runtime", "BenchmarkHeapPerKey/keys=1000000", "wheel", "2", "B/key"},
	{"CPU to fire 10^6 timers due within one second (first time in the process)", "BenchmarkExpiry/timers=1000000/state=cold", "runtime", "BenchmarkExpiry/timers=1000000/state=cold", "wheel", "2", "fire-cpu-sec/op"},
	{"10^5 callbacks of 2 µs each, deadlines spread over one second, real clock: how long after the last deadline the last one has run", "BenchmarkSlowExpiry/due=spread/timers=100000/callback=2us", "runtime", "BenchmarkSlowExpiry/due=spread/timers=100000/callback=2us", "wheel", "2", "lag-sec/op"},
	{"the same 10^5 all due at one instant", "BenchmarkSlowExpiry/due=burst/timers=100000/callback=2us", "runtime", "BenchmarkSlowExpiry/due=burst/timers=100000/callback=2us", "wheel", "2", "lag-sec/op"},
}

func (m meta) markdown(res results, tables map[string]string, plots map[string]string) string {
	d := &doc{res: res}
	p := d.p

	p("# Benchmarks\n\n")
	p("Measured %s (UTC) on library commit `%s`.\n\n", m["date"], m["commit"])
	if rounds, err := strconv.Atoi(m["rounds"]); err == nil && (rounds < 6 || strings.HasSuffix(m["benchtime"], "x")) {
		p("> **This page comes from a short check run** (%s round(s), `-benchtime %s`): it shows what is measured\n", m["rounds"], m["benchtime"])
		p("> and how it is presented, but its numbers are not measurements to rely on. Rerun the full command below.\n\n")
	}
	p("`timingwheel` side by side with Go's runtime timers (`time.AfterFunc` and friends: what you would\n")
	p("write without this library) and, in some tables, go-zero's `collection.TimingWheel`\n")
	p("(github.com/zeromicro/go-zero v1.10.3). The benchmarks are in [`bench/`](../bench), a separate Go\n")
	p("module; this page is written by [`bench/cmd/report`](../bench/cmd/report). To measure again on\n")
	p("your machine, from the repository root:\n\n")
	p("```sh\ncd bench && go run ./cmd/report\n```\n\n")
	if dur := m["duration"]; dur != "" {
		p("This run took %s. ", dur)
	}
	p("Absolute numbers drift from run to run on shared machines; ratios taken within one run hold,\n")
	p("and every ratio here compares medians from the same run. \"runtime ÷ timingwheel\" above 1 means\n")
	p("timingwheel costs less; lower is better for every metric.\n\n")

	d.run(m)
	d.glance()
	d.scaling(plots["scaling"])
	d.byValue()
	d.memory()
	d.connections()
	d.stall()
	d.expiry()
	if plots["churn"] != "" {
		p("## Arm + Stop next to N live timers\n\n")
		p("![ns/op of AfterFunc(d, f).Stop() against the number of live timers, per implementation](%s)\n\n", plots["churn"])
	}
	d.allResults()
	d.wakeups()
	if len(res.logs) > 0 {
		p("## Notes the benchmarks logged\n\n")
		p("Conditions a benchmark noticed during the run that make its sample less clean:\n\n")
		for _, l := range res.logs {
			p("- %s\n", l)
		}
		p("\n")
	}

	p("## benchstat\n\n")
	p("`benchstat -col /impl -filter .name:<family>` on the raw output (for the connection benchmarks,\n")
	p("`-col /api -ignore /impl`). The first column is the base, and the deltas are against it.\n\n")
	for _, fam := range res.families {
		p("### %s\n\n```\n%s```\n\n", fam, tables[fam])
	}
	d.methods()
	return d.String()
}

func (d *doc) run(m meta) {
	p := d.p
	p("## The run\n\n")
	p("| | |\n|---|---|\n")
	p("| date (UTC) | %s |\n", m["date"])
	p("| library commit | %s |\n", m["commit"])
	p("| machine | %s CPUs (`nproc`), %s, %s RAM |\n", m["nproc"], m["cpu-model"], m["memory"])
	p("| kernel | %s |\n", m["kernel"])
	p("| Go | %s |\n", m["go"])
	p("| rounds (samples per benchmark) | %s |\n", m["rounds"])
	p("| `-benchtime` of the timed benchmarks | %s |\n", m["benchtime"])
	tags := m["tags"]
	if tags == "" {
		tags = "none"
	}
	p("| optional benchmarks built in (`-tags`) | %s |\n", tags)
	p("| open-file limit (`ulimit -n`) | %s |\n", m["fd-limit"])
	if m["duration"] != "" {
		p("| duration | %s |\n", m["duration"])
	}
	p("| raw output | [`%s`](../%s) |\n\n", d.res.rawRel, d.res.rawRel)
	p("The report command runs these (one process per group and round, rounds interleaved):\n\n```sh\n%s\n", m["report-command"])
	p("%s\n", loopLines(m["bench-command"]))
	p("%s\n```\n\n", m["wakeups-command"])
}

func (d *doc) glance() {
	p := d.p
	p("## At a glance\n\n")
	p("GOMAXPROCS=2, next to 10^6 live timers armed 30–60 s out unless the row says otherwise.\n\n")
	p("| what | Go runtime | timingwheel | runtime ÷ timingwheel |\n|---|--:|--:|--:|\n")
	for _, r := range glance {
		rt := d.res.median(r.rtBase, r.procs, r.rtImpl, r.unit)
		wh := d.res.median(r.whBase, r.procs, r.whImpl, r.unit)
		if math.IsNaN(rt) && math.IsNaN(wh) {
			continue
		}
		p("| %s | %s %s | %s %s | %s |\n", r.what, num(rt), r.unit, num(wh), r.unit, times(rt/wh))
	}
	p("\n")
}

func (d *doc) scaling(plot string) {
	p := d.p
	var rows []scalingCase
	for _, c := range scalingCases {
		if len(d.res.procsOf(c.base)) > 1 {
			rows = append(rows, c)
		}
	}
	if len(rows) == 0 {
		return
	}
	p("## From one core to two\n\n")
	p("Each of these runs from 8 goroutines per GOMAXPROCS (`b.SetParallelism(8)`: 8 goroutines at\n")
	p("GOMAXPROCS=1, 16 at 2), next to 10^6 live timers, and ns/op is wall time per operation over all of\n")
	p("them. The speed-up is the throughput at GOMAXPROCS=2 divided by that at 1: 2x would be perfect\n")
	p("use of the second core; below 1x, the second core makes things slower (the goroutines contend).\n\n")
	if plot != "" {
		p("![throughput at GOMAXPROCS=1 and 2, runtime and timingwheel, per operation](%s)\n\n", plot)
	}
	p("| operation (runtime / timingwheel) | runtime ns/op, 1 → 2 | timingwheel ns/op, 1 → 2 | runtime ÷ timingwheel, 1 → 2 | runtime speed-up | timingwheel speed-up |\n")
	p("|---|--:|--:|--:|--:|--:|\n")
	for _, c := range rows {
		p("| %s | %s → %s | %s → %s | %s → %s | %s | %s |\n", c.what,
			d.med(c.base, "1", c.runtime, "ns/op"), d.med(c.base, "2", c.runtime, "ns/op"),
			d.med(c.base, "1", c.wheel, "ns/op"), d.med(c.base, "2", c.wheel, "ns/op"),
			d.ratio(c.base, c.runtime, c.base, c.wheel, "1", "ns/op"), d.ratio(c.base, c.runtime, c.base, c.wheel, "2", "ns/op"),
			d.speedup(c.base, c.runtime), d.speedup(c.base, c.wheel))
	}
	p("\n")
	if base := "BenchmarkResetParallel/live=1000000"; d.res.has(base, "2", "gozero") {
		p("go-zero's wheel does all its work on one goroutine behind a channel; its parallel Reset costs\n")
		p("%s ns/op at GOMAXPROCS=1 and %s at 2 (speed-up %s).\n\n",
			d.med(base, "1", "gozero", "ns/op"), d.med(base, "2", "gozero", "ns/op"), d.speedup(base, "gozero"))
	}
}

func (d *doc) byValue() {
	p := d.p
	bases := d.res.familyBases("ByValue")
	if len(bases) == 0 {
		return
	}
	p("## Timers held by value\n\n")
	p("A `timingwheel.Timer` can be a field of your own struct (a connection, a request): bind it once with\n")
	p("`t.Init(h, f)`, then `t.Reset(d)` arms it and `t.Stop()` disarms it, and neither allocates. Below,\n")
	p("arm + Stop of such a timer next to 10^6 live timers, against `time.AfterFunc(d, f).Stop()` (a new\n")
	p("runtime timer each time) and against a `*time.Timer` made once and reused with `Reset` + `Stop`, the\n")
	p("runtime's nearest equivalent. \"one goroutine\" is a plain loop; \"8 per core\" runs 8 goroutines per\n")
	p("GOMAXPROCS, each with its own timer. Cells: ns/op (allocs/op).\n\n")
	p("| loop | GOMAXPROCS | timingwheel, held timer | runtime, `AfterFunc(d, f).Stop()` | runtime, reused `*time.Timer` | `AfterFunc` ÷ held |\n|---|--:|--:|--:|--:|--:|\n")
	for _, base := range bases {
		mode := "one goroutine"
		if strings.HasSuffix(base, "mode=parallel") {
			mode = "8 per core"
		}
		for _, pr := range d.res.procsOf(base) {
			cell := func(impl string) string {
				return fmt.Sprintf("%s (%s)", d.med(base, pr, impl, "ns/op"), d.med(base, pr, impl, "allocs/op"))
			}
			p("| %s | %s | %s | %s | %s | %s |\n", mode, pr, cell("wheel"), cell("runtime"), cell("runtime-reused"),
				d.ratio(base, "runtime", base, "wheel", pr, "ns/op"))
		}
	}
	p("\n")
	var allocs []float64
	for _, base := range bases {
		for _, pr := range d.res.procsOf(base) {
			allocs = append(allocs, d.res.samples[base+"-"+pr]["wheel"]["allocs/op"]...)
		}
	}
	if len(allocs) > 0 {
		p("allocs/op of the held timer's Reset + Stop, highest over every sample: %s.\n\n", num(slices.Max(allocs)))
	}
}

func (d *doc) memory() {
	p := d.p
	type row struct{ what, rtBase, rtImpl, whBase, whImpl, unit, note string }
	rows := []row{
		{"per live timer armed with `AfterFunc` (shared callback)", "BenchmarkHeap/live=1000000", "runtime", "BenchmarkHeap/live=1000000", "wheel", "B/timer", "the `Timer` the library allocates, and the runtime's timer plus its share of the runtime's timer heap"},
		{"per timer held by value (`[]struct{ t timingwheel.Timer }`)", "", "", "BenchmarkHeapByValue/live=1000000", "wheel", "B/timer", "the slice the timers live in counts; in your own struct, this is what the field adds"},
		{"per `int` key of keyed timeouts", "BenchmarkHeapPerKey/keys=1000000", "runtime", "BenchmarkHeapPerKey/keys=1000000", "wheel", "B/key", "`Timeouts[int]` / a 64-shard `map[int]*time.Timer` with a `time.AfterFunc` closure over each key"},
	}
	var out []string
	for _, r := range rows {
		rt, wh := math.NaN(), d.res.median(r.whBase, "2", r.whImpl, r.unit)
		if r.rtBase != "" {
			rt = d.res.median(r.rtBase, "2", r.rtImpl, r.unit)
		}
		if math.IsNaN(rt) && math.IsNaN(wh) {
			continue
		}
		out = append(out, fmt.Sprintf("| %s | %s | %s | %s | %s |\n", r.what, num(rt), num(wh), times(rt/wh), r.note))
	}
	if len(out) == 0 {
		return
	}
	p("## Memory\n\n")
	p("Heap bytes (`runtime.ReadMemStats` HeapAlloc after `runtime.GC()`, before and after arming 10^6,\n")
	p("divided by 10^6), one sample per fresh process, GOMAXPROCS=2. Per connection: see the next section.\n\n")
	p("| what | Go runtime | timingwheel | runtime ÷ timingwheel | what is counted |\n|---|--:|--:|--:|---|\n")
	for _, l := range out {
		p("%s", l)
	}
	if gz := d.res.median("BenchmarkHeap/live=1000000", "2", "gozero", "B/timer"); !math.IsNaN(gz) {
		p("\ngo-zero's wheel: %s B per live timer.\n", num(gz))
	}
	p("\n")
}

func (d *doc) connections() {
	p := d.p
	hb := d.res.familyBases("Heartbeat")
	heap := d.res.familyBases("HeapPerConn")
	read := d.res.familyBases("IdleConnRead")
	if len(hb) == 0 && len(heap) == 0 && len(read) == 0 {
		return
	}
	p("## Idle timeouts of TCP connections\n\n")
	p("Open TCP connections over 127.0.0.1 (the far ends in a second process), one idle timeout each,\n")
	p("armed 30–60 s out; a heartbeat moves one connection's timeout to 90 s from now, connections taken\n")
	p("in random order. No other timers are live. The ways compared:\n\n")
	p("- `SetReadDeadline`: `conn.SetReadDeadline(time.Now().Add(idle))`, the net package's own deadline\n")
	p("  (a runtime timer inside each connection's poll descriptor);\n")
	p("- `AfterFunc`: a `time.AfterFunc` per connection that closes it, `Reset` on heartbeat;\n")
	p("- `Timeouts`: one `timingwheel.Timeouts[net.Conn]`, `Add(conn, idle)` on heartbeat;\n")
	p("- `Timer`: a `timingwheel.Timer` held in the per-connection state, `Reset(idle)` on heartbeat;\n")
	p("- `IdleConn`: `h.IdleConn(conn, idle)`, a wrapper whose `Read` re-arms the timeout itself.\n\n")
	for _, s := range d.res.skipped {
		p("Not measured: %s.\n\n", strings.Replace(s, ": ", " — ", 1))
	}
	apis := []struct{ api, impl string }{{"SetReadDeadline", "runtime"}, {"AfterFunc", "runtime"}, {"Timeouts", "wheel"}, {"Timer", "wheel"}, {"IdleConn", "wheel"}}
	var sizes []string
	for _, b := range hb {
		if _, size, ok := strings.Cut(b, "/conns="); ok && !slices.Contains(sizes, size) {
			sizes = append(sizes, size)
		}
	}
	var heapBase string
	if len(heap) > 0 {
		heapBase = heap[0] // one size
	}
	if len(sizes) > 0 || heapBase != "" {
		p("Heartbeat cost in ns/op")
		if heapBase != "" {
			_, n, _ := strings.Cut(heapBase, "/conns=")
			p(", and heap bytes each way adds per connection (%s connections, GOMAXPROCS=2; the connections and their poll descriptors are not counted)", n)
		}
		p(":\n\n| way | timers | ")
		for _, s := range sizes {
			p("%s conns, GOMAXPROCS=1 | %s conns, GOMAXPROCS=2 | ", s, s)
		}
		if heapBase != "" {
			p("heap B/conn |")
		}
		p("\n|---|---|")
		for range sizes {
			p("--:|--:|")
		}
		if heapBase != "" {
			p("--:|")
		}
		p("\n")
		for _, a := range apis {
			var cells []string
			any := false
			for _, s := range sizes {
				base := "BenchmarkHeartbeat/api=" + a.api + "/conns=" + s
				for _, pr := range []string{"1", "2"} {
					v := d.res.median(base, pr, a.impl, "ns/op")
					any = any || !math.IsNaN(v)
					cells = append(cells, num(v))
				}
			}
			if heapBase != "" {
				_, n, _ := strings.Cut(heapBase, "/conns=")
				v := d.res.median("BenchmarkHeapPerConn/api="+a.api+"/conns="+n, "2", a.impl, "B/conn")
				any = any || !math.IsNaN(v)
				cells = append(cells, num(v))
			}
			if !any {
				continue
			}
			who := "Go runtime"
			if a.impl == "wheel" {
				who = "timingwheel"
			}
			p("| `%s` | %s | %s |\n", a.api, who, strings.Join(cells, " | "))
		}
		p("\n")
		if a := d.res.median("BenchmarkHeartbeat/api=Timer/conns=10000", "2", "wheel", "ns/op"); !math.IsNaN(a) {
			p("At 10,000 connections and GOMAXPROCS=2, `SetReadDeadline` costs %s the held timer's `Reset`\n",
				times(d.res.median("BenchmarkHeartbeat/api=SetReadDeadline/conns=10000", "2", "runtime", "ns/op")/a))
			p("and `AfterFunc` + `Reset` %s; `Timeouts.Add` costs %s of it (a map lookup and a shard lock on top).\n\n",
				times(d.res.median("BenchmarkHeartbeat/api=AfterFunc/conns=10000", "2", "runtime", "ns/op")/a),
				times(d.res.median("BenchmarkHeartbeat/api=Timeouts/conns=10000", "2", "wheel", "ns/op")/a))
		}
	}
	if len(read) > 0 {
		p("### The Read path of `IdleConn`\n\n")
		var rawBase, idleBase string
		for _, b := range read {
			if d.res.has(b, "2", "raw") || d.res.has(b, "1", "raw") {
				rawBase = b
			}
		}
		idleBase = rawBase
		if !d.res.has(idleBase, "2", "idleconn") && !d.res.has(idleBase, "1", "idleconn") {
			p("Not measured in this run: the library build had no `IdleConn` (the benchmark is built with\n")
			p("`-tags idleconn`, which the report adds when it compiles). The plain connection's cost, for\n")
			p("reference: ")
			for _, pr := range d.res.procsOf(rawBase) {
				p("%s ns/op at GOMAXPROCS=%s; ", d.med(rawBase, pr, "raw", "ns/op"), pr)
			}
			p("a 512-byte Write then a 512-byte Read with data waiting.\n\n")
		} else {
			p("One 512-byte Write at the far end, then one 512-byte Read with data waiting (a 64 KiB backlog\n")
			p("keeps it so), on the plain connection and on the same connection wrapped by `IdleConn`, whose\n")
			p("Read also re-arms the timeout. The difference is what the wrapper adds to every Read.\n\n")
			p("| GOMAXPROCS | `net.Conn` ns/op | `IdleConn` ns/op | difference | allocs/op (IdleConn) |\n|--:|--:|--:|--:|--:|\n")
			for _, pr := range d.res.procsOf(rawBase) {
				raw, idle := d.res.median(rawBase, pr, "raw", "ns/op"), d.res.median(rawBase, pr, "idleconn", "ns/op")
				p("| %s | %s | %s | %s | %s |\n", pr, num(raw), num(idle), num(idle-raw), d.med(rawBase, pr, "idleconn", "allocs/op"))
			}
			p("\n")
		}
	}
}

func (d *doc) stall() {
	p := d.p
	bases := d.res.familyBases("Stall")
	if len(bases) == 0 {
		return
	}
	p("## Pauses while the wheel works through a full slot\n\n")
	p("N timers due within one second, 30 s out, all in one slot of the seconds wheel, on a `clock.Mock`.\n")
	p("One goroutine makes one large call; another loops `h.AfterFunc(time.Hour, f).Stop()` and times\n")
	p("every call. The calls:\n\n")
	p("- cascade: the clock moves to the start of the slot and `h.Advance()` moves all N timers down to\n")
	p("  the millisecond wheel (none fires yet);\n")
	p("- advance: the clock moves past the slot and `h.Advance()` cascades them and fires all N (no-op\n")
	p("  callbacks, which run without the lock held, so other calls get in between them);\n")
	p("- next: `h.Next()` looks through the slot for the earliest deadline.\n\n")
	p("\"longest wait\" and \"p99.9\" are over the arm + Stop calls that overlapped the large call; \"quiet\" is\n")
	p("the longest in the 20 ms before it, when the wheel was idle (garbage collection and scheduling show\n")
	p("up there too). Each process makes several large calls (`-benchtime=Nx`) and reports the median call's\n")
	p("figures; the table gives the median over the processes. \"worst\" is the largest share seen in any\n")
	p("call of any process. \"control\" is the same cascade while the other goroutine only allocates what\n")
	p("`AfterFunc` allocates and never calls the wheel: its longest wait (median, and the worst share) is\n")
	p("what this machine imposes on a busy goroutine when both CPUs are busy, whatever the wheel does (the\n")
	p("OS running another thread in its place for a few milliseconds, now and then). At GOMAXPROCS=1 both\n")
	p("goroutines share one CPU: a wait then includes the other goroutine's turn, and when the scheduler\n")
	p("preempts the large call, the call's time includes the timing goroutine's turn as well.\n\n")
	p("| call | timers | GOMAXPROCS | call ms | longest wait µs | p99.9 µs | longest ÷ call | worst longest ÷ call | calls overlapping | quiet longest µs | control: longest µs / worst ÷ call |\n")
	p("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, base := range bases {
		op, _, _ := strings.Cut(strings.TrimPrefix(base, "BenchmarkStall/op="), "/")
		_, n, _ := strings.Cut(base, "timers=")
		for _, pr := range d.res.procsOf(base) {
			if !d.res.has(base, pr, "wheel") {
				continue
			}
			control := "–"
			if d.res.has(base, pr, "control") {
				control = d.med(base, pr, "control", "max-wait-us") + " / " + num(d.res.max(base, pr, "control", "worst-max-wait/call"))
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", op, humanCount(n), pr,
				d.med(base, pr, "wheel", "call-ms"), d.med(base, pr, "wheel", "max-wait-us"), d.med(base, pr, "wheel", "p99.9-wait-us"),
				d.med(base, pr, "wheel", "max-wait/call"), num(d.res.max(base, pr, "wheel", "worst-max-wait/call")),
				d.med(base, pr, "wheel", "calls-during"), d.med(base, pr, "wheel", "quiet-max-wait-us"), control)
		}
	}
	p("\n")
	d.stallBefore(bases)
}

// stallBefore shows BenchmarkStall on an earlier library commit beside this
// run's, if the report was given one (-stall-before).
func (d *doc) stallBefore(bases []string) {
	b := d.res.stallBefore
	if b == nil || len(b.familyBases("Stall")) == 0 {
		return
	}
	p := d.p
	p("### Before and after\n\n")
	p("The same benchmark on an earlier library commit (%s), run on this machine the same day with\n",
		strings.TrimPrefix(strings.TrimSpace(d.res.stallBeforeHead), "# "))
	p("`bench/stall_at.sh`: one lock for the whole hierarchy, held for a whole cascade or scan. Medians of\n")
	p("its samples; \"call after ÷ before\" compares the large call's own duration (the cost of the\n")
	p("cascade or scan) with this run's median.\n\n")
	p("| call | timers | GOMAXPROCS | call ms before | longest wait µs before | longest ÷ call before | longest ÷ call now | worst ÷ call before | worst ÷ call now | call after ÷ before |\n")
	p("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, base := range bases {
		op, _, _ := strings.Cut(strings.TrimPrefix(base, "BenchmarkStall/op="), "/")
		_, n, _ := strings.Cut(base, "timers=")
		for _, pr := range d.res.procsOf(base) {
			if !b.has(base, pr, "wheel") {
				continue
			}
			callBefore := b.median(base, pr, "wheel", "call-ms")
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", op, humanCount(n), pr,
				num(callBefore), num(b.median(base, pr, "wheel", "max-wait-us")), num(b.median(base, pr, "wheel", "max-wait/call")),
				d.med(base, pr, "wheel", "max-wait/call"), num(b.max(base, pr, "wheel", "worst-max-wait/call")),
				num(d.res.max(base, pr, "wheel", "worst-max-wait/call")), times(d.res.median(base, pr, "wheel", "call-ms")/callBefore))
		}
	}
	p("\n")
}

func (d *doc) expiry() {
	p := d.p
	cold := d.res.familyKeys("Expiry")
	slow := d.res.familyBases("SlowExpiry")
	if len(cold) == 0 && len(slow) == 0 {
		return
	}
	p("## Mass expiry\n\n")
	if len(cold) > 0 {
		p("### 10^6 timers due within one second, no-op callback\n\n")
		p("Real clock, timingwheel's driver running. CPU is process CPU (user + system, all threads, GC\n")
		p("included) from the end of arming until the last callback ran. Every sample, in run order\n")
		p("(fire-cpu-sec/op, and in brackets the most goroutines seen). The runtime starts a goroutine per\n")
		p("expiry: while goroutine creation keeps up it needs about a second of CPU and thousands of\n")
		p("goroutines; once it falls behind, hundreds of thousands pile up and it needs several times more.\n\n")
		p("| benchmark | impl | samples |\n|---|---|---|\n")
		for _, key := range cold {
			for _, impl := range []string{"runtime", "wheel", "gozero"} {
				cpu, gs := d.res.samples[key][impl]["fire-cpu-sec/op"], d.res.samples[key][impl]["max-goroutines"]
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
				p("| %s | %s | %s |\n", strings.TrimPrefix(key, "Benchmark"), implLabel(impl), strings.Join(cells, ", "))
			}
		}
		p("\n")
	}
	if len(slow) > 0 {
		p("### 10^5 timers, each callback burning 2 µs of CPU\n\n")
		p("A callback that does work, as closing a connection does. timingwheel runs callbacks one after\n")
		p("the other on the goroutine that advances it (or one per shard with parallel callbacks); the\n")
		p("runtime runs each callback in a goroutine of its own as its timer comes due, on every core.\n")
		p("Lag is the time from the last deadline until the last callback returned; CPU is process CPU\n")
		p("from the end of arming.\n\n")
		p("- **due=spread**: deadlines spread uniformly over one second, on the real clock, timingwheel's\n")
		p("  driver running: each implementation fires the timers as they come due, so wall time cannot be\n")
		p("  under the one-second spread.\n")
		p("- **due=burst**: all 10^5 due at once. For timingwheel a `clock.Mock` is moved past every deadline\n")
		p("  and one `h.Advance()` runs all of them, so its lag and wall time are that one call; the runtime's\n")
		p("  timers all share one deadline on the real clock.\n\n")
		p("| due | impl | GOMAXPROCS | CPU s | lag s | wall s | most goroutines | callback µs (measured) |\n|---|---|--:|--:|--:|--:|--:|--:|\n")
		for _, base := range slow {
			due := "–"
			for _, el := range strings.Split(base, "/") {
				if v, ok := strings.CutPrefix(el, "due="); ok {
					due = v
				}
			}
			for _, impl := range d.res.impls(base) {
				for _, pr := range d.res.procsOf(base) {
					if !d.res.has(base, pr, impl) {
						continue
					}
					p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", due, implLabel(impl), pr,
						d.med(base, pr, impl, "cpu-sec/op"), d.med(base, pr, impl, "lag-sec/op"), d.med(base, pr, impl, "wall-sec/op"),
						d.med(base, pr, impl, "max-goroutines"), d.med(base, pr, impl, "callback-us"))
				}
			}
		}
		if !slices.ContainsFunc(slow, func(base string) bool { return slices.Contains(d.res.impls(base), "wheel-parallel") }) {
			p("\nParallel callbacks for timingwheel are not in this library build; the benchmark adds them\n")
			p("(`-tags parallelcallbacks`) when they are.\n")
		}
		p("\n")
	}
}

// familyUnits are the metrics the all-results table shows per family.
var familyUnits = map[string][]string{
	"Churn":            {"ns/op", "B/op", "allocs/op"},
	"Reset":            {"ns/op", "B/op", "allocs/op"},
	"ResetAt":          {"ns/op", "B/op", "allocs/op"},
	"ResetParallel":    {"ns/op", "B/op", "allocs/op"},
	"ArmStopParallel":  {"ns/op", "B/op", "allocs/op"},
	"TimeoutsParallel": {"ns/op", "B/op", "allocs/op"},
	"ByValue":          {"ns/op", "allocs/op"},
	"Heartbeat":        {"ns/op", "allocs/op"},
	"IdleConnRead":     {"ns/op", "allocs/op"},
	"Heap":             {"B/timer"},
	"HeapByValue":      {"B/timer"},
	"HeapPerKey":       {"B/key"},
	"HeapPerConn":      {"B/conn"},
	"Expiry":           {"fire-cpu-sec/op", "cpu-sec/op", "wall-sec/op", "max-goroutines"},
	"SlowExpiry":       {"cpu-sec/op", "lag-sec/op", "wall-sec/op", "max-goroutines"},
	"Stall":            {"call-ms", "max-wait-us", "p99.9-wait-us"},
	"Advance":          {"ns/timer"},
}

func (d *doc) allResults() {
	p := d.p
	p("## All results\n\n")
	p("Medians over the rounds, by benchmark (GOMAXPROCS as the `-N` suffix) and implementation, with\n")
	p("the lowest and highest sample and their number. The benchstat tables below have every metric.\n\n")
	p("| benchmark | impl | metric | median | min – max (samples) | allocs/op |\n|---|---|---|--:|--:|--:|\n")
	for _, key := range d.res.names {
		base, pr := splitProcs(key)
		for _, impl := range d.res.impls(base) {
			for _, u := range familyUnits[family(key)] {
				xs := d.res.samples[key][impl][u]
				if len(xs) == 0 || u == "allocs/op" || u == "B/op" {
					continue
				}
				allocs := "—"
				if slices.Contains(familyUnits[family(key)], "allocs/op") {
					allocs = num(median(d.res.samples[key][impl]["allocs/op"]))
				}
				p("| %s | %s | %s | %s | %s – %s (%d) | %s |\n", strings.TrimPrefix(base, "Benchmark")+"-"+pr, impl, u,
					num(median(xs)), num(slices.Min(xs)), num(slices.Max(xs)), len(xs), allocs)
			}
		}
	}
	p("\n")
}

func (d *doc) wakeups() {
	p := d.p
	if len(d.res.wakeups) == 0 {
		return
	}
	p("## Idle wake-ups\n\n")
	p("Counted in a `testing/synctest` bubble (`TestWakeups`): fake time jumps whenever every goroutine\n")
	p("is blocked, so the window is exact. For timingwheel a wake-up is a distinct instant at which its\n")
	p("driver used the clock (a counting `clock.Clock` wrapper); for go-zero, a tick of its ticker. The\n")
	p("instant of arming (the caller's own clock read) is not counted. The runtime's timers have no\n")
	p("driver of their own to count.\n\n")
	p("| impl | scenario | window | wake-ups | clock calls | note |\n|---|---|--:|--:|--:|---|\n")
	for _, w := range d.res.wakeups {
		calls := w.calls
		if w.impl != "wheel" {
			calls = "—"
		}
		p("| %s | %s | %s | %s | %s | %s |\n", implLabel(w.impl), w.scenario, w.window, w.wakeups, calls, w.note)
	}
	p("\n")
}

func (d *doc) methods() {
	p := d.p
	p("## What each benchmark does\n\n")
	p("Live timers are armed 30–60 s out with one shared no-op callback (so no closure is allocated per\n")
	p("timer), and none fires while a benchmark runs. timingwheel runs with its defaults (1 ms tick,\n")
	p("levels 1000, 60, 60, 24) and its driver goroutine started (`h.Start()`), except where a\n")
	p("`clock.Mock` drives it. \"8 goroutines per core\" is `b.RunParallel` with `b.SetParallelism(8)`.\n\n")
	p("- **Churn** `live=N`: arm one more timer 30–60 s out and stop it, next to N live timers.\n")
	p("- **ArmStopParallel**: Churn next to 10^6 live timers from 8 goroutines per core.\n")
	p("- **Reset** `order=random|sequential`: re-arm one of 10^6 live timers to 90 s from now (later than\n")
	p("  its deadline: a heartbeat). The timers are picked in a precomputed random order, which is what\n")
	p("  heartbeats from many connections look like; the sequential order is the cache-friendly best case,\n")
	p("  shown so the numbers are honest (the runtime's Reset is several times cheaper in it).\n")
	p("- **ResetAt** (timingwheel only): Reset in random order through `ResetAt(deadline)`, reading the\n")
	p("  clock once per 64 re-arms, as an event loop handling a batch of heartbeats can.\n")
	p("- **ResetParallel**: Reset from 8 goroutines per core, each walking the 10^6 shared timers in its\n")
	p("  own random order.\n")
	p("- **TimeoutsParallel**: re-arm one of 10^6 `int` keys to 90 s from now from 8 goroutines per core,\n")
	p("  each in its own random order. timingwheel: `Timeouts[int].Add`. runtime: what users write for\n")
	p("  keyed timeouts, a map from key to `*time.Timer` split into 64 shards each with its own mutex;\n")
	p("  re-arm is a lookup and `Reset`, a new key gets `time.AfterFunc` with a closure over the key.\n")
	p("- **ByValue**: arm + Stop of a `timingwheel.Timer` held in a struct (`Init` once, then\n")
	p("  `Reset` + `Stop`), against `time.AfterFunc(d, f).Stop()` and a reused `*time.Timer`, one\n")
	p("  goroutine (`mode=loop`) and 8 per core (`mode=parallel`, a timer per goroutine).\n")
	p("- **Heartbeat** `api=…/conns=N`: the idle-timeout heartbeat on N open loopback TCP connections,\n")
	p("  in random order (see the connections section). The far ends are held by a second process\n")
	p("  (the test binary again), so that each connection costs this process one file descriptor.\n")
	p("- **IdleConnRead**: a 512-byte Write then a 512-byte Read on a loopback connection, plain and\n")
	p("  wrapped by `h.IdleConn` (built with `-tags idleconn`).\n")
	p("- **Heap** `B/timer`, **HeapByValue** `B/timer`, **HeapPerKey** `B/key`, **HeapPerConn**\n")
	p("  `B/conn`: `runtime.ReadMemStats` HeapAlloc after a GC, before and after arming, divided by the\n")
	p("  count. What callers keep anyway (a handle per timer, the connections) is allocated before the\n")
	p("  first reading. One sample per fresh process, and the runtime's measurements each in a process\n")
	p("  where no earlier benchmark grew the runtime's timer heaps (they keep their capacity). Their\n")
	p("  ns/op, B/op and allocs/op count the arming and the GCs; ignore them.\n")
	p("- **Expiry**: 10^6 timers with deadlines uniform over one second, starting 2 s after arming begins\n")
	p("  (6 s for go-zero, which arms more slowly), so that arming is done first; real clock.\n")
	p("  `fire-cpu-sec/op` is process CPU from the end of arming until the last callback; `wall-sec/op`\n")
	p("  is from the first deadline to the last callback (1 s is ideal); `max-goroutines` is sampled every\n")
	p("  5 ms. `state=cold` is the first mass expiry in a fresh process, `state=warm` the second in the\n")
	p("  same process, which reuses the goroutine structures the\n")
	p("  first one left.\n")
	p("- **SlowExpiry**: 10^5 timers whose callback burns 2 µs of CPU (calibrated with the thread's CPU\n")
	p("  clock), due over one second (`due=spread`) or all at once (`due=burst`); see the mass expiry\n")
	p("  section.\n")
	p("- **Stall**: see the pauses section. Its ns/op counts arming the N timers; ignore it. When no\n")
	p("  arm + Stop overlapped the call (at GOMAXPROCS=1 the timing goroutine may not run during it), its\n")
	p("  waits are reported as 0.\n")
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
