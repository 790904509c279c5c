package main

import (
	"log"
	"slices"
	"strings"
)

// The sections of the page, in order.

// A glanceRow is one line of the summary table: the wheel's benchmark and
// the other way's, at GOMAXPROCS=2.
type glanceRow struct {
	what         string
	wheel, other string
	unit         string
}

var glance = []glanceRow{
	{"arm a timer 30–60 s out and stop it (`AfterFunc(d, f).Stop()`), one goroutine", "Churn/impl=wheel/live=1000000", "Churn/impl=runtime/live=1000000", "ns/op"},
	{"arm a timer and stop it, 8 goroutines per core", "ArmStopParallel/impl=wheel/live=1000000", "ArmStopParallel/impl=runtime/live=1000000", "ns/op"},
	{"arm + Stop of a timer held by value / `time.AfterFunc(d, f).Stop()`, one goroutine", "ByValue/impl=wheel/live=1000000/mode=loop", "ByValue/impl=runtime/live=1000000/mode=loop", "ns/op"},
	{"arm + Stop of a timer held by value / of a reused `*time.Timer` (`Reset` + `Stop`), one goroutine", "ByValue/impl=wheel/live=1000000/mode=loop", "ByValue/impl=runtime-reused/live=1000000/mode=loop", "ns/op"},
	{"re-arm a live timer (`Reset`), random order, one goroutine", "Reset/impl=wheel/live=1000000/order=random", "Reset/impl=runtime/live=1000000/order=random", "ns/op"},
	{"re-arm a live timer (`Reset`), random order, 8 goroutines per core", "ResetParallel/impl=wheel/live=1000000", "ResetParallel/impl=runtime/live=1000000", "ns/op"},
	{"re-arm (`Reset`) of 10^4 timers made on one goroutine (an accept loop's), from 8 goroutines per core", "ServerReset/impl=wheel/live=10000/mode=parallel", "ServerReset/impl=runtime/live=10000/mode=parallel", "ns/op"},
	{"an idle conn's Read re-arm, 10^4 conns wrapped on one goroutine, 8 goroutines per core: `netidle.Conn` / a conn resetting its own `*time.Timer`", "ServerConnRead/impl=wheel/live=10000/mode=parallel", "ServerConnRead/impl=runtime/live=10000/mode=parallel", "ns/op"},
	{"re-arm one of 10^6 keys from 8 goroutines per core: `Timeouts.Add` / sharded map of `*time.Timer`", "TimeoutsParallel/impl=wheel/keys=1000000", "TimeoutsParallel/impl=runtime/keys=1000000", "ns/op"},
	{"heartbeat on one of 10,000 TCP connections: `Timer.Reset` / `conn.SetReadDeadline`", "Heartbeat/impl=wheel/api=Timer/conns=10000", "Heartbeat/impl=runtime/api=SetReadDeadline/conns=10000", "ns/op"},
	{"a 512-byte Read on a loopback conn (after a Write): `netidle.Conn` / the bare `net.Conn`", "IdleConnRead/impl=idleconn/read=512B", "IdleConnRead/impl=raw/read=512B", "ns/op"},
	{"request deadline, create + cancel, one goroutine: `wheelctx.WithTimeout` / `context.WithTimeout`", "WithTimeout/parent=background/done=false/impl=wheel/pending=100000", "WithTimeout/parent=background/done=false/impl=context/pending=100000", "ns/op"},
	{"request deadline with `Done()` called, under a `WithCancel` parent, one goroutine", "WithTimeout/parent=cancel/done=true/impl=wheel/pending=100000", "WithTimeout/parent=cancel/done=true/impl=context/pending=100000", "ns/op"},
	{"request deadline, create + cancel, 8 goroutines per core", "WithTimeoutParallel/parent=background/done=false/impl=wheel/pending=100000", "WithTimeoutParallel/parent=background/done=false/impl=context/pending=100000", "ns/op"},
	{"start + stop a periodic timer: `t.ResetEvery(p); t.Stop()` / `time.NewTicker(p).Stop()`", "PeriodicArmStop/impl=wheel", "PeriodicArmStop/impl=ticker", "ns/op"},
	{"start + stop a periodic timer: `ResetEvery` + `Stop` / a reused `*time.Ticker`", "PeriodicArmStop/impl=wheel", "PeriodicArmStop/impl=ticker-reused", "ns/op"},
	{"heap per live timer (`AfterFunc`, shared callback)", "Heap/impl=wheel/live=1000000", "Heap/impl=runtime/live=1000000", "B/timer"},
	{"heap per `int` key of keyed timeouts", "HeapPerKey/impl=wheel/keys=1000000", "HeapPerKey/impl=runtime/keys=1000000", "B/key"},
	{"heap per periodic timer in a conn's struct: `Timer` + `ResetEvery` / `time.Ticker`", "HeapPeriodic/impl=wheel", "HeapPeriodic/impl=ticker", "B/conn"},
	{"heap per conn for an idle close and a write-idle ping: `netidle.Conn` + `OnWriteIdle` / `Ticker` + `SetReadDeadline`", "HeapIdleEvents/impl=wheel/api=IdleConn+OnWriteIdle/idle=shared/conns=10000", "HeapIdleEvents/impl=runtime/api=Ticker+SetReadDeadline/conns=10000", "B/conn"},
	{"CPU to fire 10^6 timers due within one second (first time in the process)", "Expiry/impl=wheel/timers=1000000/state=cold", "Expiry/impl=runtime/timers=1000000/state=cold", "fire-cpu-sec/op"},
	{"10^5 callbacks of 2 µs each, due over one second, real clock: lag of the last one after its deadline", "SlowExpiry/impl=wheel/due=spread/timers=100000/callback=2us", "SlowExpiry/impl=runtime/due=spread/timers=100000/callback=2us", "lag-sec/op"},
	{"10^5 callbacks of 2 µs each, all due at one instant: lag of the last one", "SlowExpiry/impl=wheel/due=burst/timers=100000/callback=2us", "SlowExpiry/impl=runtime/due=burst/timers=100000/callback=2us", "lag-sec/op"},
}

