package timingwheel

import (
	"fmt"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
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
	mustReturn(t, 30*time.Second, "Add of 10,000 keys", func() {
		for k := range n {
			set.Add(k, time.Minute)
		}
	})
	require.Equal(t, n, set.Len())
	for step := 1; step <= 6; step++ { // 20s steps to 2 minutes
		mock.Add(20 * time.Second)
		mustReturn(t, 30*time.Second, fmt.Sprintf("step %d: the heartbeats of 5,000 keys and an Advance", step), func() {
			for k := 0; k < n; k += 2 {
				set.Add(k, time.Minute) // heartbeat
			}
			h.Advance()
		})
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
	advanceWithin(t, h, "1000 keys expiring")
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
		advanceWithin(t, h, "a second, the listener re-adding its key")
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
	advanceWithin(t, h, "two seconds")
	assert.Empty(t, expired)
	set.Add("a", time.Second) // re-arm earlier
	clk.Add(time.Second)
	advanceWithin(t, h, "the key re-armed earlier")
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
	stopAdvancing := advanceContinuously(t, h, clk)
	var wg sync.WaitGroup
	goRandom(&wg, 4, 5, func(_ int, r *rand.Rand) {
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
	waitWithin(t, 30*time.Second, &wg, "the goroutines adding and removing keys")
	stopAdvancing()
	clk.Add(time.Hour)
	advanceWithin(t, h, "an hour after the races")
	assert.Zero(t, set.Len())
	assert.Zero(t, h.Len())
	var in, out int64
	for k := range keys {
		assert.Equal(t, entered[k].Load(), left[k].Load(), "key %d: entered vs expired+removed", k)
		in, out = in+entered[k].Load(), out+left[k].Load()
	}
	t.Logf("keys entered the set %d times, left %d times", in, out)
}

// TestTimeouts_NoLeak churns 10^6 keys through a set (with
// TIMINGWHEEL_LONG=1; 2.5 x 10^5 by default, which still shows a leak of
// 9 B a key) and checks the heap comes back to where it started.
func TestTimeouts_NoLeak(t *testing.T) {
	if testing.Short() {
		t.Skip("churns 10^6 keys")
	}
	h, clk := newFake(t)
	set := NewTimeouts(h, func(int) {})
	churn := func(base int) {
		for k := range 10000 {
			set.Add(base+k, time.Duration(k%1000)*time.Millisecond)
			if k%3 == 0 {
				set.Remove(base + k)
			}
		}
		clk.Add(time.Second)
		advanceWithin(t, h, "a round of churned keys")
	}
	churn(0) // warm up: the wheel's levels and the map's buckets
	before := heapAlloc()
	rounds := volume(25, 100)
	for round := 1; round <= rounds; round++ {
		churn(round * 10000)
	}
	after := heapAlloc()
	assert.Zero(t, set.Len())
	assert.Zero(t, h.Len())
	// Go maps do not shrink; allow the map's buckets for one round of keys.
	t.Logf("heap before %d B, after %d churned keys %d B", before, rounds*10000, after)
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

// TestTimeouts_KeyNotEqualToItself is the regression test for NaN keys,
// which a map can never find again: Add refuses them with a clear panic
// and the set and hierarchy stay as they were.
func TestTimeouts_KeyNotEqualToItself(t *testing.T) {
	h, clk := newFake(t)
	var expired []float64
	set := NewTimeouts(h, func(k float64) { expired = append(expired, k) })
	set.Add(1.5, time.Millisecond)
	assert.PanicsWithValue(t, "timingwheel: Timeouts key is not equal to itself (a NaN?): it could never be found again",
		func() { set.Add(math.NaN(), time.Millisecond) })
	assert.Panics(t, func() { set.Add(math.NaN(), time.Millisecond) })
	assert.Equal(t, 1, set.Len())
	assert.Equal(t, 1, h.Len())
	assert.False(t, set.Remove(math.NaN()), "Remove of a NaN finds nothing, as in a map")
	_, ok := set.Deadline(math.NaN())
	assert.False(t, ok)

	type pair struct {
		a int
		b float64
	}
	ps := NewTimeouts(h, func(pair) {})
	assert.Panics(t, func() { ps.Add(pair{1, math.NaN()}, time.Second) }, "a struct holding a NaN")
	as := NewTimeouts(h, func(any) {})
	assert.Panics(t, func() { as.Add(any(math.NaN()), time.Second) }, "an interface holding a NaN")
	assert.Panics(t, func() { as.Add([]int{1}, time.Second) }, "a key of a type that is not comparable")
	as.Add("ok", time.Millisecond)
	assert.Equal(t, 1, as.Len())
	assert.Equal(t, 0, ps.Len())

	clk.Add(time.Second)
	assert.Equal(t, 2, advanceWithin(t, h, "the keys that are equal to themselves"))
	assert.Equal(t, []float64{1.5}, expired)
	assert.Equal(t, 0, set.Len())
	assert.Equal(t, 0, as.Len())
	assert.Equal(t, 0, h.Len())
	mustCheck(t, h)
}

// TestTimeouts_ZeroValuePanicsClearly: a zero set is not usable, and says so.
func TestTimeouts_ZeroValuePanicsClearly(t *testing.T) {
	var s Timeouts[int]
	assert.PanicsWithValue(t, "timingwheel: Timeouts.Add called on a set not created by NewTimeouts",
		func() { s.Add(1, time.Second) })
	var h Hierarchy
	assert.PanicsWithValue(t, "timingwheel: AfterFunc called on a Hierarchy not created by New",
		func() { h.AfterFunc(time.Second, func() {}) })
	assert.Panics(t, func() { NewTimeouts(&h, func(int) {}) })
}

// TestTimeouts_ReusesStorage: keys that expired or were removed leave their
// entries for new keys, so a set that churns keys allocates nothing once it
// has held as many, and the table keeps working across many removals.
func TestTimeouts_ReusesStorage(t *testing.T) {
	h, clk := newFake(t)
	var expired atomic.Int64
	set := NewTimeouts(h, func(int) { expired.Add(1) })
	for k := range 5000 {
		set.Add(k, time.Millisecond)
	}
	clk.Add(time.Second)
	require.Equal(t, 5000, advanceWithin(t, h, "5000 keys expiring"))
	next := 5000
	allocs := testing.AllocsPerRun(20, func() {
		for range 1000 {
			set.Add(next, time.Minute)
			set.Remove(next - 500)
			next++
		}
	})
	assert.Zero(t, allocs, "adding keys into reused entries")
	assert.Equal(t, 500, set.Len())
	for k := next - 500; k < next; k++ {
		_, ok := set.Deadline(k)
		require.True(t, ok, "key %d", k)
	}
	assert.Equal(t, int64(5000), expired.Load())
	mustCheck(t, h)
}

// TestTimeouts_HeapPerKey measures the set's heap per int key against what
// users write without it: a map of *time.Timer from time.AfterFunc with a
// closure over the key. The set must take well under half.
func TestTimeouts_HeapPerKey(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 2 x 200,000 keys")
	}
	n := 200_000
	if v := os.Getenv("TIMINGWHEEL_HEAP_KEYS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	h := mustNew(t)
	before := heapAlloc()
	set := NewTimeouts(h, func(int) {})
	for k := range n {
		set.Add(k, time.Hour)
	}
	wheel := float64(heapAlloc()-before) / float64(n)
	runtime.KeepAlive(set)

	before = heapAlloc()
	m := make(map[int]*time.Timer)
	for k := range n {
		m[k] = time.AfterFunc(time.Hour, func() { _ = k })
	}
	baseline := float64(heapAlloc()-before) / float64(n)
	for _, tm := range m {
		tm.Stop()
	}
	runtime.KeepAlive(m)
	t.Logf("heap per key: Timeouts %.1f B, map + time.AfterFunc %.1f B (%.2fx)", wheel, baseline, baseline/wheel)
	assert.Less(t, wheel*2, baseline)
}

// check verifies the set's tables: every slot names a live entry whose key
// probing finds there, and the counts agree. Test-only.
func (s *Timeouts[K]) check() error {
	for j := range s.shards {
		sh := &s.shards[j]
		sh.mu.Lock()
		n := 0
		for _, v := range sh.table {
			if v == slotEmpty {
				continue
			}
			n++
			i := v>>8 - 1
			k := sh.entry(i).key
			hash := maphash.Comparable(s.seed, k)
			if &s.shards[hash%timeoutShards] != sh {
				sh.mu.Unlock()
				return fmt.Errorf("shard %d holds key %v of another shard", j, k)
			}
			if got, ok := sh.find(k, hash); !ok || got != i {
				sh.mu.Unlock()
				return fmt.Errorf("shard %d: key %v in entry %d is not found by probing", j, k, i)
			}
		}
		if n != sh.n {
			sh.mu.Unlock()
			return fmt.Errorf("shard %d: %d slots used, %d keys", j, n, sh.n)
		}
		sh.mu.Unlock()
	}
	return nil
}

// TestTimeouts_Model runs random Add, Remove, Deadline and expiry against a
// map, on few keys so that probing runs are long and removals move slots.
func TestTimeouts_Model(t *testing.T) {
	for seed := range uint64(5) {
		h, clk := newFake(t)
		r := rand.New(rand.NewPCG(seed, 77))
		model := map[int]time.Time{} // key -> deadline
		var expired []int
		set := NewTimeouts(h, func(k int) { expired = append(expired, k) })
		for op := range 20000 {
			k := r.IntN(400)
			switch r.IntN(10) {
			case 0, 1, 2, 3:
				d := time.Duration(r.IntN(50)) * time.Millisecond
				set.Add(k, d)
				model[k] = clk.Now().Add(d)
			case 4, 5:
				_, in := model[k]
				require.Equal(t, in, set.Remove(k), "seed %d op %d: Remove(%d)", seed, op, k)
				delete(model, k)
			case 6, 7:
				dl, ok := set.Deadline(k)
				want, in := model[k]
				require.Equal(t, in, ok, "seed %d op %d: Deadline(%d)", seed, op, k)
				if in {
					require.True(t, dl.Equal(want), "seed %d op %d: Deadline(%d)", seed, op, k)
				}
			default:
				clk.Add(time.Duration(r.IntN(20)) * time.Millisecond)
				expired = expired[:0]
				advanceWithin(t, h, "a step of the model")
				for _, x := range expired {
					dl, in := model[x]
					require.True(t, in, "seed %d op %d: %d expired, not in the set", seed, op, x)
					require.False(t, dl.After(clk.Now()), "seed %d op %d: %d expired early", seed, op, x)
					delete(model, x)
				}
				for x, dl := range model {
					require.True(t, dl.After(clk.Now()), "seed %d op %d: %d due but not expired", seed, op, x)
				}
			}
			require.Equal(t, len(model), set.Len(), "seed %d op %d", seed, op)
			if op%97 == 0 {
				require.NoError(t, set.check(), "seed %d op %d", seed, op)
			}
		}
		require.NoError(t, set.check())
		mustCheck(t, h)
	}
}

// TestTimeouts_KeysKeepTheirOwnEntries: many keys added to a fresh
// set each get an entry of their own (no entry is handed out twice), keep
// their own deadlines, and expire once each, in order.
func TestTimeouts_KeysKeepTheirOwnEntries(t *testing.T) {
	h, clk := newFake(t, WithShards(1))
	var got []int
	set := NewTimeouts(h, func(k int) { got = append(got, k) })
	const n = 3 * timeoutShards * 4
	mustReturn(t, 5*time.Second, "Timeouts.Add of fresh keys", func() {
		for k := range n {
			set.Add(k, time.Duration(k+1)*time.Millisecond)
		}
	})
	assert.Equal(t, n, set.Len())
	assert.Equal(t, n, h.Len(), "one armed timer per key")
	assert.NoError(t, set.check())
	for k := range n {
		d, ok := set.Deadline(k)
		if assert.True(t, ok, "key %d is in the set", k) {
			assert.Equal(t, time.Duration(k+1)*time.Millisecond, d.Sub(h.origin), "key %d's deadline", k)
		}
	}
	clk.Add(time.Second)
	advanceWithin(t, h, "expiring every key")
	want := make([]int, n)
	for k := range want {
		want[k] = k
	}
	assert.Equal(t, want, got, "every key expired once, in deadline order")
	assert.Equal(t, 0, set.Len())
}

// heapAlloc is the heap in use after two GCs (the second frees what the
// first one's finalizers released).
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestTimeouts_ParallelCallbacksAndContendedAdds: keys added, re-armed and
// removed from several goroutines while callbacks of four shards run at
// once (WithParallelCallbacks). Each key's life in the set ends exactly
// once, by its expiry or by a Remove that returned true: the binding's
// fire is told which timer fired, so a callback never takes another
// key's entry, and an entry's timer stays on its hierarchy shard however
// contended that shard's lock is (a timer that moved would lose its
// binding).
func TestTimeouts_ParallelCallbacksAndContendedAdds(t *testing.T) {
	h, clk := newFake(t, WithShards(4), WithParallelCallbacks())
	const keys, adders, steps = 256, 4, 2000
	var added, ended [keys]atomic.Int64
	// An expiry ends the life the key had, even if an Add racing it has
	// begun another since.
	set := NewTimeouts(h, func(k int) { ended[k].Add(1) })
	mustReturn(t, 60*time.Second, "adders and the advancing loop", func() {
		var wg sync.WaitGroup
		var stop atomic.Bool
		for g := range adders {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 45))
				for !stop.Load() {
					k := r.IntN(keys)
					if r.IntN(8) == 0 {
						if set.Remove(k) {
							ended[k].Add(1)
						}
						continue
					}
					if set.add(k, time.Duration(1+r.IntN(20))*time.Millisecond) {
						added[k].Add(1)
					}
				}
			})
		}
		for range steps {
			clk.Add(time.Millisecond)
			h.Advance()
		}
		stop.Store(true)
		wg.Wait()
	})
	clk.Add(time.Second)
	advanceWithin(t, h, "expiring the keys left")
	assert.Equal(t, 0, set.Len())
	assert.Equal(t, 0, h.Len())
	for k := range keys {
		assert.Equal(t, added[k].Load(), ended[k].Load(), "key %d: lives begun and ended", k)
	}
	require.NoError(t, set.check())
	mustCheck(t, h)
}

