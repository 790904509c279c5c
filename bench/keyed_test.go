package bench

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel"
)

// Keyed timeouts: one deadline per key (a connection id), re-armed on each
// heartbeat, with a callback told which key expired. timingwheel has
// Timeouts for this; with runtime timers, users write a map from key to
// *time.Timer, sharded so that goroutines do not queue on one mutex:
// timerMap below.

// timerMapShards is the shard count of timerMap: a power of two comfortably
// above the 16 goroutines the parallel benchmark runs at GOMAXPROCS=2, so
// that two of them rarely want the same shard.
const timerMapShards = 64

// timerMap is keyed timeouts as users write them with runtime timers: a
// sharded map[int]*time.Timer; re-arming a key is a lookup and
// (*time.Timer).Reset, a new key gets time.AfterFunc with a closure over the
// key. It is the runtime side of BenchmarkTimeoutsParallel and
// BenchmarkHeapPerKey.
type timerMap struct {
	expired func(int)
	shards  [timerMapShards]timerMapShard
}

type timerMapShard struct {
	mu sync.Mutex
	m  map[int]*time.Timer
	_  [64]byte // keep neighbouring shards' locks off one cache line
}

func newTimerMap(expired func(int)) *timerMap {
	tm := &timerMap{expired: expired}
	for i := range tm.shards {
		tm.shards[i].m = make(map[int]*time.Timer)
	}
	return tm
}

func (tm *timerMap) shard(k int) *timerMapShard {
	return &tm.shards[uint(k)%timerMapShards]
}

// add arms k to expire d from now, or re-arms it if present.
func (tm *timerMap) add(k int, d time.Duration) {
	sh := tm.shard(k)
	sh.mu.Lock()
	if t, ok := sh.m[k]; ok {
		t.Reset(d)
	} else {
		sh.m[k] = time.AfterFunc(d, func() { tm.fire(k) })
	}
	sh.mu.Unlock()
}

// fire is the callback of k's timer: it forgets k and reports it. As most
// such code, it does not tell a timer that fired just as add re-armed it
// (the runtime runs a callback that has started whatever Reset does); that
// would take a deadline or generation per key, and more bytes.
func (tm *timerMap) fire(k int) {
	sh := tm.shard(k)
	sh.mu.Lock()
	_, ok := sh.m[k]
	delete(sh.m, k)
	sh.mu.Unlock()
	if ok {
		tm.expired(k)
	}
}

// stopAll stops and forgets every key's timer.
func (tm *timerMap) stopAll() {
	for i := range tm.shards {
		sh := &tm.shards[i]
		sh.mu.Lock()
		for _, t := range sh.m {
			t.Stop()
		}
		clear(sh.m)
		sh.mu.Unlock()
	}
}

func noKey(int) {}

// keyedSubject is one keyed-timeouts implementation with million keys armed.
type keyedSubject struct {
	add   func(k int, d time.Duration) // Add, or re-arm
	close func()
}

func newKeyed(tb testing.TB, impl string) keyedSubject {
	switch impl {
	case "wheel":
		h := startedWheel(tb)
		ts := timingwheel.NewTimeouts(h, noKey)
		return keyedSubject{add: ts.Add, close: func() {
			h.Stop()
			for k := range million {
				ts.Remove(k)
			}
		}}
	case "runtime":
		tm := newTimerMap(noKey)
		return keyedSubject{add: tm.add, close: tm.stopAll}
	}
	panic("no keyed implementation " + impl)
}

// BenchmarkTimeoutsParallel: re-arm one of 10^6 keys to 90 s from now (a
// heartbeat), from parallelism*GOMAXPROCS goroutines, each walking the keys
// in its own random order. timingwheel's Timeouts.Add against a 64-shard
// map[int]*time.Timer with (*time.Timer).Reset (timerMap). The 10^6 keys
// are the live timers, armed 30–60 s out.
func BenchmarkTimeoutsParallel(b *testing.B) {
	for _, impl := range []string{"wheel", "runtime"} {
		b.Run("impl="+impl, func(b *testing.B) {
			var s *keyedSubject
			b.Run("keys=1000000", func(b *testing.B) {
				if s == nil {
					ks := newKeyed(b, impl)
					s = &ks
					for k := range million {
						s.add(k, farDuration(k))
					}
					settle()
				}
				orders := goroutineOrders(million, parallelism*runtime.GOMAXPROCS(0))
				var next atomic.Int64
				add := s.add
				b.ReportAllocs()
				b.SetParallelism(parallelism)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					ord, i := orders[int(next.Add(1)-1)%len(orders)], 0
					for pb.Next() {
						add(int(ord[i]), heartbeat)
						if i++; i == len(ord) {
							i = 0
						}
					}
				})
			})
			if s != nil {
				s.close()
				settle()
			}
		})
	}
}

// BenchmarkHeapPerKey reports heap bytes per key (B/key) of keyed timeouts
// with 10^6 int keys: HeapAlloc after a GC, before and after adding them,
// divided by 10^6. Everything the implementation allocates counts: the map
// entries, the timers, and for timerMap the closure over each key. Run it
// with -benchtime=1x in a fresh process, as BenchmarkHeap (the runtime's
// timer heaps keep their capacity within a process).
func BenchmarkHeapPerKey(b *testing.B) {
	for _, impl := range []string{"wheel", "runtime"} {
		b.Run("impl="+impl, func(b *testing.B) {
			b.Run("keys=1000000", func(b *testing.B) {
				reportHeapPer(b, "B/key", million, func(measure func(arm func())) {
					var s keyedSubject
					measure(func() {
						s = newKeyed(b, impl)
						for k := range million {
							s.add(k, farDuration(k))
						}
					})
					s.close()
				})
			})
		})
	}
}