func (d *doc) glance() {
	d.heading("At a glance")
	d.p("GOMAXPROCS=2, next to 10^6 live timers armed 30–60 s out unless the row says otherwise; each row\n")
	d.p("is repeated, with its neighbours, in the sections below. Timings are wall time per operation.\n\n")
	t := newTable([]string{"what: timingwheel / the other way"}, []string{"timingwheel", "the other way"},
		ratio{1, 0, "other ÷ timingwheel", true})
	for _, g := range glance {
		w, o := d.get(g.wheel, "2", g.unit), d.get(g.other, "2", g.unit)
		if (w == nil || o == nil) && d.m["groups"] == "" {
			log.Printf("at a glance: the run has no %s of %s or %s at GOMAXPROCS=2, so the row %q is incomplete or left out", g.unit, g.wheel, g.other, g.what)
		}
		d.add(t, []string{g.what}, w, o)
	}
	d.table(t)
	d.p("%s", lossesMarker)
}

// A scalingCase is one group of bars in the scaling plot and rows of the
// scaling tables: the wheel's benchmark and the other way's.
type scalingCase struct {
	label        string // short, for the plot's axis
	what         string
	wheel, other string
}

var scalingCases = []scalingCase{
	{"arm + Stop", "arm a timer and stop it (`AfterFunc(d, f).Stop()`)", "ArmStopParallel/impl=wheel/live=1000000", "ArmStopParallel/impl=runtime/live=1000000"},
	{"Reset", "re-arm one of the live timers, random order (`t.Reset(d)`)", "ResetParallel/impl=wheel/live=1000000", "ResetParallel/impl=runtime/live=1000000"},
	{"keyed re-arm", "re-arm a key: `Timeouts.Add` / sharded `map[int]*time.Timer` + `Reset`", "TimeoutsParallel/impl=wheel/keys=1000000", "TimeoutsParallel/impl=runtime/keys=1000000"},
	{"held timer", "arm + Stop of a timer held by value / `time.AfterFunc(d, f).Stop()`", "ByValue/impl=wheel/live=1000000/mode=parallel", "ByValue/impl=runtime/live=1000000/mode=parallel"},
	{"", "arm + Stop of a timer held by value / of a reused `*time.Timer`", "ByValue/impl=wheel/live=1000000/mode=parallel", "ByValue/impl=runtime-reused/live=1000000/mode=parallel"},
}

func (d *doc) scaling() {
	var cases []scalingCase
	for _, c := range scalingCases {
		if len(d.res.procsOf(c.wheel)) > 1 {
			cases = append(cases, c)
		}
	}
	if len(cases) == 0 {
		return
	}
	d.heading("From one core to two")
	d.p("Each of these runs from 8 goroutines per GOMAXPROCS (`b.SetParallelism(8)`: 8 goroutines at\n")
	d.p("GOMAXPROCS=1, 16 at 2), next to 10^6 live timers; ns/op is wall time per operation over all of\n")
	d.p("them. The speed-up is the time per operation at GOMAXPROCS=1 ÷ that at 2: 2x would be perfect use\n")
	d.p("of the second core; below 1x, the second core makes things slower (the goroutines contend).\n\n")
	if d.plots["scaling"] != "" {
		d.p("![throughput at GOMAXPROCS=1 and 2, runtime and timingwheel, per operation](%s)\n\n", d.plots["scaling"])
	}
	t := newTable([]string{"operation: timingwheel / the other way", "GOMAXPROCS"}, []string{"timingwheel", "the other way", "go-zero"},
		ratio{1, 0, "other ÷ timingwheel", true}, ratio{2, 0, "go-zero ÷ timingwheel", true})
	for _, c := range cases {
		for _, pr := range d.res.procsOf(c.wheel) {
			var gz *sample
			if strings.HasPrefix(c.other, "ResetParallel/") {
				gz = d.get(withImpl(c.wheel, "gozero"), pr, "ns/op")
			}
			d.add(t, []string{c.what, pr}, d.get(c.wheel, pr, "ns/op"), d.get(c.other, pr, "ns/op"), gz)
		}
	}
	d.table(t)
	d.p("Speed-up from one core to two:\n\n")
	s := newTable([]string{"operation", "who"}, []string{"GOMAXPROCS=2", "GOMAXPROCS=1"}, ratio{1, 0, "speed-up (1 ÷ 2)", false})
	for _, c := range cases {
		names := []string{c.wheel, c.other}
		if c.label == "Reset" {
			names = append(names, withImpl(c.wheel, "gozero"))
		}
		for _, n := range names {
			if c.label == "" && n == c.wheel {
				continue // the held timer's row is in the case above
			}
			d.add(s, []string{c.what, implLabel(n)}, d.get(n, "2", "ns/op"), d.get(n, "1", "ns/op"))
		}
	}
	d.table(s)
}

