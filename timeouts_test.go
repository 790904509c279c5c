package timingwheel

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTimeouts_SeedScenario is the use case the project started from:
// 10,000 connections with a 60s idle timeout; the even ones heartbeat every
// 20s, the odd ones go silent. Exactly the odd ones expire, at 60s.
func TestTimeouts_SeedScenario(t *testing.T) {
	h, mock := newMock(t)
	start := mock.Now()
	const n = 10000
	var mu sync.Mutex
	expired := map[int]time.Duration{}
	set := NewTimeouts(h, func(k int) {
		mu.Lock()
		expired[k] = mock.Now().Sub(start)
		mu.Unlock()
	})
	for k := range n {
		set.Add(k, time.Minute)
	}
	require.Equal(t, n, set.Len())
	for step := 1; step <= 6; step++ { // 20s steps to 2 minutes
		mock.Add(20 * time.Second)
		for k := 0; k < n; k += 2 {
			set.Add(k, time.Minute) // heartbeat
		}
		h.Advance()
		mu.Lock()
		got := len(expired)
		mu.Unlock()
		if step < 3 {
			require.Zero(t, got, "expired before 60s, at step %d", step)
		} else {
			require.Equal(t, n/2, got, "at step %d", step)
		}
	}
	for k := range n {
		at, gone := expired[k]
		d, in := set.Deadline(k)
		if k%2 == 1 {
			assert.True(t, gone, "silent key %d not expired", k)
			assert.Equal(t, time.Minute, at, "key %d", k)
			assert.False(t, in)
		} else {
			assert.False(t, gone, "heartbeating key %d expired", k)
			assert.True(t, in)
			assert.Equal(t, mock.Now().Add(time.Minute), d)
		}
	}
	assert.Equal(t, n/2, set.Len())
	assert.Equal(t, n/2, h.Len())
}

func TestTimeouts_PerItemTimeoutsFireInDeadlineOrder(t *testing.T) {
	h, clk := newFake(t)
	var got []time.Duration
	set := NewTimeouts(h, func(d time.Duration) { got = append(got, d) })
	r := rand.New(rand.NewPCG(1, 2))
	var want []time.Duration
	for range 1000 {
		d := 100*time.Millisecond + time.Duration(r.Int64N(int64(2*time.Hour)))
		d = d.Truncate(time.Millisecond)
		if slices.Contains(want, d) {
			continue
		}
		want = append(want, d)
		set.Add(d, d) // the key is its own timeout
	}
	clk.Add(3 * time.Hour)
	h.Advance()
	slices.Sort(want)
	assert.Equal(t, want, got)
	assert.Zero(t, set.Len())
}

func TestTimeouts_ExpiredSeesKeyGoneAndMayRearm(t *testing.T) {
	h, clk := newFake(t)
	var set *Timeouts[string]
	count := 0
	set = NewTimeouts(h, func(k string) {
		count++
		_, in := set.Deadline(k)
		assert.False(t, in, "key still in the set inside expired")
		assert.Zero(t, set.Len())
		if count < 3 {
			set.Add(k, time.Second) // re-arm from the listener
		}
	})
	set.Add("conn", time.Second)
	for range 5 {
		clk.Add(time.Second)
		h.Advance()
	}
	assert.Equal(t, 3, count)
	assert.Zero(t, set.Len())
	assert.False(t, set.Remove("conn"))
}

func TestTimeouts_RemoveAndAdd(t *testing.T) {
	h, clk := newFake(t)
	var expired []string
	set := NewTimeouts(h, func(k string) { expired = append(expired, k) })
	set.Add("a", time.Second)
	set.Add("b", time.Second)
	set.Add("a", 3*time.Second) // re-arm later
	assert.True(t, set.Remove("b"))
	assert.False(t, set.Remove("b"))
	d, ok := set.Deadline("a")
	assert.True(t, ok)
	assert.Equal(t, clk.Now().Add(3*time.Second), d)
	clk.Add(2 * time.Second)
	h.Advance()
	assert.Empty(t, expired)
	set.Add("a", time.Second) // re-arm earlier
	clk.Add(time.Second)
	h.Advance()
	assert.Equal(t, []string{"a"}, expired)
	assert.Zero(t, h.Len())
}

