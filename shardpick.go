package timingwheel

// The shard a goroutine's new timers go to. Each processor keeps to one
// shard, so that goroutines on different cores neither share a lock nor
// write a shared cache line, and one that finds its shard's lock held by
// another processor moves on to the next.

// pickShard returns the shard for a new timer. With a clock given by
// WithClock, shards are dealt in turn, so that where a timer goes, and so
// the order of callbacks due at one tick (shard by shard, in index order),
// follows the calls alone: the same calls give the same order. Otherwise
// it is the current processor's shard.
// sync.Pool keeps one item per processor, so goroutines on one core keep
// using one shard, and cores share one only when there are fewer shards
// than processors, or after prefer moved one. The pool drops its items at
// garbage collections, and the processors are dealt shards afresh: those
// that came to share one part again.
func (h *Hierarchy) pickShard() *shard {
	if len(h.shards) == 1 {
		return h.shards[0]
	}
	if h.inTurn {
		return h.shards[uint64(h.rr.Add(1)-1)%uint64(len(h.shards))]
	}
	s := h.hints.Get().(*shard)
	h.hints.Put(s)
	return s
}

// lockAnyShard locks and returns a shard other than s whose lock is free,
// or, if every lock is held, waits for s's.
func (h *Hierarchy) lockAnyShard(s *shard) *shard {
	for i := 1; i < len(h.shards); i++ {
		o := h.shards[(s.idx+i)%len(h.shards)]
		if o.mu.TryLock() {
			h.prefer(o)
			return o
		}
	}
	s.lock()
	return s
}

// prefer makes s the current processor's shard from now on (until the
// pool drops it). Processors can come to share a shard (more of them than
// shards, GOMAXPROCS raised after New, an earlier prefer): then they meet
// on its lock, and the one that finds it held moves on.
func (h *Hierarchy) prefer(s *shard) {
	if h.inTurn {
		return // dealt in turn
	}
	h.hints.Get() // most likely this processor's
	h.hints.Put(s)
}