func (d *doc) byValue() {
	names := d.res.names("ByValue/impl=wheel/")
	if len(names) == 0 {
		return
	}
	d.heading("Timers held by value")
	d.p("A `timingwheel.Timer` can be a field of your own struct (a connection, a request): bind it once with\n")
	d.p("`t.Init(h, f)`, then `t.Reset(d)` arms it and `t.Stop()` disarms it, and neither allocates. Below,\n")
	d.p("arm + Stop of such a timer next to 10^6 live timers, against `time.AfterFunc(d, f).Stop()` (a new\n")
	d.p("runtime timer each time) and against a `*time.Timer` made once and reused with `Reset` + `Stop`, the\n")
	d.p("runtime's nearest equivalent. `mode=loop` is one goroutine; `mode=parallel` runs 8 goroutines per\n")
	d.p("GOMAXPROCS, each with its own timer.\n\n")
	for _, unit := range []string{"ns/op", "allocs/op"} {
		var rs []ratio
		if unit == "ns/op" {
			rs = []ratio{{1, 0, "`AfterFunc` ÷ held", true}, {2, 0, "reused ÷ held", true}}
		}
		t := newTable([]string{"case", "GOMAXPROCS"}, []string{"timingwheel, held timer " + unit, "`AfterFunc(d, f).Stop()`", "reused `*time.Timer`"}, rs...)
		d.tablePerProcs(t, names, func(n, pr string) ([]string, []*sample) {
			return []string{caseOf(n), pr}, []*sample{d.get(n, pr, unit), d.get(withImpl(n, "runtime"), pr, unit), d.get(withImpl(n, "runtime-reused"), pr, unit)}
		})
	}
}

func (d *doc) memory() {
	type row struct{ what, wheel, other, unit string }
	rows := []row{
		{"per live timer armed with `AfterFunc` (shared callback): the library's `Timer` / the runtime's timer and its share of the timer heap", "Heap/impl=wheel/live=1000000", "Heap/impl=runtime/live=1000000", "B/timer"},
		{"per timer held by value (`[]struct{ t timingwheel.Timer }`; in your own struct, what the field adds)", "HeapByValue/impl=wheel/live=1000000", "", "B/timer"},
		{"per `int` key: `Timeouts[int]` / a 64-shard `map[int]*time.Timer` with a `time.AfterFunc` closure over each key", "HeapPerKey/impl=wheel/keys=1000000", "HeapPerKey/impl=runtime/keys=1000000", "B/key"},
		{"per periodic timer, 10^5 conns, periods 1–2 s: a `Timer` field + `ResetEvery` / a `*time.Ticker` field (the conn struct counted for both)", "HeapPeriodic/impl=wheel", "HeapPeriodic/impl=ticker", "B/conn"},
	}
	d.section = "Memory" // for the comparisons add keeps; the heading follows if there are rows
	t := newTable([]string{"heap bytes"}, []string{"timingwheel", "the other way", "go-zero"},
		ratio{1, 0, "other ÷ timingwheel", true}, ratio{2, 0, "go-zero ÷ timingwheel", true})
	for _, r := range rows {
		var other, gz *sample
		if r.other != "" {
			other = d.get(r.other, "2", r.unit)
		}
		if strings.HasPrefix(r.wheel, "Heap/") {
			gz = d.get(withImpl(r.wheel, "gozero"), "2", r.unit)
		}
		d.add(t, []string{r.what}, d.get(r.wheel, "2", r.unit), other, gz)
	}
	if len(t.rows) == 0 {
		return
	}
	d.heading("Memory")
	d.p("Heap bytes (`runtime.ReadMemStats` HeapAlloc after `runtime.GC()`, before and after arming 10^6,\n")
	d.p("divided by 10^6), one sample per fresh process, GOMAXPROCS=2. Per connection: see the next sections.\n\n")
	d.table(t)
}

// connAPIs are the ways of keeping a connection's idle timeout, the wheel's
// first.
var connAPIs = []struct{ impl, api string }{{"wheel", "Timer"}, {"wheel", "Timeouts"}, {"wheel", "IdleConn"}, {"runtime", "SetReadDeadline"}, {"runtime", "AfterFunc"}}

