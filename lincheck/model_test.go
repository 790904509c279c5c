package lincheck

import (
	"fmt"
	"math"

	"github.com/anishathalye/porcupine"
)

// All instants in a history are nanoseconds since a reference instant the
// test takes when it builds the hierarchy (ref). Deadlines in the model are
// far from the int64 limits, so sums of them need no saturation; the
// open ends of intervals are these.
const (
	minusInf = math.MinInt64 / 4
	plusInf  = math.MaxInt64 / 4
)

// kind is the kind of an operation of a history.
type kind uint8

const (
	opReset       kind = iota // Timer.Reset(d): d in input.x, reports armed
	opResetAt                 // Timer.ResetAt(t): t in input.x, reports armed
	opStop                    // Timer.Stop, reports armed
	opDeadline                // Timer.Deadline
	opAdd                     // Timeouts.Add(k, d): d in input.x
	opRemove                  // Timeouts.Remove(k), reports presence
	opKeyDeadline             // Timeouts.Deadline(k)
	opFire                    // a callback started (for a key: expired(k))
	opAdvStart                // an Advance whose clock was at least input.b began
	opAdvEnd                  // and returned
)

var kindNames = [...]string{"Reset", "ResetAt", "Stop", "Deadline", "Add", "Remove", "Deadline(k)", "fire", "AdvanceStart", "AdvanceEnd"}

func (k kind) String() string { return kindNames[k] }

// input is an operation's kind and arguments, with the clock readings
// taken just before it was called (b) and just after it returned (a).
// For opFire, b is the clock when the advancing goroutine last did
// something visible before the callback (began the Advance, or ended the
// previous callback), and a the clock read first thing in the callback.
// For opAdvStart, b is the clock read before Advance was called: the
// Advance read a clock of at least b.
type input struct {
	kind kind
	key  int // the timer or key; -1 for an Advance, which concerns all of them
	x    int64
	b, a int64
}

// output is what the operation returned: ok for Reset, ResetAt, Stop and
// Remove's result and for Deadline(k)'s presence; zero and dl for a
// deadline read (the zero Time, or the instant in ns since ref).
type output struct {
	ok   bool
	zero bool
	dl   int64
}

// wheel is what the model needs to know of the hierarchy: its tick, and
// whether its origin is known exactly (a Mock's time does not move while
// New runs; the real clock's does, so with it the rounding of a deadline
// to a tick is known only within a tick).
type wheel struct {
	tick   int64
	origin int64 // ns since ref, if exact
	exact  bool
}

// dueBy reports the latest deadline that may be due at clock T
// (due(D) <= T may hold only for D <= dueBy(T)), and sureBy the latest
// deadline that must be due at T. With an exact origin they are the same:
// the last tick at or before T.
func (w wheel) dueBy(T int64) int64 {
	if w.exact {
		return w.origin + floorDiv(T-w.origin, w.tick)*w.tick
	}
	return T // due(D) >= D
}

