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
	case r < 35:
		d := h.dur(rng)
		h.do(l, input{kind: opReset, key: k, x: d}, func() output {
			return output{ok: t.Reset(time.Duration(d))}
		})
	case r < 50:
		x := h.recorder.now() + h.dur(rng)
		h.do(l, input{kind: opResetAt, key: k, x: x}, func() output {
			return output{ok: t.ResetAt(h.at(x))}
		})
	case r < 70:
		h.do(l, input{kind: opStop, key: k}, func() output {
			return output{ok: t.Stop()}
		})
	default:
		h.do(l, input{kind: opDeadline, key: k}, func() output {
			d := t.Deadline()
			if d.IsZero() {
				return output{zero: true}
			}
			return output{dl: h.since(d)}
		})
	}
}
