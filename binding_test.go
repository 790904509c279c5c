package timingwheel

import (
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