func (w wheel) sureBy(T int64) int64 {
	if w.exact {
		return w.dueBy(T)
	}
	return T - w.tick // due(D) < D + tick
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// state is what the sequential specification knows after a prefix of a
// linearization, for one timer or one key. The deadline of the last
// arming is known to lie in [lo, hi]. If tied, it was armed by Reset or
// Add at c+off, c being the clock reading at that arming; since the clock
// is monotonic, c is at most the reading at every later operation. The
// clock reading at the last operation linearized lies in [clo, chi].
//
// owe is set when an Advance began while the timer was armed and due at
// its clock: that arming must fire, or be cancelled (Stop, Remove) or
// replaced (Reset, Add), before the Advance returns. An arming that
// replaces it during the Advance may fire in the next one instead
// ("Never early, at most one tick late", "Exactly once" and "Callbacks may call back" in docs/guarantees.md).
type state struct {
	armed    bool // a timer is armed, a key is in the set
	ever     bool // armed at least once (else Timer.Deadline is the zero Time)
	owe      bool
	tied     bool
	off      int64
	lo, hi   int64
	clo, chi int64
}

func initState() state {
	return state{lo: minusInf, hi: plusInf, clo: minusInf, chi: plusInf}
}

// consistent reports whether some assignment of clock readings and
// deadline satisfies the state's constraints.
func (s *state) consistent() bool {
	if s.tied {
		// c <= current reading <= chi, and c >= lo-off makes the current
		// reading at least that too.
		s.hi = min(s.hi, s.chi+s.off)
		s.clo = max(s.clo, s.lo-s.off)
	}
	return s.lo <= s.hi && s.clo <= s.chi
}

// at linearizes an operation whose clock reading was in [b, a]: no earlier
// than the previous operation's.
func (s *state) at(b, a int64) bool {
	s.clo, s.chi = max(s.clo, b), a
	return s.consistent()
}

// pin records that the deadline was read as dl.
func (s *state) pin(dl int64) bool {
	s.lo, s.hi = max(s.lo, dl), min(s.hi, dl)
	return s.consistent()
}

// step is the sequential specification of one timer (or key) of w. It
// returns every state the operation may lead to: none if it cannot
// happen, two where an Advance may or may not have found the timer due.
func (w wheel) step(s state, in input, out output) []state {
	if ok, next := w.stepOne(s, in, out); ok {
		return next
	}
	return nil
}

func (w wheel) stepOne(s state, in input, out output) (bool, []state) {
	one := func(ok bool) (bool, []state) {
		return ok && s.consistent(), []state{s}
	}
	// A deadline read is ordered with the operations that change the
	// timer, not with the clock: it reads no clock, and a Reset takes
	// effect a moment after its clock reading, so a read in between
	// returns the old deadline ("Reset" in docs/guarantees.md). Every
	// operation that changes the timer is ordered with the clock: a
	// Reset's swap fails, and it reads the clock again, if any other
	// change landed after its reading.
	switch in.kind {
	case opAdvStart, opAdvEnd, opDeadline, opKeyDeadline:
	default:
		if !s.at(in.b, in.a) {
			return false, nil
		}
	}
	switch in.kind {
	case opReset, opAdd:
		if in.kind == opReset && out.ok != s.armed {
			return false, nil
		}
		s.armed, s.ever, s.owe, s.tied, s.off = true, true, false, true, in.x
		s.lo, s.hi = s.clo+in.x, s.chi+in.x
	case opResetAt:
		if out.ok != s.armed {
			return false, nil
		}
		s.armed, s.ever, s.owe, s.tied, s.off = true, true, false, false, 0
		s.lo, s.hi = in.x, in.x
	case opStop, opRemove:
		if out.ok != s.armed {
			return false, nil
		}
		s.armed, s.owe = false, false
	case opDeadline:
		if !s.ever || out.zero {
			return one(!s.ever && out.zero)
		}
		return one(s.pin(out.dl))
	case opKeyDeadline:
		if out.ok != s.armed {
			return false, nil
		}
		if !s.armed {
			return one(out.zero)
		}
		return one(!out.zero && s.pin(out.dl))
	case opFire:
		// Never early: the Advance's clock, at most a, has reached the
		// deadline's tick.
		if !s.armed {
			return false, nil
		}
		s.armed, s.owe = false, false
		s.hi = min(s.hi, w.dueBy(in.a))
	case opAdvStart:
		// The Advance's clock is at least b: an armed timer that is
		// surely due then must fire before it returns; one that it did
		// not find due was not due.
		due := w.sureBy(in.b)
		if !s.armed || s.lo > due {
			return one(true)
		}
		owes := s
		owes.owe, owes.hi = true, min(s.hi, due)
		if s.hi <= due {
			s = owes
			return one(true)
		}
		s.lo = due + 1
		var next []state
		for _, c := range []state{owes, s} {
			if c.consistent() {
				next = append(next, c)
			}
		}
		return len(next) > 0, next
	case opAdvEnd:
		return one(!s.owe)
	}
	return one(true)
}

// model returns the porcupine model of the timers (or keys) of w, one
// partition per timer; an Advance belongs to every partition.
func (w wheel) model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: partitionByKey,
		Init:      func() []any { return []any{initState()} },
		Step: func(s, in, out any) []any {
			var next []any
			for _, n := range w.step(s.(state), in.(input), out.(output)) {
				next = append(next, n)
			}
			return next
		},
		DescribeOperation: describeOp,
		DescribeState:     describeState,
	}
	return nm.ToModel()
}

func describeState(v any) string {
	s := v.(state)
	dl := fmt.Sprintf("[%d, %d]", s.lo, s.hi)
	if s.lo == s.hi {
		dl = fmt.Sprint(s.lo)
	}
	if !s.ever {
		dl = "zero"
	}
	owe := ""
	if s.owe {
		owe = " (the running Advance must fire it)"
	}
	return fmt.Sprintf("armed=%v deadline=%s clock=[%d, %d]%s", s.armed, dl, s.clo, s.chi, owe)
}

func partitionByKey(h []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[int][]porcupine.Operation{}
	var all []porcupine.Operation
	for _, op := range h {
		if k := op.Input.(input).key; k >= 0 {
			byKey[k] = append(byKey[k], op)
		} else {
			all = append(all, op)
		}
	}
	var parts [][]porcupine.Operation
	for _, ops := range byKey {
		parts = append(parts, append(ops, all...))
	}
	return parts
}

func describeOp(v, r any) string {
	in, out := v.(input), r.(output)
	clk := fmt.Sprintf(" @[%d, %d]", in.b, in.a)
	switch in.kind {
	case opReset, opAdd:
		return fmt.Sprintf("%v(%d, %d) -> %v%s", in.kind, in.key, in.x, out.ok, clk)
	case opResetAt:
		return fmt.Sprintf("ResetAt(%d, %d) -> %v%s", in.key, in.x, out.ok, clk)
	case opStop, opRemove:
		return fmt.Sprintf("%v(%d) -> %v%s", in.kind, in.key, out.ok, clk)
	case opDeadline, opKeyDeadline:
		dl := "zero"
		if !out.zero {
			dl = fmt.Sprint(out.dl)
		}
		if in.kind == opKeyDeadline {
			dl += fmt.Sprintf(", %v", out.ok)
		}
		return fmt.Sprintf("%v(%d) -> %s%s", in.kind, in.key, dl, clk)
	case opFire:
		return fmt.Sprintf("fire(%d)%s", in.key, clk)
	case opAdvStart:
		return fmt.Sprintf("Advance at >= %d began", in.b)
	}
	return "Advance returned"

}