// TestTimeouts_AddBetweenFiringAndExpiryWins: a key re-armed after its
// timer fired but before the expiry took the set's lock is live again and
// not reported; it expires at its new deadline. The re-arm is what Add
// does with the lock held, done while the firing waits for that lock.
func TestTimeouts_AddBetweenFiringAndExpiryWins(t *testing.T) {
	h, clk := newFake(t)
	var expired []int
	set := NewTimeouts(h, func(k int) { expired = append(expired, k) })
	set.Add(1, time.Millisecond)
	hash, sh, _ := set.locate(1)
	i, ok := sh.find(1, hash)
	require.True(t, ok)
	tm := &sh.entry(i).t

	sh.mu.Lock()
	clk.Add(time.Millisecond)
	done := make(chan struct{})
	go func() { defer close(done); h.Advance() }()
	mustReturn(t, 5*time.Second, "the key's timer firing", func() {
		for tm.isFiled() {
			runtime.Gosched()
		}
	})
	tm.rearm(arming{v: int64(10 * time.Millisecond), rel: true}) // Add's re-arm of a key it finds
	sh.mu.Unlock()
	recvWithin(t, 5*time.Second, done, "the Advance whose expiry waited for the set's lock")
	assert.Empty(t, expired, "the re-armed key was reported")
	d, ok := set.Deadline(1)
	require.True(t, ok, "the re-armed key left the set")
	assert.Equal(t, 11*time.Millisecond, d.Sub(h.origin))

	clk.Add(10 * time.Millisecond)
	advanceWithin(t, h, "the key's new deadline")
	assert.Equal(t, []int{1}, expired)
	assert.Zero(t, set.Len())
	mustCheck(t, h)
}
