package lincheck

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// The model itself, on hand-written histories: each bug it is meant to
// catch is rejected, and the concurrency the contract allows is accepted.
// Stamps are the real-time order; clocks are ns since ref, tick 10.

type step struct {
	client    int
	call, ret int64
	in        input
	out       output
}

func linearizable(t *testing.T, exact bool, steps ...step) bool {
	t.Helper()
	var ops []porcupine.Operation
	for _, s := range steps {
		ops = append(ops, porcupine.Operation{ClientId: s.client, Input: s.in, Call: s.call, Output: s.out, Return: s.ret})
	}
	return porcupine.CheckOperations(wheel{tick: 10, exact: exact}.model(), ops)
}

// assertVerdict fails t with why unless the model accepts the history of
// steps (accept) or rejects it (!accept).
func assertVerdict(t *testing.T, exact, accept bool, why string, steps ...step) {
	t.Helper()
	if linearizable(t, exact, steps...) != accept {
		t.Error(why)
	}
}

func reset(key int, d, b, a int64) input { return input{kind: opReset, key: key, x: d, b: b, a: a} }
func readDL(key int, b, a int64) input   { return input{kind: opDeadline, key: key, b: b, a: a} }
func fire(key int, b, a int64) input     { return input{kind: opFire, key: key, b: b, a: a} }
func advStart(T int64) input             { return input{kind: opAdvStart, key: -1, b: T, a: T} }

var advEnd = input{kind: opAdvEnd, key: -1}

// A Reset that completed first read the clock at 100; a Reset that began
// earlier but is ordered after it (its deadline is the one read last)
// cannot have read an earlier clock.
func TestModel_RejectsResetFromClockOlderThanAnEarlierReset(t *testing.T) {
	assertVerdict(t, false, false, "accepted a deadline from a clock read before a Reset ordered earlier",
		step{0, 1, 6, reset(0, 50, 90, 120), output{ok: true}}, // ordered second: true
		step{1, 2, 3, reset(0, 50, 100, 100), output{}},        // read 100, ordered first
		step{2, 7, 8, readDL(0, 130, 130), output{dl: 140}},    // 90+50: older than 100
	)
	assertVerdict(t, false, true, "rejected a Reset that read the clock after the other one",
		step{0, 1, 6, reset(0, 50, 90, 120), output{ok: true}},
		step{1, 2, 3, reset(0, 50, 100, 100), output{}},
		step{2, 7, 8, readDL(0, 130, 130), output{dl: 155}}, // 105+50: fine
	)
}

// Every change of the timer is ordered with the clock, Stop too: a Reset
// ordered after a Stop (it returned false) swapped against the Stop's
// unfiled word, so it read the clock after the Stop, at 100 or later.
func TestModel_RejectsResetFromClockOlderThanAStopOrderedBeforeIt(t *testing.T) {
	stop := func(key int, b, a int64) input { return input{kind: opStop, key: key, b: b, a: a} }
	assertVerdict(t, false, false, "accepted a deadline from a clock read before a Stop ordered earlier",
		step{0, 1, 2, reset(0, 50, 0, 0), output{}},
		step{1, 3, 6, reset(0, 50, 90, 120), output{}}, // false: after the Stop
		step{2, 4, 5, stop(0, 100, 100), output{ok: true}},
		step{3, 7, 8, readDL(0, 130, 130), output{dl: 140}}, // 90+50: before the Stop
	)
	assertVerdict(t, false, true, "rejected a Reset that read the clock after the Stop",
		step{0, 1, 2, reset(0, 50, 0, 0), output{}},
		step{1, 3, 6, reset(0, 50, 90, 120), output{}},
		step{2, 4, 5, stop(0, 100, 100), output{ok: true}},
		step{3, 7, 8, readDL(0, 130, 130), output{dl: 155}},
	)
}

// A Reset takes effect at its swap, a moment after its clock reading: a
// Deadline read in between, at a later clock, returns the old deadline. But
// once the Reset has returned, the old one never comes back.
func TestModel_DeadlineReadBetweenAResetsClockReadingAndItsSwap(t *testing.T) {
	assertVerdict(t, false, true, "rejected the old deadline read after the Reset's clock reading, before its swap",
		step{0, 1, 2, reset(0, 50, 0, 0), output{}},             // deadline 50
		step{0, 3, 6, reset(0, 50, 100, 120), output{ok: true}}, // read 100: deadline 150
		step{1, 4, 5, readDL(0, 110, 110), output{dl: 50}},      // the swap comes later
		step{2, 7, 8, readDL(0, 130, 130), output{dl: 150}},
	)
	assertVerdict(t, false, false, "accepted the old deadline read after the Reset returned",
		step{0, 1, 2, reset(0, 50, 0, 0), output{}},
		step{0, 3, 4, reset(0, 50, 100, 120), output{ok: true}},
		step{1, 5, 6, readDL(0, 130, 130), output{dl: 50}},
	)
}

// A Deadline read may only see the deadline of an arming, never one that
// no Reset in any order stores.
func TestModel_RejectsDeadlineNoArmingStored(t *testing.T) {
	assertVerdict(t, true, false, "accepted a deadline that no arming stored",
		step{0, 1, 4, reset(0, 50, 0, 0), output{}},
		step{1, 2, 3, readDL(0, 0, 0), output{dl: 70}},
	)
}

