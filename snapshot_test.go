package timingwheel

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Next, Len, Stats and Timeouts.Len each report one instant: a timer handed
// from one shard to another is seen once, not twice or not at all as it
// would be were the shards read one after another.

// TestSnapshot_NextSeesAHandOffAcrossShards: a timer is armed at every
// instant (each hand-off arms the new timer, in the other shard, before
// stopping the old), all with one deadline: Next must always report it.
func TestSnapshot_NextSeesAHandOffAcrossShards(t *testing.T) {
	h, clk := newFake(t, WithShards(2))
	// Shards are dealt in turn (WithClock): each hand-off arms in the
	// other shard.
	deadline := clk.Now().Add(time.Second)
	old := h.AtFunc(deadline, func() {})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	goUntilClosed(&wg, stop, func(int) {
		n := h.AtFunc(deadline, func() {})
		old.Stop()
		old = n
	})
	bad := 0
	for range 20000 {
		if next, ok := h.Next(); !ok || !next.Equal(deadline) {
			bad++
		}
	}
	close(stop)
	waitWithin(t, 10*time.Second, &wg, "the hand-offs")
	assert.Zero(t, bad, "Next reported a state that never existed (no timer, or another time)")
	assert.Equal(t, 1, h.Len())
}

// TestSnapshot_TimeoutsLenIsOneInstant: a set that always holds one key or
// two, the keys in different shards of the set, is never seen with 0 or 3.
func TestSnapshot_TimeoutsLenIsOneInstant(t *testing.T) {
	h, _ := newFake(t)
	s := NewTimeouts(h, func(int) {})
	// Two keys in different shards of the set.
	a, b := 0, 1
	for _, sha, _ := s.locate(a); ; b++ {
		if _, shb, _ := s.locate(b); shb != sha {
			break
		}
	}
	s.Add(a, time.Hour)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	x, y := a, b
	goUntilClosed(&wg, stop, func(int) {
		s.Add(y, time.Hour) // 2 keys
		s.Remove(x)         // 1
		x, y = y, x
	})
	bad := map[int]int{}
	for range 20000 {
		if n := s.Len(); n != 1 && n != 2 {
			bad[n]++
		}
	}
	close(stop)
	waitWithin(t, 10*time.Second, &wg, "the hand-offs")
	assert.Empty(t, bad, "Len reported counts the set never had")
}

// TestSnapshot_NextHoldsEveryShardAtOnce pins how Next gets its one
// instant: while it waits for one shard's lock it still holds the others'.
func TestSnapshot_NextHoldsEveryShardAtOnce(t *testing.T) {
	h, clk := newFake(t, WithShards(2))
	s0, s1 := h.shards[0], h.shards[1]
	dealNext(h, 0)
	h.AtFunc(clk.Now().Add(time.Second), func() {})
	s1.lock()
	done := make(chan bool, 1)
	go func() { _, ok := h.Next(); done <- ok }()
	deadline := time.Now().Add(5 * time.Second)
	for s1.waiting.Load() == 0 {
		if time.Now().After(deadline) {
			s1.mu.Unlock()
			t.Fatal("hung: Next never waited for the held shard")
		}
		time.Sleep(time.Millisecond)
	}
	held := !s0.mu.TryLock()
	if !held {
		s0.mu.Unlock()
	}
	s1.mu.Unlock()
	assert.True(t, held, "Next let shard 0 go before it had shard 1: its answer is not one instant")
	assert.True(t, recvWithin(t, 5*time.Second, done, "Next, once the shard was free"))
}

// TestSnapshot_TimeoutsLenHoldsEveryShardAtOnce: likewise for
// Timeouts.Len, over the set's own shards.
func TestSnapshot_TimeoutsLenHoldsEveryShardAtOnce(t *testing.T) {
	h, _ := newFake(t)
	s := NewTimeouts(h, func(int) {})
	last := &s.shards[timeoutShards-1]
	last.mu.Lock()
	done := make(chan int, 1)
	go func() { done <- s.Len() }()
	first := &s.shards[0]
	deadline := time.Now().Add(2 * time.Second)
	for first.mu.TryLock() { // until Len holds the first shard
		first.mu.Unlock()
		if time.Now().After(deadline) {
			last.mu.Unlock()
			t.Fatal("Len did not hold the first shard while it waited 2s for the last: its count is not one instant (or Len never started)")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // Len now waits for the last shard
	held := !first.mu.TryLock()
	if !held {
		first.mu.Unlock()
	}
	last.mu.Unlock()
	assert.True(t, held, "Len let the first shard go while it waited for the last: its count is not one instant")
	assert.Equal(t, 0, recvWithin(t, 5*time.Second, done, "Len, once the shard was free"))
}