func (d *doc) connections() {
	hb := d.res.names("Heartbeat/impl=wheel/api=Timer/")
	heap := d.res.names("HeapPerConn/impl=wheel/api=Timer/")
	read := d.res.names("IdleConnRead/impl=raw/")
	if len(hb)+len(heap)+len(read) == 0 {
		return
	}
	d.heading("Idle timeouts of TCP connections")
	d.p("Open TCP connections over 127.0.0.1 (the far ends in a second process), one idle timeout each,\n")
	d.p("armed 30–60 s out; a heartbeat moves one connection's timeout to 90 s from now, connections taken\n")
	d.p("in random order. No other timers are live. The ways compared:\n\n")
	d.p("- `SetReadDeadline`: `conn.SetReadDeadline(time.Now().Add(idle))`, the net package's own deadline\n")
	d.p("  (a runtime timer inside each connection's poll descriptor, outside the Go heap);\n")
	d.p("- `AfterFunc`: a `time.AfterFunc` per connection that closes it, `Reset` on heartbeat;\n")
	d.p("- `Timeouts`: one `timingwheel.Timeouts[net.Conn]`, `Add(conn, idle)` on heartbeat;\n")
	d.p("- `Timer`: a `timingwheel.Timer` held in the per-connection state, `Reset(idle)` on heartbeat;\n")
	d.p("- `netidle.Conn`: `netidle.Conn(h, conn, idle)`, a wrapper whose `Read` records the traffic for the timeout (its\n")
	d.p("  cost is in the Read path below).\n\n")
	for _, s := range d.res.skipped {
		d.p("Not measured: %s.\n\n", strings.Replace(s, ": ", " — ", 1))
	}
	cells := func(name, procs, unit string) []*sample {
		var out []*sample
		for _, a := range connAPIs {
			out = append(out, d.get(strings.Replace(name, "impl=wheel/api=Timer", "impl="+a.impl+"/api="+a.api, 1), procs, unit))
		}
		return out
	}
	heads := []string{"`Timer`", "`Timeouts`", "`netidle.Conn`", "`SetReadDeadline`", "`AfterFunc`"}
	vs := []ratio{{3, 0, "`SetReadDeadline` ÷ `Timer`", true}, {4, 0, "`AfterFunc` ÷ `Timer`", true}, {3, 1, "`SetReadDeadline` ÷ `Timeouts`", true}}
	d.p("Heartbeat, ns/op:\n\n")
	t := newTable([]string{"connections", "GOMAXPROCS"}, heads, vs...)
	d.tablePerProcs(t, hb, func(n, pr string) ([]string, []*sample) {
		return []string{strings.TrimPrefix(caseOf(n), "api=Timer/"), pr}, cells(n, pr, "ns/op")
	})
	d.p("Heap bytes each way adds per connection (GOMAXPROCS=2; one sample per fresh process for the\n")
	d.p("runtime's `AfterFunc`, whose timer heap keeps its capacity; the connections and their poll\n")
	d.p("descriptors are not counted, so `SetReadDeadline` shows none):\n\n")
	h := newTable([]string{"connections"}, heads, ratio{4, 0, "`AfterFunc` ÷ `Timer`", true}, ratio{4, 1, "`AfterFunc` ÷ `Timeouts`", true}, ratio{4, 2, "`AfterFunc` ÷ `netidle.Conn`", true})
	for _, n := range heap {
		d.add(h, []string{strings.TrimPrefix(caseOf(n), "api=Timer/")}, cells(n, "2", "B/conn")...)
	}
	d.table(h)
	if len(read) > 0 {
		d.p("### The Read path of `netidle.Conn`\n\n")
		d.p("One 512-byte Write at the far end, then one 512-byte Read with data waiting (a 64 KiB backlog\n")
		d.p("keeps it so), on the bare connection and on the same connection wrapped by `netidle.Conn`, whose\n")
		d.p("Read also records the traffic for the timeout: the difference is what the wrapper adds to every Read.\n\n")
		r := newTable([]string{"GOMAXPROCS"}, []string{"`netidle.Conn`", "bare `net.Conn`", "`netidle.Conn` allocs/op"}, ratio{1, 0, "bare ÷ `netidle.Conn`", true})
		d.tablePerProcs(r, read, func(n, pr string) ([]string, []*sample) {
			w := withImpl(n, "idleconn")
			return []string{pr}, []*sample{d.get(w, pr, "ns/op"), d.get(n, pr, "ns/op"), d.get(w, pr, "allocs/op")}
		})
	}
}

