package timingwheel

import (
	"math"
	"math/bits"
	"time"
)

// Stats is a snapshot of a hierarchy's counters, for a server to export to
// its metrics: how many timers are armed, how many were armed, fired and
// stopped since [New], and how late the callbacks ran. A driver starved of
// CPU shows up here as growing lateness rather than as mystery timeouts.
//
// The counters are kept per shard, under the lock each operation takes
// anyway, so keeping them costs the hot paths nothing measurable.
type Stats struct {
	Armed   int    // timers armed now, as Len reports
	Started uint64 // armings since New: AfterFunc, AtFunc, Every, a Reset, ResetAt or ResetEvery of an unarmed timer, and each periodic run after the first
	Fired   uint64 // callbacks started since New; of a periodic timer on an executor, runs handed over to it (so Started = Armed + Fired + Stopped)
	Stopped uint64 // Stop calls that stopped an armed timer

	// Lateness counts the fired timers by how late their callback was
	// collected, from the instant of the due tick (the deadline rounded up
	// to the tick) to the clock reading of the Advance that ran it.
	// Lateness[i] counts lateness below LatenessBound(i) and at or above
	// LatenessBound(i-1) (0 for bucket 0).
	Lateness [LatenessBuckets]uint64
	// MaxLateness is the largest lateness seen.
	MaxLateness time.Duration
}

// LatenessBuckets is the number of buckets of [Stats.Lateness].
const LatenessBuckets = 32

// LatenessBound returns the upper bound of bucket i of [Stats.Lateness]:
// 1µs for bucket 0, doubling with each bucket after it; the last bucket
// has no upper bound. For i < 0 it returns 0, the lower bound of bucket 0.
func LatenessBound(i int) time.Duration {
	if i < 0 {
		return 0
	}
	if i >= LatenessBuckets-1 {
		return time.Duration(1<<63 - 1)
	}
	return time.Microsecond << i
}

// LatenessQuantile returns an upper bound of the q-quantile (0 <= q <= 1)
// of the lateness of fired timers: the bound of the bucket that holds it,
// capped at MaxLateness. It returns 0 if nothing fired.
func (s *Stats) LatenessQuantile(q float64) time.Duration {
	var n uint64
	for _, c := range s.Lateness {
		n += c
	}
	if n == 0 {
		return 0
	}
	// The q-quantile is the sample of rank ceil(q·n): at least a fraction q
	// of the samples are at or below it.
	rank := uint64(math.Ceil(min(max(q, 0), 1) * float64(n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range s.Lateness {
		seen += c
		if seen >= rank {
			return min(LatenessBound(i), s.MaxLateness)
		}
	}
	return s.MaxLateness
}

// Stats returns a snapshot of the hierarchy's counters, at one instant: it
// holds every shard's lock while it reads them (as [Hierarchy.Len] does),
// each for as long as it takes to take the others. It is cheap enough to
// call once a second.
func (h *Hierarchy) Stats() Stats {
	h.mustBeMade("Stats")
	var st Stats
	h.lockAll() // one instant for all shards (see lockAll)
	defer h.unlockAll()
	for _, s := range h.shards {
		st.Armed += s.count
		st.Started += s.stats.armed
		st.Fired += s.stats.fired
		st.Stopped += s.stats.stopped
		for i, c := range s.stats.lateness.buckets {
			st.Lateness[i] += c
		}
		st.MaxLateness = max(st.MaxLateness, time.Duration(s.stats.lateness.max))
	}
	return st
}

// shardStats are one shard's counters, guarded by its lock.
type shardStats struct {
	armed, fired, stopped uint64
	lateness              histogram
}

// histogram counts durations in buckets of doubling width, from 1µs.
type histogram struct {
	buckets [LatenessBuckets]uint64
	max     int64 // ns
}

func (h *histogram) add(ns int64) {
	ns = max(ns, 0)
	i := bits.Len64(uint64(ns) / 1000)
	h.buckets[min(i, LatenessBuckets-1)]++
	h.max = max(h.max, ns)
}
