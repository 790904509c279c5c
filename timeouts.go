package timingwheel

import (
	"hash/maphash"
	"sync"
	"time"
)

// Timeouts is a set of keys that each expire at their own deadline: the
// shape of per-connection idle timeouts. Add a key when a connection opens
// and again on each heartbeat (which pushes its deadline back), Remove it
// when the connection closes, and the expired function is called with the
// key of every connection that went silent.
//
// A key is in the set from Add until it expires or is removed. expired runs
// once per expiry, on the goroutine that advances the hierarchy, with no
// lock held; by then the key is no longer in the set, and expired may call
// any method of the set, for example Add to re-arm the key. A key that is
// re-armed or removed before expired runs for it is not reported.
//
// Timeouts is safe for concurrent use by multiple goroutines. It holds one
// [Timer] per key and releases it when the key expires or is removed.
// Create one with [NewTimeouts]; the zero value is not usable.
type Timeouts[K comparable] struct {
	h       *Hierarchy
	expired func(K)
	seed    maphash.Seed
	shards  [timeoutShards]timeoutShard[K]
}

// The keys are spread over shards, each with its own lock, so that the
// heartbeats of many connections do not queue on one mutex.
const timeoutShards = 16

type timeoutShard[K comparable] struct {
	mu sync.Mutex
	m  map[K]*Timer
	_  [64]byte // keep neighbouring shards' locks off one cache line
}

// NewTimeouts returns an empty set whose keys expire on h, calling expired
// with each key that expires. It panics if h or expired is nil.
func NewTimeouts[K comparable](h *Hierarchy, expired func(K)) *Timeouts[K] {
	if h == nil {
		panic("timingwheel: NewTimeouts called with a nil Hierarchy")
	}
	if expired == nil {
		panic("timingwheel: NewTimeouts called with a nil expired func")
	}
	s := &Timeouts[K]{h: h, expired: expired, seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = make(map[K]*Timer)
	}
	return s
}

func (s *Timeouts[K]) shard(k K) *timeoutShard[K] {
	return &s.shards[maphash.Comparable(s.seed, k)%timeoutShards]
}

// Add arms k to expire d from now, adding it to the set, or, if k is in the
// set, re-arms it with the new deadline (later or earlier). Re-arming a key
// allocates nothing. A d <= 0 expires k on the next [Hierarchy.Advance].
func (s *Timeouts[K]) Add(k K, d time.Duration) { s.add(k, d) }

// add is Add; it reports whether k was newly added (not re-armed).
func (s *Timeouts[K]) add(k K, d time.Duration) bool {
	w := s.h.after(d) // read the clock before taking the lock
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if t, ok := sh.m[k]; ok {
		t.resetTo(s.h, w)
		return false
	}
	t := &Timer{h: s.h}
	t.f = func() { s.fire(sh, k, t) }
	sh.m[k] = s.h.arm(t, w)
	return true
}

// fire is the callback of k's timer t.
func (s *Timeouts[K]) fire(sh *timeoutShard[K], k K, t *Timer) {
	sh.mu.Lock()
	// Between t firing and this lock, Add may have re-armed t (report
	// nothing: the key is live again), or Remove may have taken k out.
	if sh.m[k] != t || t.filed.Load() != unarmed {
		sh.mu.Unlock()
		return
	}
	delete(sh.m, k)
	sh.mu.Unlock()
	s.expired(k)
}

// Remove takes k out of the set. It reports whether k was in the set; if
// so, expired will not be called for it.
func (s *Timeouts[K]) Remove(k K) bool {
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t, ok := sh.m[k]
	if !ok {
		return false
	}
	delete(sh.m, k)
	t.Stop()
	return true
}

// Deadline returns the deadline k was last armed with, and whether k is in
// the set.
func (s *Timeouts[K]) Deadline(k K) (time.Time, bool) {
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t, ok := sh.m[k]
	if !ok {
		return time.Time{}, false
	}
	return t.Deadline(), true
}

// Len returns the number of keys in the set.
func (s *Timeouts[K]) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}