func (d *doc) deadlines() {
	var names []string
	for _, n := range d.res.names("WithTimeout") {
		if strings.Contains(n, "/impl=wheel") {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return
	}
	d.heading("Request deadlines")
	d.p("`wheelctx.WithTimeout(h, parent, d)` + cancel against `context.WithTimeout(parent, d)` + cancel\n")
	d.p("([`bench/context_test.go`](%s/bench/context_test.go)), d 30–60 s so that nothing fires, next to\n", d.root)
	d.p("10^5 pending contexts of each kind (`Live`: and 10^6 more live timers of each implementation),\n")
	d.p("the wheel's driver running. `parent=background` is `context.Background()`; `parent=cancel` one\n")
	d.p("`context.WithCancel` parent shared by every goroutine; `parent=own` a `WithCancel` parent of its\n")
	d.p("own per request (a server's request context), made and cancelled inside the timed loop.\n")
	d.p("`done=true` calls `Done()` before cancel, as a `select` on it does. `Parallel` is `b.RunParallel`\n")
	d.p("with `SetParallelism(8)`. `Fire`: create + fire, contexts of 1 ms in batches of 1000, each batch\n")
	d.p("waited for (compare CPU time). CPU is the process's (all threads, GC included)\n")
	d.p("per operation, which other processes on the machine disturb less than wall time. GOMAXPROCS=2.\n\n")
	for _, unit := range []string{"ns/op", "cpu-ns/op"} {
		d.p("%s:\n\n", map[string]string{"ns/op": "Wall time", "cpu-ns/op": "CPU time"}[unit])
		t := newTable([]string{"benchmark", "case"}, []string{"`wheelctx.WithTimeout`", "`context.WithTimeout`"}, ratio{1, 0, "context ÷ timingwheel", true})
		for _, n := range names {
			top, _, _ := strings.Cut(n, "/")
			d.add(t, []string{top, caseOf(n)}, d.get(n, "2", unit), d.get(withImpl(n, "context"), "2", unit))
		}
		d.table(t)
	}
	d.p("Allocations per create + cancel:\n\n")
	t := newTable([]string{"benchmark", "case"}, []string{"timingwheel B/op", "context B/op", "timingwheel allocs/op", "context allocs/op"})
	for _, n := range names {
		top, _, _ := strings.Cut(n, "/")
		c := withImpl(n, "context")
		d.add(t, []string{top, caseOf(n)}, d.get(n, "2", "B/op"), d.get(c, "2", "B/op"), d.get(n, "2", "allocs/op"), d.get(c, "2", "allocs/op"))
	}
	d.table(t)
}

func (d *doc) periodic() {
	arm := d.get("PeriodicArmStop/impl=wheel", "2", "ns/op")
	heap := d.get("HeapPeriodic/impl=wheel", "2", "B/conn")
	if arm == nil && heap == nil {
		return
	}
	d.heading("Periodic timers")
	d.p("A periodic timer per connection, held in the conn's struct (`t.Init(h, f)`, then `t.ResetEvery(p)`),\n")
	d.p("against a `time.Ticker` per conn ([`bench/periodic_test.go`](%s/bench/periodic_test.go)), next to\n", d.root)
	d.p("10^5 live ones, GOMAXPROCS=2. A Ticker's channel is usually read by a goroutine per conn, whose stack\n")
	d.p("is not counted here; the wheel's periodic callback runs on its driver.\n\n")
	t := newTable([]string{"what"}, []string{"timingwheel", "`time.Ticker`", "reused `*time.Ticker`"},
		ratio{1, 0, "Ticker ÷ timingwheel", true}, ratio{2, 0, "reused ÷ timingwheel", true})
	d.add(t, []string{"heap per live periodic conn timer, periods 1–2 s (B/conn)"}, heap, d.get("HeapPeriodic/impl=ticker", "2", "B/conn"), nil)
	arms := func(t *table, unit string) {
		d.add(t, []string{"start + stop: `t.ResetEvery(p); t.Stop()` / `time.NewTicker(p).Stop()` / `t.Reset(p); t.Stop()` (" + unit + ")"},
			d.get("PeriodicArmStop/impl=wheel", "2", unit), d.get("PeriodicArmStop/impl=ticker", "2", unit), d.get("PeriodicArmStop/impl=ticker-reused", "2", unit))
	}
	arms(t, "ns/op")
	d.table(t)
	a := newTable(t.labels, t.values)
	arms(a, "allocs/op")
	d.table(a)
}

func (d *doc) idleEvents() {
	heap := d.res.names("HeapIdleEvents/impl=")
	rearm := d.res.names("IdleEventsRearm/")
	io := d.res.names("IdleEventsIO/")
	if len(heap)+len(rearm)+len(io) == 0 {
		return
	}
	d.heading("Idle events")
	d.p("`OnReadIdle`, `OnWriteIdle` and `MaxLifetime` of `netidle.Conn(h, …)` against what servers write without\n")
	d.p("them: a `time.Ticker` per connection for the ping and `SetReadDeadline` for the idle close\n")
	d.p("([`bench/idleevents_test.go`](%s/bench/idleevents_test.go), `-tags idleevents`), GOMAXPROCS=2.\n\n", d.root)
	if len(heap) > 0 {
		d.p("Memory per connection (open loopback connections; HeapAlloc and StackInuse after a GC, before\n")
		d.p("and after arming, divided by the count; the hierarchy is made inside the measurement, so its own\n")
		d.p("wheels count too; one sample per fresh process). `idle=shared`: every conn has the same idle, as\n")
		d.p("a server's have; `idle=per-conn`: each its own. The runtime's `SetReadDeadline` timer lives in\n")
		d.p("the poll descriptor, outside the Go heap; `+goroutine` adds the goroutine that waits on the\n")
		d.p("ticker (gorilla/websocket chat's `writePump`).\n\n")
		var wheel, other []string
		for _, n := range heap {
			if strings.Contains(n, "/impl=wheel/") {
				wheel = append(wheel, n)
			} else {
				other = append(other, n)
			}
		}
		for _, unit := range []string{"B/conn", "stack-B/conn"} {
			heads := []string{"way", "timingwheel"}
			var rs []ratio
			for i, o := range other {
				head := "`" + strings.TrimPrefix(strings.Split(o, "/")[2], "api=") + "`"
				heads = append(heads, head)
				rs = append(rs, ratio{i + 1, 0, head + " ÷ timingwheel", true})
			}
			t := newTable([]string{unit}, heads[1:], rs...)
			for _, w := range wheel {
				cells := []*sample{d.get(w, "2", unit)}
				for _, o := range other {
					cells = append(cells, d.get(o, "2", unit))
				}
				d.add(t, []string{"`" + caseOf(w) + "`"}, cells...)
			}
			d.table(t)
		}
	}
	for _, names := range [][]string{rearm, io} {
		if len(names) == 0 {
			continue
		}
		var ops []string
		for _, n := range names {
			if op := strings.Split(n, "/")[1]; !slices.Contains(ops, op) {
				ops = append(ops, op)
			}
		}
		top, _, _ := strings.Cut(names[0], "/")
		other := "bare `net.Conn`"
		if top == "IdleEventsRearm" {
			other = "runtime"
			d.p("Counting a Read or a Write (`BenchmarkIdleEventsRearm`: the wrapper over a conn whose Read and Write\n")
			d.p("return at once, so only the wrapper is measured; the runtime's is `SetReadDeadline(time.Now().Add(idle))`\n")
			d.p("before a Read, `ticker.Reset(ping)` after a Write):\n\n")
		} else {
			d.p("On a loopback socket (`BenchmarkIdleEventsIO`: a 512-byte Write and Read, one end wrapped):\n\n")
		}
		t := newTable([]string{"op"}, []string{"`netidle.Conn`", "with `OnReadIdle` + `OnWriteIdle`", other},
			ratio{2, 0, other + " ÷ `netidle.Conn`", true}, ratio{2, 1, other + " ÷ with events", true})
		for _, op := range ops {
			find := func(impl string) *sample {
				for _, n := range names {
					if strings.Split(n, "/")[1] == op && strings.Contains(n, "/impl="+impl) {
						return d.get(n, "2", "ns/op")
					}
				}
				return nil
			}
			o := find("runtime")
			if o == nil {
				o = find("raw")
			}
			d.add(t, []string{op}, find("idleconn"), find("events"), o)
		}
		d.table(t)
	}
}

func (d *doc) churn() {
	churn := d.res.names("Churn/impl=wheel/")
	reset := d.res.names("Reset/impl=wheel/")
	if len(churn)+len(reset) == 0 {
		return
	}
	d.heading("Arm + Stop, and Reset, next to N live timers")
	d.p("One goroutine, GOMAXPROCS=2. Churn arms one more timer 30–60 s out and stops it; Reset re-arms one\n")
	d.p("of 10^6 live timers to 90 s from now, in a random order (heartbeats from many connections) or in\n")
	d.p("order (the cache-friendly best case, where the runtime's Reset is cheaper).\n\n")
	if d.plots["churn"] != "" {
		d.p("![ns/op of AfterFunc(d, f).Stop() against the number of live timers, per implementation](%s)\n\n", d.plots["churn"])
	}
	t := newThreeWayTable([]string{"benchmark", "case"})
	for _, n := range append(churn, reset...) {
		top, _, _ := strings.Cut(n, "/")
		d.add(t, []string{top, caseOf(n)}, d.threeWays(n, "2", "ns/op")...)
	}
	d.table(t)
}

func (d *doc) stall() {
	names := d.res.names("Stall/impl=wheel/")
	if len(names) == 0 {
		return
	}
	d.heading("Pauses while the wheel works through a full slot")
	d.p("N timers due within one second, 30 s out, all in one slot of the seconds wheel, on a `clock.Mock`.\n")
	d.p("One goroutine makes one large call; another loops `h.AfterFunc(time.Hour, f).Stop()` and times\n")
	d.p("every call. The calls:\n\n")
	d.p("- cascade: the clock moves to the start of the slot and `h.Advance()` moves all N timers down to\n")
	d.p("  the millisecond wheel (none fires yet);\n")
	d.p("- advance: the clock moves past the slot and `h.Advance()` cascades them and fires all N (no-op\n")
	d.p("  callbacks, which run without the lock held, so other calls get in between them);\n")
	d.p("- next: `h.Next()` reports the slot's cascade, in O(levels), without looking at its timers.\n\n")
	d.p("\"longest wait\" and \"p99.9\" are over the arm + Stop calls that overlapped the large call; \"quiet\" is\n")
	d.p("the longest in the 20 ms before it, when the wheel was idle. Each process makes 7 large calls and\n")
	d.p("reports the median call's figures (\"worst\": the largest share of any call); the cells are medians\n")
	d.p("over the processes. \"control\" is the same cascade while the other goroutine only allocates what\n")
	d.p("`AfterFunc` allocates and never calls the wheel: its longest wait is what this machine imposes on a\n")
	d.p("busy goroutine whatever the wheel does. At GOMAXPROCS=1 both goroutines share one CPU: a wait then\n")
	d.p("includes the other goroutine's turn.\n\n")
	units := []string{"call-ms", "max-wait-us", "p99.9-wait-us", "max-wait/call", "worst-max-wait/call", "calls-during", "quiet-max-wait-us"}
	t := newTable([]string{"call", "GOMAXPROCS"}, append(slices.Clone(units), "control: max-wait-us"))
	d.tablePerProcs(t, names, func(n, pr string) ([]string, []*sample) {
		return []string{caseOf(n), pr}, append(d.units(n, pr, units), d.get(withImpl(n, "control"), pr, "max-wait-us"))
	})
	if d.old == nil || len(d.old.names("Stall/impl=wheel/")) == 0 {
		return
	}
	d.p("### Before and after\n\n")
	d.p("The same benchmark on an earlier library commit (%s), run with `bench/stall_at.sh`: one lock for\n", d.old.rawRelOrHead())
	d.p("the whole hierarchy, held for a whole cascade or scan.\n\n")
	b := newTable([]string{"call", "GOMAXPROCS"}, []string{"call ms now", "call ms before", "longest ÷ call now", "longest ÷ call before"},
		ratio{1, 0, "call before ÷ now", false}, ratio{3, 2, "longest ÷ call, before ÷ now", false})
	d.tablePerProcs(b, names, func(n, pr string) ([]string, []*sample) {
		return []string{caseOf(n), pr}, []*sample{d.get(n, pr, "call-ms"), d.old.get(n, pr, "call-ms"), d.get(n, pr, "max-wait/call"), d.old.get(n, pr, "max-wait/call")}
	})
}

// rawRelOrHead names a results file by its first line ("# library
// fe4a275 ...") if it has one.
func (res *results) rawRelOrHead() string {
	if res.meta["commit"] != "" {
		return "`" + res.meta["commit"] + "`"
	}
	return res.head
}

func (d *doc) expiry() {
	cold := d.res.names("Expiry/impl=wheel/")
	slow := d.res.names("SlowExpiry/impl=")
	if len(cold)+len(slow) == 0 {
		return
	}
	d.heading("Mass expiry")
	if len(cold) > 0 {
		d.p("### 10^6 timers due within one second, no-op callback\n\n")
		d.p("Real clock, timingwheel's driver running, one sample per fresh process. CPU is process CPU (user +\n")
		d.p("system, all threads, GC included) from the end of arming until the last callback ran; wall time\n")
		d.p("from the first deadline to the last callback (1 s is ideal). The runtime starts a goroutine per\n")
		d.p("expiry: while goroutine creation keeps up it needs about a second of CPU and thousands of\n")
		d.p("goroutines; once it falls behind, hundreds of thousands pile up and it needs several times more.\n")
		d.p("`state=cold` is the first mass expiry in the process, `state=warm` the second.\n\n")
		t := newThreeWayTable([]string{"case", "metric"})
		for _, unit := range []string{"fire-cpu-sec/op", "wall-sec/op", "max-goroutines"} {
			for _, n := range cold {
				d.add(t, []string{caseOf(n), unit}, d.threeWays(n, "2", unit)...)
			}
		}
		d.table(t)
	}
	if len(slow) > 0 {
		d.p("### 10^5 timers, each callback burning 2 µs of CPU\n\n")
		d.p("A callback that does work, as closing a connection does. timingwheel runs callbacks one after\n")
		d.p("the other on the goroutine that advances it (`wheel-parallel`: one per shard, with parallel\n")
		d.p("callbacks); the runtime runs each callback in a goroutine of its own as its timer comes due.\n")
		d.p("Lag is the time from the last deadline until the last callback returned; CPU is process CPU\n")
		d.p("from the end of arming. `due=spread`: deadlines spread over one second on the real clock;\n")
		d.p("`due=burst`: all due at once (for timingwheel a `clock.Mock` moved past them and one\n")
		d.p("`h.Advance()`; for the runtime one shared deadline on the real clock).\n\n")
		units := []string{"cpu-sec/op", "lag-sec/op", "wall-sec/op", "max-goroutines", "callback-us"}
		t := newTable([]string{"case", "impl", "GOMAXPROCS"}, units)
		d.tablePerProcs(t, slow, func(n, pr string) ([]string, []*sample) {
			return []string{caseOf(n), implLabel(n), pr}, d.units(n, pr, units)
		})
		c := newTable([]string{"case", "GOMAXPROCS"}, []string{"timingwheel lag", "runtime lag", "timingwheel CPU", "runtime CPU"},
			ratio{1, 0, "lag: runtime ÷ timingwheel", true}, ratio{3, 2, "CPU: runtime ÷ timingwheel", true})
		var wheel []string
		for _, n := range slow {
			if strings.Contains(n, "/impl=wheel/") {
				wheel = append(wheel, n)
			}
		}
		d.tablePerProcs(c, wheel, func(n, pr string) ([]string, []*sample) {
			r := withImpl(n, "runtime")
			return []string{caseOf(n), pr}, []*sample{d.get(n, pr, "lag-sec/op"), d.get(r, pr, "lag-sec/op"), d.get(n, pr, "cpu-sec/op"), d.get(r, pr, "cpu-sec/op")}
		})
	}
}

func (d *doc) wakeups() {
	if len(d.res.wakeups) == 0 {
		return
	}
	d.heading("Idle wake-ups")
	d.p("Counted in a `testing/synctest` bubble (`TestWakeups`): fake time jumps whenever every goroutine\n")
	d.p("is blocked, so the window is exact. For timingwheel a wake-up is a distinct instant at which its\n")
	d.p("driver used the clock (a counting `clock.Clock` wrapper); for go-zero, a tick of its ticker. The\n")
	d.p("runtime's timers have no driver of their own to count.\n\n")
	d.p("| impl | scenario | window | wake-ups | clock calls | note |\n|---|---|--:|--:|--:|---|\n")
	for _, w := range d.res.wakeups {
		calls := w.calls
		if w.impl != "wheel" {
			calls = "—"
		}
		d.p("| %s | %s | %s | %s | %s | %s |\n", implLabel("impl="+w.impl), w.scenario, w.window, w.wakeups, calls, w.note)
	}
	d.p("\n")
	if len(d.res.logs) > 0 {
		d.p("Conditions a benchmark noticed during the run that make its sample less clean:\n\n")
		for _, l := range d.res.logs {
			d.p("- %s\n", l)
		}
		d.p("\n")
	}
}

func (d *doc) allResults() {
	d.heading("All results")
	d.p("Every metric of every benchmark: median ±95%% confidence interval, and the number of samples. The\n")
	d.p("GOMAXPROCS is the `-N` suffix; units as benchstat tidies them (sec for ns). The same with `benchstat`:\n")
	d.p("`benchstat -col /impl %s`.\n\n", d.res.rawRel)
	d.p("| benchmark | metric | median | n |\n|---|---|--:|--:|\n")
	for _, k := range d.res.order {
		s := d.res.get(k.name, k.procs, k.unit)
		d.p("| %s-%s | %s | %s | %d |\n", k.name, k.procs, k.unit, s, s.n())
	}
	d.p("\n")
}

func (d *doc) methods() {
	p := d.p
	d.heading("What each benchmark does")
	p("Live timers are armed 30–60 s out with one shared no-op callback (so no closure is allocated per\n")
	p("timer), and none fires while a benchmark runs. timingwheel runs with its defaults (1 ms tick,\n")
	p("levels 1000, 60, 60, 24) and its driver goroutine started (`h.Start()`), except where a\n")
	p("`clock.Mock` drives it. \"8 goroutines per core\" is `b.RunParallel` with `b.SetParallelism(8)`.\n")
	p("Each benchmark's doc comment in [`bench/`](%s/bench) has the details; the sections above describe\n", d.root)
	p("those not listed here.\n\n")
	p("- **Churn** `live=N`: arm one more timer 30–60 s out and stop it, next to N live timers.\n")
	p("- **ArmStopParallel**: Churn next to 10^6 live timers from 8 goroutines per core.\n")
	p("- **Reset** `order=random|sequential`: re-arm one of 10^6 live timers to 90 s from now (later than\n")
	p("  its deadline: a heartbeat), in a precomputed random order or in order.\n")
	p("- **ResetAt** (timingwheel only): Reset in random order through `ResetAt(deadline)`, reading the\n")
	p("  clock once per 64 re-arms, as an event loop handling a batch of heartbeats can.\n")
	p("- **ResetParallel**: Reset from 8 goroutines per core, each walking the 10^6 shared timers in its\n")
	p("  own random order.\n")
	p("- **ServerReset**, **ServerConnRead** `live=N/mode=loop|parallel|owned`: N timers (or idle conns over a\n")
	p("  fake conn whose Read returns at once) made on one goroutine, then one re-arm to 60 s from now by random\n")
	p("  index per operation, from one goroutine or from 8 goroutines per core (owned: each goroutine over its\n")
	p("  own block of them); see their section.\n")
	p("- **TimeoutsParallel**: re-arm one of 10^6 `int` keys to 90 s from now from 8 goroutines per core,\n")
	p("  each in its own random order. timingwheel: `Timeouts[int].Add`. runtime: a map from key to\n")
	p("  `*time.Timer` split into 64 shards each with its own mutex; re-arm is a lookup and `Reset`, a new\n")
	p("  key gets `time.AfterFunc` with a closure over the key.\n")
	p("- **ByValue**: arm + Stop of a `timingwheel.Timer` held in a struct (`Init` once, then\n")
	p("  `Reset` + `Stop`), against `time.AfterFunc(d, f).Stop()` and a reused `*time.Timer`.\n")
	p("- **Heap** `B/timer`, **HeapByValue** `B/timer`, **HeapPerKey** `B/key`, **HeapPerConn** `B/conn`,\n")
	p("  **HeapPeriodic**, **HeapIdleEvents** `B/conn`: `runtime.ReadMemStats` HeapAlloc after a GC, before\n")
	p("  and after arming, divided by the count. What callers keep anyway (a handle per timer, the\n")
	p("  connections) is allocated before the first reading. One sample per fresh process, and the\n")
	p("  runtime's measurements each in a process where no earlier benchmark grew the runtime's timer\n")
	p("  heaps (they keep their capacity). Their ns/op, B/op and allocs/op count the arming and the GCs.\n")
	p("- **Expiry**: 10^6 timers with deadlines uniform over one second, starting 2 s after arming begins\n")
	p("  (6 s for go-zero, which arms more slowly), so that arming is done first; real clock;\n")
	p("  `max-goroutines` is sampled every 5 ms.\n")
	p("- **Stall**: see the pauses section. Its ns/op counts arming the N timers. When no arm + Stop\n")
	p("  overlapped the call (at GOMAXPROCS=1 the timing goroutine may not run during it), its waits are\n")
	p("  reported as 0.\n")
	p("- **Advance** (timingwheel only) `ns/timer`: 10^3 or 10^6 timers 30–60 s out on a fake clock, then\n")
	p("  only the Advance calls are timed. `drive=jump`: `clock.Mock.Add` past every deadline, then one\n")
	p("  Advance. `drive=next`: step a fake clock to each `h.Next()` and Advance there, as the driver does.\n\n")
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
	p("- Importing it pulls in go.uber.org/automaxprocs, which would lower GOMAXPROCS to a container's\n")
	p("  CPU quota at init; the runs set GOMAXPROCS explicitly, which it honours.\n")
}

// implLabel names the implementation of a benchmark name.
func implLabel(name string) string {
	impl := ""
	for _, p := range strings.Split(name, "/") {
		if v, ok := strings.CutPrefix(p, "impl="); ok {
			impl = v
		}
	}
	switch impl {
	case "runtime":
		return "runtime"
	case "runtime-reused":
		return "runtime, reused *time.Timer"
	case "wheel":
		return "timingwheel"
	case "wheel-parallel":
		return "timingwheel, parallel callbacks"
	case "gozero":
		return "go-zero"
	}
	return impl
}
