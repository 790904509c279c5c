package lincheck

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/timingwheel/timingwheel/internal/watch"
)

// long reports whether TIMINGWHEEL_LONG=1 asks for the long run (CI).
var long = os.Getenv("TIMINGWHEEL_LONG") == "1"

// baseSeed is TIMINGWHEEL_SEED if set, to replay one seed in every
// configuration a -run pattern selects, else a fresh seed per process.
func baseSeed() (seed uint64, replay bool) {
	if s := os.Getenv("TIMINGWHEEL_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			panic("lincheck: TIMINGWHEEL_SEED=" + s + ": " + err.Error())
		}
		return n, true
	}
	return uint64(time.Now().UnixNano()), false
}

// recorder stamps the operations of one history. Stamps come from one
// atomic counter, so their order is an order in real time: an operation
// whose Return stamp is below another's Call stamp returned before the
// other was called.
type recorder struct {
	stamp atomic.Int64
	now   func() int64 // the hierarchy's clock, ns since ref
}

// log is the operations of one goroutine, or of whichever goroutine
// advances the hierarchy (its callbacks' events). It is only ever used by
// one goroutine at a time.
type log struct {
	client int
	name   string
	ops    []porcupine.Operation
	doing  atomic.Pointer[string] // what it is doing now, for the watchdog

	// mark is the stamp and clock of the last thing the advancing goroutine
	// did before a callback could start: the start of an Advance or the end
	// of the previous callback. A callback's timer was claimed after it.
	markStamp, markClock int64
}

func (l *log) set(what string) { l.doing.Store(&what) }

func (l *log) now() string {
	if p := l.doing.Load(); p != nil {
		return *p
	}
	return "starting"
}

// do calls f as operation in and records it with the clock before and
// after.
func (r *recorder) do(l *log, in input, f func() output) output {
	l.set(fmt.Sprintf("%v(%d)", in.kind, in.key))
	call := r.stamp.Add(1)
	in.b = r.now()
	out := f()
	in.a = r.now()
	l.ops = append(l.ops, porcupine.Operation{ClientId: l.client, Input: in, Call: call, Output: out, Return: r.stamp.Add(1)})
	l.set("between operations")
	return out
}

// mark records that the advancing goroutine is about to let callbacks
// start: nothing claimed before this point is still to start.
func (r *recorder) mark(l *log) {
	l.markStamp = r.stamp.Add(1)
	l.markClock = r.now()
}

// fired records the start of a callback for key, called first thing in it.
func (r *recorder) fired(l *log, key int) {
	ret := r.stamp.Add(1)
	a := r.now()
	in := input{kind: opFire, key: key, b: l.markClock, a: a}
	l.ops = append(l.ops, porcupine.Operation{ClientId: l.client, Input: in, Call: l.markStamp, Output: output{}, Return: ret})
}

// advance calls adv (an Advance) and records it as two operations: its
// start, with a clock of at least T (read before adv started), and its
// return, strictly after.
func (r *recorder) advance(l *log, adv func()) {
	l.set("Advance")
	call := r.stamp.Add(1)
	T := r.now()
	r.mark(l)
	adv()
	mid := r.stamp.Add(1)
	l.ops = append(l.ops,
		opAt(l.client, input{kind: opAdvStart, key: -1, b: T, a: T}, call, mid),
		opAt(l.client, input{kind: opAdvEnd, key: -1}, r.stamp.Add(1), r.stamp.Add(1)))
	l.set("between Advances")
}