func TestModel_RejectsEarlyAndMissingFires(t *testing.T) {
	// Armed at 0+25, due at tick 30: firing at a clock of 29 is early.
	assertVerdict(t, true, false, "accepted a callback before its tick",
		step{0, 1, 2, reset(0, 25, 0, 0), output{}},
		step{1, 3, 4, fire(0, 29, 29), output{}},
	)
	assertVerdict(t, true, true, "rejected a callback at its tick",
		step{0, 1, 2, reset(0, 25, 0, 0), output{}},
		step{1, 3, 4, fire(0, 30, 30), output{}},
	)
	// An Advance at 30 that returned without firing it.
	assertVerdict(t, true, false, "accepted an Advance that left a due timer armed",
		step{0, 1, 2, reset(0, 25, 0, 0), output{}},
		step{1, 3, 4, advStart(30), output{}},
		step{1, 5, 6, advEnd, output{}},
	)
	// A second callback for one arming.
	assertVerdict(t, true, false, "accepted two callbacks for one arming",
		step{0, 1, 2, reset(0, 25, 0, 0), output{}},
		step{1, 3, 4, fire(0, 30, 30), output{}},
		step{1, 5, 6, fire(0, 40, 40), output{}},
	)
	// A Stop that returned true after the callback started.
	assertVerdict(t, true, false, "accepted Stop true after the callback started",
		step{0, 1, 2, reset(0, 25, 0, 0), output{}},
		step{1, 3, 4, fire(0, 30, 30), output{}},
		step{0, 5, 6, input{kind: opStop, key: 0, b: 30, a: 30}, output{ok: true}},
	)
}

// A Reset concurrent with an Advance may be ordered after its start: the
// Advance need not fire it. So may one that replaces a due arming the
// Advance had found ("Exactly once" and "Callbacks may call back" in docs/guarantees.md: it fires in the next Advance).
func TestModel_AcceptsResetConcurrentWithAdvance(t *testing.T) {
	assertVerdict(t, true, true, "rejected a Reset that an Advance running meanwhile did not fire",
		step{1, 1, 3, advStart(30), output{}},
		step{0, 2, 5, reset(0, -5, 30, 30), output{}},
		step{1, 6, 7, advEnd, output{}},
	)
	assertVerdict(t, true, true, "rejected a Reset that replaced an arming the running Advance had found due",
		step{0, 1, 2, reset(0, 5, 0, 0), output{}},
		step{1, 3, 5, advStart(30), output{}},
		step{0, 4, 6, reset(0, -5, 30, 30), output{ok: true}},
		step{1, 7, 8, advEnd, output{}},
	)
	// But the same Advance with no Reset meanwhile must fire it.
	assertVerdict(t, true, false, "accepted an Advance that left the arming it found due armed",
		step{0, 1, 2, reset(0, 5, 0, 0), output{}},
		step{1, 3, 5, advStart(30), output{}},
		step{0, 4, 6, readDL(0, 30, 30), output{dl: 5}},
		step{1, 7, 8, advEnd, output{}},
	)
}

// With the real clock the origin, and so the ticks, are known only within
// a tick: an Advance at 35 need not fire a deadline of 30 (due at 40 if
// the origin is at 0 mod 10) but must fire one of 25.
func TestModel_InexactOriginAllowsATick(t *testing.T) {
	assertVerdict(t, false, true, "rejected an Advance less than a tick after a deadline",
		step{0, 1, 2, reset(0, 30, 0, 0), output{}},
		step{1, 3, 4, advStart(35), output{}},
		step{1, 5, 6, advEnd, output{}},
	)
	assertVerdict(t, false, false, "accepted an Advance a tick after a deadline that did not fire it",
		step{0, 1, 2, reset(0, 25, 0, 0), output{}},
		step{1, 3, 4, advStart(35), output{}},
		step{1, 5, 6, advEnd, output{}},
	)
}

// Issue 47: a Reset(200) that read the clock at 0 and is held there; at
// 50 Stop returns true and Reset(50) returns false, armed again for 100,
// the deadline the held Reset loaded. The held Reset, released, returns
// true: ordered before the Stop the deadline would be 100, after the
// Reset(50) at least 250 (its reading no earlier than 50). A deadline of
// 200 is the later-move landing on the new arming from its old reading.
// The same with ResetAt(100) of a shared reading for the re-arm.
func TestModel_RejectsLaterMoveLandingOnAReArmForTheSameDeadline(t *testing.T) {
	stop := func(key int, b, a int64) input { return input{kind: opStop, key: key, b: b, a: a} }
	resetAt := func(key int, x, b, a int64) input { return input{kind: opResetAt, key: key, x: x, b: b, a: a} }
	for _, rearm := range []input{reset(0, 50, 50, 50), resetAt(0, 100, 50, 50)} {
		history := func(dl int64) []step {
			return []step{
				{0, 1, 2, reset(0, 100, 0, 0), output{}},
				{1, 3, 10, reset(0, 200, 0, 60), output{ok: true}}, // held after its reading at 0
				{2, 4, 5, stop(0, 50, 50), output{ok: true}},
				{2, 6, 7, rearm, output{}},
				{2, 11, 12, readDL(0, 60, 60), output{dl: dl}},
			}
		}
		assertVerdict(t, false, false, "accepted a later-move from a reading older than the re-arm it landed on ("+rearm.kind.String()+")", history(200)...)
		assertVerdict(t, false, true, "rejected the later-move taking effect last from a fresh reading ("+rearm.kind.String()+")", history(250)...)
	}
}
