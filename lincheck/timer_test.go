package lincheck

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel"
)

// TestTimer_Linearizable: concurrent Reset, ResetAt, Stop and Deadline on
// the same timers, with their callbacks (which sometimes re-arm their own
// timer) and the Advances, form linearizable histories of the sequential
// Timer of docs/guarantees.md ("Never early, at most one tick late",
// "Exactly once", "Timers held by value").
func TestTimer_Linearizable(t *testing.T) { runMatrix(t, func() subject { return &timers{} }) }

// timers is a subject of timers held by value and bound with Init.
type timers struct{ ts []timingwheel.Timer }

func (*timers) String() string { return "timers" }

func (s *timers) bind(h *hist, keys int) {
	s.ts = make([]timingwheel.Timer, keys)
	for k := range s.ts {
		s.ts[k].Init(h.tw, func() {
			h.fired(h.adv, k)
			if h.rearm() { // the retransmit pattern
				d := h.dur(h.cbRng)
				h.do(h.adv, input{kind: opReset, key: k, x: d}, func() output {
					return output{ok: s.ts[k].Reset(time.Duration(d))}
				})
			}
			h.mark(h.adv)
		})
	}
}

func (s *timers) op(h *hist, l *log, rng *rand.Rand, k int) {
	t := &s.ts[k]
	switch r := rng.IntN(100); {
	case r < 30:
		d := h.dur(rng)
		h.resets.Store(k, d)
		h.do(l, input{kind: opReset, key: k, x: d}, func() output {
			return output{ok: t.Reset(time.Duration(d))}
		})
	case r < 38:
		x := h.recorder.now() + h.dur(rng)
		h.do(l, input{kind: opResetAt, key: k, x: x}, func() output {
			return output{ok: t.ResetAt(h.at(x))}
		})
	case r < 46:
		// One shared reading for a batch of re-arms (ResetAt's godoc):
		// the deadlines are equal more often than not, across workers
		// and timers.
		x := h.shared(rng)
		h.do(l, input{kind: opResetAt, key: k, x: x}, func() output {
			return output{ok: t.ResetAt(h.at(x))}
		})
	case r < 56:
		s.stopAndRearm(h, l, rng, k)
	case r < 72:
		h.do(l, input{kind: opStop, key: k}, func() output {
			return output{ok: t.Stop()}
		})
	default:
		s.deadline(h, l, k)
	}
}

// deadline records t.Deadline of timer k, and returns it (ok false for the
// zero Time).
func (s *timers) deadline(h *hist, l *log, k int) (dl int64, ok bool) {
	out := h.do(l, input{kind: opDeadline, key: k}, func() output {
		d := s.ts[k].Deadline()
		if d.IsZero() {
			return output{zero: true}
		}
		return output{dl: h.since(d)}
	})
	return out.dl, !out.zero
}

// stopAndRearm stops timer k and arms it again for the deadline it had
// (or, half the time, Resets it with the duration of its last Reset, the
// same deadline on a Mock that has not moved): the history issue 47
// found, where another worker's later-move, loaded before the Stop, must
// not land on the new arming.
func (s *timers) stopAndRearm(h *hist, l *log, rng *rand.Rand, k int) {
	t := &s.ts[k]
	dl, ok := s.deadline(h, l, k)
	h.do(l, input{kind: opStop, key: k}, func() output {
		return output{ok: t.Stop()}
	})
	if d, again := h.lastReset(k); again && rng.IntN(2) == 0 {
		h.do(l, input{kind: opReset, key: k, x: d}, func() output {
			return output{ok: t.Reset(time.Duration(d))}
		})
		return
	}
	if !ok {
		dl = h.shared(rng)
	}
	h.do(l, input{kind: opResetAt, key: k, x: dl}, func() output {
		return output{ok: t.ResetAt(h.at(dl))}
	})
}