// check runs porcupine on the operations of logs. On a violation it
// writes the visualization to a temporary file and fails with its path and
// the seed.
func check(t *testing.T, w wheel, seed uint64, about string, logs ...*log) {
	t.Helper()
	var ops []porcupine.Operation
	for _, l := range logs {
		ops = append(ops, l.ops...)
	}
	timeout := 20 * time.Second
	if long {
		timeout = time.Minute
	}
	model := w.model()
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	switch res {
	case porcupine.Ok:
		return
	case porcupine.Unknown:
		t.Logf("seed %d: %s: porcupine gave up after %v on %d operations (not a violation)", seed, about, timeout, len(ops))
		return
	}
	path := "(visualization not written)"
	if f, err := os.CreateTemp("", "lincheck-*.html"); err == nil {
		if err := porcupine.Visualize(model, info, f); err == nil {
			path = f.Name()
		}
		f.Close()
	}
	t.Errorf("seed %d: %s: the history of %d operations is not linearizable; visualization: %s\n"+
		"replay the scripts: TIMINGWHEEL_SEED=%d go test -race -run '^%s$'%s",
		seed, about, len(ops), path, seed, t.Name(), failing(w, ops))
}

// within runs f and fails the test if it does not return within d, saying
// what hung: the phase, and what each of logs was doing.
func within(t *testing.T, d time.Duration, seed uint64, phase string, f func(), logs ...*log) {
	t.Helper()
	if returned, _ := watch.ReturnsWithin(d, f); returned {
		return
	}
	var b strings.Builder
	for _, l := range logs {
		fmt.Fprintf(&b, "\n\t%s: %s", l.name, l.now())
	}
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	t.Fatalf("seed %d: %s hung for %v:%s\ngoroutines:\n%s", seed, phase, d, b.String(), buf)
}

// opAt is the operation in, called at stamp call and returned at ret.
func opAt(client int, in input, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: output{}, Return: ret}
}

// explain describes why ops, the operations of one timer or key, are not
// linearizable: the end of the longest linearization porcupine found, the
// state it leads to, and the operations that could come next, none of
// which the specification accepts there.
func explain(w wheel, ops []porcupine.Operation) string {
	m := w.model()
	m.Partition = nil
	_, info := porcupine.CheckOperationsVerbose(m, ops, 10*time.Second)
	var longest []porcupine.Operation
	for _, p := range info.PartialLinearizationsOperations() {
		for _, l := range p {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	var b strings.Builder
	states := []state{initState()}
	done := map[int64]bool{}
	for i, op := range longest {
		var next []state
		for _, s := range states {
			next = append(next, w.step(s, op.Input.(input), op.Output.(output))...)
		}
		states = next
		done[op.Call] = true
		if i >= len(longest)-6 {
			var ds []string
			for _, s := range states {
				ds = append(ds, describeState(s))
			}
			fmt.Fprintf(&b, "\n\t  [%d,%d] c%d %s\n\t      => %s", op.Call, op.Return, op.ClientId,
				describeOp(op.Input, op.Output), strings.Join(ds, " or "))
		}
	}
	first := int64(plusInf)
	for _, op := range ops {
		if !done[op.Call] {
			first = min(first, op.Return)
		}
	}
	fmt.Fprintf(&b, "\n\tthen none of these can come next:")
	for _, op := range ops {
		if !done[op.Call] && op.Call <= first {
			fmt.Fprintf(&b, "\n\t  [%d,%d] c%d %s", op.Call, op.Return, op.ClientId, describeOp(op.Input, op.Output))
		}
	}
	return b.String()
}

// failing returns an explanation for each timer or key whose operations
// are not linearizable.
func failing(w wheel, ops []porcupine.Operation) string {
	m := w.model()
	m.Partition = nil
	var b strings.Builder
	for _, p := range partitionByKey(ops) {
		if porcupine.CheckOperationsTimeout(m, p, 10*time.Second) == porcupine.Illegal {
			fmt.Fprintf(&b, "\n\tkey %d, after %d operations:%s", keyOf(p), len(p), explain(w, p))
			if os.Getenv("LINCHECK_DUMP") != "" {
				sort.Slice(p, func(i, j int) bool { return p[i].Call < p[j].Call })
				for _, op := range p {
					fmt.Fprintf(&b, "\n\t\t[%d,%d] c%d %s", op.Call, op.Return, op.ClientId, describeOp(op.Input, op.Output))
				}
			}
		}
	}
	return b.String()
}

func keyOf(ops []porcupine.Operation) int {
	for _, op := range ops {
		if k := op.Input.(input).key; k >= 0 {
			return k
		}
	}
	return -1
}