func TestTimeouts_ReArmAllocatesNothing(t *testing.T) {
	h, _ := newFake(t)
	set := NewTimeouts(h, func(int) {})
	for k := range 1000 {
		set.Add(k, time.Minute)
	}
	allocs := testing.AllocsPerRun(1000, func() { set.Add(7, time.Minute) })
	assert.Zero(t, allocs)
}

// TestTimeouts_RemoveRacesExpiry removes and re-adds keys from several
// goroutines while the clock moves and the hierarchy advances. Each time a
// key enters the set it leaves exactly once: expired, or Remove returning
// true; never both, never twice.
func TestTimeouts_RemoveRacesExpiry(t *testing.T) {
	h, clk := newFake(t, WithLevels(16, 16))
	const keys = 64
	var entered, left [keys]atomic.Int64
	set := NewTimeouts(h, func(k int) { left[k].Add(1) })
	stopAdvancing := advanceContinuously(h, clk)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 5))
			for range 5000 {
				k := r.IntN(keys)
				if r.IntN(2) == 0 {
					if set.Remove(k) {
						left[k].Add(1)
					}
				} else if set.add(k, time.Duration(r.IntN(20))*time.Millisecond) {
					entered[k].Add(1)
				}
			}
		})
	}
	wg.Wait()
	stopAdvancing()
	clk.Add(time.Hour)
	h.Advance()
	assert.Zero(t, set.Len())
	assert.Zero(t, h.Len())
	var in, out int64
	for k := range keys {
		assert.Equal(t, entered[k].Load(), left[k].Load(), "key %d: entered vs expired+removed", k)
		in, out = in+entered[k].Load(), out+left[k].Load()
	}
	t.Logf("keys entered the set %d times, left %d times", in, out)
}

// TestTimeouts_NoLeak churns 10^6 keys through a set and checks the heap
// comes back to where it started.
func TestTimeouts_NoLeak(t *testing.T) {
	if testing.Short() {
		t.Skip("churns 10^6 keys")
	}
	h, clk := newFake(t)
	set := NewTimeouts(h, func(int) {})
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	churn := func(base int) {
		for k := range 10000 {
			set.Add(base+k, time.Duration(k%1000)*time.Millisecond)
			if k%3 == 0 {
				set.Remove(base + k)
			}
		}
		clk.Add(time.Second)
		h.Advance()
	}
	churn(0) // warm up: the wheel's levels and the map's buckets
	before := heap()
	for round := 1; round <= 100; round++ {
		churn(round * 10000)
	}
	after := heap()
	assert.Zero(t, set.Len())
	assert.Zero(t, h.Len())
	// Go maps do not shrink; allow the map's buckets for one round of keys.
	t.Logf("heap before %d B, after 10^6 churned keys %d B", before, after)
	assert.Less(t, int64(after)-int64(before), int64(2<<20), "heap grew by more than 2 MiB")
}

// loadedTimeouts returns a set holding the keys 0 to live-1, a minute out.
func loadedTimeouts(b *testing.B, live int) *Timeouts[int] {
	h, err := New()
	require.NoError(b, err)
	set := NewTimeouts(h, func(int) {})
	for k := range live {
		set.Add(k, time.Minute)
	}
	return set
}

func BenchmarkTimeouts_AddRearm(b *testing.B) {
	const live = 1_000_000
	set := loadedTimeouts(b, live)
	order := rand.New(rand.NewPCG(1, 1)).Perm(live) // heartbeats arrive in random order
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		set.Add(order[i], time.Minute)
		i++
		if i == live {
			i = 0
		}
	}
}

// BenchmarkTimeouts_AddRearmParallel is the heartbeat path of a busy server:
// many goroutines re-arm random keys of one set.
func BenchmarkTimeouts_AddRearmParallel(b *testing.B) {
	const live = 1_000_000
	set := loadedTimeouts(b, live)
	b.ReportAllocs()
	b.ResetTimer() // the setup above allocates
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(rand.Uint64(), 1))
		for pb.Next() {
			set.Add(r.IntN(live), time.Minute)
		}
	})
}
