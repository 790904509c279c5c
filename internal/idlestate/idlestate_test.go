package idlestate

import (
	"math"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/timingwheel/timingwheel"
)

const ms = int64(time.Millisecond)

// newClock returns a hierarchy of 1 ms ticks on a mock clock.
func newClock(t *testing.T) (*clock.Mock, *timingwheel.Hierarchy) {
	t.Helper()
	mock := clock.NewMock()
	h, err := timingwheel.New(timingwheel.WithClock(mock))
	if err != nil {
		t.Fatal(err)
	}
	return mock, h
}

// judgeAt is the judge of a look at the clock's instant now (ns since the
// origin) for a timer armed for armed.
func judgeAt(t *testing.T, armed, now int64) (*timingwheel.Hierarchy, Judge) {
	t.Helper()
	mock, h := newClock(t)
	mock.Add(time.Duration(now))
	return h, NewJudge(h, h.Origin().Add(time.Duration(armed)))
}

func TestSatAdd_AnIdleOfTheLargestDurationIsNeverNotThePast(t *testing.T) {
	for _, mark := range []int64{0, 1, 5 * ms, math.MaxInt64 / 2, math.MaxInt64 - 1} {
		if got := SatAdd(mark, math.MaxInt64); got != Never {
			t.Errorf("SatAdd(%d, MaxInt64) = %d, want Never: it must not wrap negative", mark, got)
		}
	}
	if got := End(5*ms, 0); got != Never {
		t.Errorf("End without a lifetime = %d, want Never", got)
	}
	s := State{Marks: Start(5*ms, math.MaxInt64, 0), WriteIdle: math.MaxInt64}
	if got := s.Next(); got != Never {
		t.Errorf("Next of a conn whose idles are the largest Duration = %d, want Never (its timer stopped)", got)
	}
	_, j := judgeAt(t, 10*ms, 1<<62)
	if ev := s.Due(&j, LifetimeEnd); ev != None {
		t.Errorf("a conn whose idle is the largest Duration found %v due 146 years on, want None", ev)
	}
}

func TestDue_APausedConnHasOnlyItsLifetime(t *testing.T) {
	s := State{Marks: Start(0, 10*ms, 50*ms), WriteIdle: 10 * ms, Paused: true}
	if got := s.Next(); got != 50*ms {
		t.Errorf("Next of a paused conn = %d, want its lifetime's end %d", got, 50*ms)
	}
	_, j := judgeAt(t, 20*ms, 20*ms) // both idles passed long ago
	if ev := s.Due(&j, LifetimeEnd); ev != None {
		t.Errorf("a look at a paused conn found %v due, want None: Pause cancels every idle event the look has not started", ev)
	}
	_, j = judgeAt(t, 50*ms, 50*ms)
	if ev := s.Due(&j, LifetimeEnd); ev != LifetimeEnd {
		t.Errorf("a look at a paused conn at its lifetime's end found %v, want LifetimeEnd", ev)
	}
	s.Paused = false
	_, j = judgeAt(t, 20*ms, 20*ms)
	if ev := s.Due(&j, LifetimeEnd); ev != ReadIdle {
		t.Errorf("the same conn resumed found %v due, want ReadIdle", ev)
	}
}

func TestDue_EventsComeInOrderAndAfterTheReadEventTheWriteIsJudgedAfresh(t *testing.T) {
	s := State{Marks: Start(0, 10*ms, 10*ms), WriteIdle: 10 * ms}
	_, j := judgeAt(t, 10*ms, 10*ms)
	if ev := s.Due(&j, LifetimeEnd); ev != LifetimeEnd {
		t.Fatalf("all three due: %v first, want LifetimeEnd", ev)
	}
	s.End = Never
	if ev := s.Due(&j, LifetimeEnd); ev != ReadIdle {
		t.Fatalf("read and write idle due: %v first, want ReadIdle", ev)
	}
	s.Read = j.Now // the read-idle event ran
	if ev := s.Due(&j, WriteIdle); ev != WriteIdle {
		t.Fatalf("after the read-idle event: %v, want WriteIdle", ev)
	}
	s.Writing = true
	if ev := s.Due(&j, WriteIdle); ev != WriteBusy {
		t.Fatalf("with a Write in progress: %v, want WriteBusy (no event, the Write mark moves)", ev)
	}
}

// A look judges at the tick fired: a deadline that the clock has passed
// but that is due only at a later tick waits for the timer armed for it.
func TestJudge_ADeadlineOfALaterTickWaitsForItsTimer(t *testing.T) {
	_, j := judgeAt(t, 10*ms, 30*ms) // fired for 10 ms; the look runs at 30 ms
	if !j.Due(10 * ms) {
		t.Error("the deadline fired is not due")
	}
	if j.Due(10*ms + 1) {
		t.Error("a deadline of the next tick is due in the look of this one")
	}
	if j.Now != 30*ms {
		t.Errorf("Now = %d, want the clock's %d", j.Now, 30*ms)
	}
}

// The clock went back between the firing and the look (a clock.Mock set
// back; on a gnet loop, before the hop landed): the look judges at the
// clock, so the deadline it fired for is not due, and Next arms the timer
// for it again.
func TestJudge_AClockThatWentBackJudgesAtTheClock(t *testing.T) {
	_, j := judgeAt(t, 10*ms, 4*ms)
	if j.Due(10 * ms) {
		t.Error("the deadline fired is due though the clock went back before it")
	}
	if !j.Due(4 * ms) {
		t.Error("a deadline at the clock's reading is not due")
	}
	s := State{Marks: Start(0, 10*ms, 0)}
	if ev := s.Due(&j, LifetimeEnd); ev != None {
		t.Errorf("found %v due at a clock before the deadline", ev)
	}
	if got := s.Next(); got != 10*ms {
		t.Errorf("Next = %d, want the deadline again, %d", got, 10*ms)
	}
}

// Data moved at a clock reading behind the mark: the clock went back. The
// count starts again from the reading, and the timer, armed for the
// earlier deadline of the old mark, must be armed again.
func TestMoved_AReadingBehindTheMarkRestartsTheCountAndRearms(t *testing.T) {
	if m, rearm := Moved(5*ms, 7*ms); m != 7*ms || rearm {
		t.Errorf("Moved(5ms, 7ms) = %d, %v; want 7ms, false", m, rearm)
	}
	m, rearm := Moved(50*ms, 7*ms)
	if m != 7*ms || !rearm {
		t.Errorf("Moved(50ms, 7ms) = %d, %v; want 7ms, true", m, rearm)
	}
	s := State{Marks: Marks{Read: m, Idle: 10 * ms, End: Never}}
	if got := s.Next(); got != 17*ms {
		t.Errorf("Next after the clock went back = %d, want 17ms, earlier than the 60ms the timer was armed for", got)
	}
}
