package gnetwheel

import (
	"context"
	"testing"
	"time"
)

// The tests of execdrop.go: gnet v2.9.7's Execute drops a task for a loop
// that has exited before its engine is marked shut down (fakeLoop.exited
// plays that), and the drain is handed over again until it runs or the
// shutdown shows. Without the watch, the first test finds the drain never
// handed over again and the exited loop's timers counted forever.

func TestExecDrop_ADrainTheExitedLoopDroppedIsHandedOverUntilTheShutdownShows(t *testing.T) {
	// gnet v2.9.7's Execute returns nil and drops the task when the loop
	// has exited but the engine is not marked shut down yet.
	mock, h, idler, loop := mockLoop(t, time.Hour)
	w := idler.w
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := 0
	ws := armAll(w, loop, ctx, 10, &ran)
	for range 1000 {
		w.AfterFunc(loop, time.Millisecond, func() { ran++ })
	}
	loop.exited = true
	step(mock, h, loop, time.Millisecond)
	if loop.executes != 1 {
		t.Fatalf("1030 timers firing together made %d Execute calls, want 1", loop.executes)
	}
	settle(mock, h, loop, 200*time.Millisecond) // the loop is gone, gnet does not say so yet
	handed := loop.executes
	if handed < 2 {
		t.Errorf("a drain the loop did not take for 200ms was not handed over again (%d Execute calls)", handed)
	}
	loop.shutdown = true // the engine's shutdown is complete
	settle(mock, h, loop, 2*time.Second)
	if ran != 0 {
		t.Errorf("%d tasks ran on a loop that has exited", ran)
	}
	wantNoTimers(t, h, "h.Len() = %d once the engine is shut down, want 0: a lost drain must not strand the loop's queue")
	if n := registryLen(&w.loops); n != 0 {
		t.Errorf("the Wheel holds %d loops, want 0", n)
	}
	if loop.executes > handed+2 {
		t.Errorf("%d Execute calls after the shutdown showed (%d before), want at most 2: later firings are dropped at once", loop.executes-handed, handed)
	}
	if !collected(ws) {
		t.Error("a Schedule task of a lost drain is still referenced")
	}
}

func TestExecDrop_ADrainHandedOverAgainRunsEachCallbackOnce(t *testing.T) {
	// A live loop that is slow to take its drain gets it twice or more:
	// every callback still runs once, on the loop.
	mock, h, idler, loop := mockLoop(t, time.Hour)
	w := idler.w
	runs := make([]int, 100)
	for i := range runs {
		w.AfterFunc(loop, time.Millisecond, func() { runs[i]++ })
	}
	every := 0
	tk := w.Every(loop, time.Millisecond, func() { every++ })
	mock.Add(time.Millisecond)
	h.Advance()
	for range 50 { // 500 ms without the loop taking a task
		mock.Add(10 * time.Millisecond)
		h.Advance()
	}
	if len(loop.queued) < 2 {
		t.Errorf("a drain not taken for 500ms was handed over %d times, want more than once", len(loop.queued))
	}
	loop.runQueued()
	for i, n := range runs {
		if n != 1 {
			t.Fatalf("task %d ran %d times, want once", i, n)
		}
	}
	if every != 1 {
		t.Errorf("the periodic task ran %d times for its runs that were due, want 1 (runs missed are skipped)", every)
	}
	tk.Stop()
	wantNoTimers(t, h, "h.Len() = %d after every task ran or was stopped, want 0")
	ran := false
	w.AfterFunc(loop, time.Millisecond, func() { ran = true })
	step(mock, h, loop, time.Millisecond)
	if !ran {
		t.Error("a task after the re-handed drain did not run: the loop is alive")
	}
}
