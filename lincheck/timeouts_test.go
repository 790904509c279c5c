package lincheck

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel"
)

// TestTimeouts_Linearizable: concurrent Add, Remove and Deadline of the same
// keys of one Timeouts set, with the expired callbacks (which sometimes
// re-add their key) and the Advances, form linearizable histories of the
// sequential set of docs/guarantees.md ("Timers held by value", "Exactly once"): a key is in the set from Add until it expires
// (its deadline due, never early) or is removed.
func TestTimeouts_Linearizable(t *testing.T) { runMatrix(t, func() subject { return &keyed{} }) }

// keyed is a subject of the int keys of one Timeouts set.
type keyed struct{ s *timingwheel.Timeouts[int] }

func (*keyed) String() string { return "timeouts" }

func (s *keyed) bind(h *hist, keys int) {
	s.s = timingwheel.NewTimeouts(h.tw, func(k int) {
		h.fired(h.adv, k)
		if h.rearm() { // re-arm the key that expired
			d := h.dur(h.cbRng)
			h.do(h.adv, input{kind: opAdd, key: k, x: d}, func() output {
				s.s.Add(k, time.Duration(d))
				return output{}
			})
		}
		h.mark(h.adv)
	})
}

func (s *keyed) op(h *hist, l *log, rng *rand.Rand, k int) {
	switch r := rng.IntN(100); {
	case r < 45:
		d := h.dur(rng)
		h.resets.Store(k, d)
		h.do(l, input{kind: opAdd, key: k, x: d}, func() output {
			s.s.Add(k, time.Duration(d))
			return output{}
		})
	case r < 55:
		h.do(l, input{kind: opRemove, key: k}, func() output {
			return output{ok: s.s.Remove(k)}
		})
	case r < 65:
		// Remove and Add again with the duration of the key's last Add:
		// on a Mock that has not moved, the deadline it had (issue 47:
		// another worker's Add, loaded before the Remove, must not land
		// on the new arming).
		d, ok := h.lastReset(k)
		if !ok {
			d = h.dur(rng)
		}
		h.do(l, input{kind: opRemove, key: k}, func() output {
			return output{ok: s.s.Remove(k)}
		})
		h.do(l, input{kind: opAdd, key: k, x: d}, func() output {
			s.s.Add(k, time.Duration(d))
			return output{}
		})
	default:
		h.do(l, input{kind: opKeyDeadline, key: k}, func() output {
			d, ok := s.s.Deadline(k)
			if d.IsZero() {
				return output{ok: ok, zero: true}
			}
			return output{ok: ok, dl: h.since(d)}
		})
	}
}
