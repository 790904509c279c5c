package timingwheel

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Timer is 48 bytes, a size class of its own: one more word (56 B)
// would cost 64 on the heap. What only periodic and executor timers need
// lives in their binding.
func TestTimer_Is48Bytes(t *testing.T) {
	assert.Equal(t, uintptr(48), unsafe.Sizeof(Timer{}))
}

// Timers of one period on one shard share one binding, made by the first;
// a one-shot timer uses the shard's own; an executor timer keeps one of its
// own, marked pending while a run handed over has not started.
func TestBinding_SharedPerPeriodAndShard(t *testing.T) {
	h, mock := newFake(t, WithShards(1))
	a := h.Every(time.Second, func() {})
	b := h.Every(time.Second, func() {})
	c := h.Every(2*time.Second, func() {})
	assert.Same(t, a.b.Load(), b.b.Load(), "one period, one binding")
	assert.NotSame(t, a.b.Load(), c.b.Load(), "another period, another binding")
	assert.Equal(t, int64(2*time.Second), c.b.Load().period)
	a.Reset(time.Second)
	assert.Same(t, &h.shards[0].oneShot, a.b.Load(), "Reset makes it one-shot")

	var run func()
	var e Timer
	e.InitOn(h, func(r func()) { run = r }, func() {})
	e.ResetEvery(time.Second)
	own := e.b.Load()
	require.True(t, own.exec && !own.pending && own.period == int64(time.Second))
	mock.Add(time.Second)
	h.Advance()
	require.NotNil(t, run)
	assert.Same(t, own, e.b.Load(), "its own binding")
	assert.True(t, own.pending, "its run is pending")
	run()
	assert.Same(t, own, e.b.Load())
	assert.False(t, own.pending, "the run was taken")
	e.Stop()
	a.Stop()
	b.Stop()
	c.Stop()
}

// The table of periodic bindings is bounded: past maxBindings it starts
// afresh, and the timers keep the bindings they had.
func TestBinding_TableBounded(t *testing.T) {
	h, mock := newFake(t, WithShards(1))
	s := h.shards[0]
	first := h.Every(time.Hour, func() {})
	for i := range maxBindings + 10 {
		h.Every(time.Duration(i+1)*time.Millisecond, func() {}).Stop()
	}
	assert.LessOrEqual(t, len(s.periodic), maxBindings)
	assert.Equal(t, int64(time.Hour), first.b.Load().period, "kept its binding")
	mock.Add(time.Hour)
	assert.Equal(t, 1, h.Advance())
	assert.Equal(t, 1, h.Len(), "still periodic")
}

// A binding is 32 bytes, the 32-byte size class: what a period costs a
// shard the first time it sees it (guarantee of ResetEvery's godoc and the
// design's §2). One more word would cost 48.
func TestBinding_Is32Bytes(t *testing.T) {
	assert.Equal(t, uintptr(32), unsafe.Sizeof(binding{}))
}

// A timer with a fixed binding (an executor timer's own, a Timeouts' set's)
// keeps it when it is re-armed unarmed while its shard's lock is held by
// another goroutine: a plain timer moves to another shard there, and
// these would lose what they are bound to (an executor timer its pending
// run's binding, a Timeouts' timer the func told which timer fired).
func TestBinding_FixedBindingsStayWhenContended(t *testing.T) {
	h, clk := newFake(t, WithShards(4))
	// contended runs do, which re-arms a timer of shard s, while this
	// goroutine holds s's lock, until do waits for it.
	contended := func(what string, s *shard, do func()) {
		s.mu.Lock()
		done := make(chan struct{})
		go func() { defer close(done); do() }()
		mustReturn(t, 5*time.Second, what+" waiting for the held lock", func() {
			for s.waiting.Load() == 0 {
				runtime.Gosched()
			}
		})
		s.mu.Unlock()
		recvWithin(t, 5*time.Second, done, what)
	}

	var plain Timer
	plain.Init(h, func() {})
	from := plain.b.Load().s
	contended("a plain timer's Reset", from, func() { plain.Reset(time.Second) })
	require.NotSame(t, from, plain.b.Load().s, "the premise: a plain timer moves")
	plain.Stop()

	var runs []func()
	fired := 0
	var e Timer
	e.InitOn(h, func(r func()) { runs = append(runs, r) }, func() { fired++ })
	own := e.b.Load()
	contended("an executor timer's Reset", own.s, func() { e.Reset(time.Millisecond) })
	assert.Same(t, own, e.b.Load(), "the executor timer kept its binding")

	var expired []int
	set := NewTimeouts(h, func(k int) { expired = append(expired, k) })
	dealNext(h, 2) // the key's timer goes to shard 2
	contended("a new Timeouts key's Add", h.shards[2], func() { set.Add(7, time.Millisecond) })
	hash, sh, _ := set.locate(7)
	i, ok := sh.find(7, hash)
	require.True(t, ok)
	assert.Same(t, sh.bind[2], sh.entry(i).t.b.Load(), "the key's timer kept its set's binding")

	clk.Add(time.Millisecond)
	advanceWithin(t, h, "the executor timer's and the key's firings")
	require.Len(t, runs, 1)
	runs[0]()
	assert.Equal(t, 1, fired, "the executor timer's run called f")
	assert.Equal(t, []int{7}, expired, "the key expired")
	mustCheck(t, h)
}
