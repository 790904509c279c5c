package timingwheel_test

// Tests of timers held by value (docs/guarantees.md, "Timers held by
// value"), through the public API only.

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel"
)

// TestTimer_Init_ReArmsItselfUnderDriver is the retransmit pattern on the
// real driver and clock: a timer held by value in its record re-arms itself
// from its own callback. With timeouts of 0 and 1ms the driver fires it as
// soon as it is armed; because Init made the timer before it was armed, the
// callback's use of it does not race with the code that armed it (go test
// -race checks that).
func TestTimer_Init_ReArmsItselfUnderDriver(t *testing.T) {
	const times = 5 // firings each record expects
	for _, d := range []time.Duration{0, time.Millisecond} {
		t.Run(fmt.Sprintf("d=%v", d), func(t *testing.T) {
			h, err := timingwheel.New()
			require.NoError(t, err)
			h.Start()

			type record struct {
				rto   timingwheel.Timer
				fired atomic.Int32 // read by the watchdog's message too
			}
			records := make([]record, 8)
			done := make(chan int, len(records))
			for i := range records {
				r := &records[i]
				r.rto.Init(h, func() {
					if r.fired.Add(1) < times {
						r.rto.Reset(d)
						return
					}
					done <- i
				})
				assert.False(t, r.rto.Reset(d), "record %d: first Reset after Init reported the timer armed", i)
			}

			watchdog := time.After(10 * time.Second)
			for range records {
				select {
				case <-done:
				case <-watchdog:
					var counts []int32
					for i := range records {
						counts = append(counts, records[i].fired.Load())
					}
					t.Fatalf("hung: self-re-arming timers (d=%v) fired %v times in 10s, want %d each", d, counts, times)
				}
			}
			timingwheel.StopWithin(t, h, "the driver")
			for i := range records {
				assert.EqualValues(t, times, records[i].fired.Load(), "record %d fired", i)
			}
			assert.Zero(t, h.Len(), "timers still armed after the last firing")
		})
	}
}

// TestTimer_Init_LikeStoppedAfterFunc runs one script of Reset, ResetAt, Stop
// and clock steps on a zero Timer after Init and on a Timer from AfterFunc
// that was then stopped: both must give the results the script expects.
func TestTimer_Init_LikeStoppedAfterFunc(t *testing.T) {
	const ms = time.Millisecond
	type step struct {
		op   string        // "reset", "resetAt" (d from now), "stop", "advance" (move the clock d)
		d    time.Duration //
		want int           // reset/resetAt/stop: 1 for true, 0 for false; advance: callbacks run
	}
	script := []step{
		{"stop", 0, 0},           // not armed
		{"reset", 25 * ms, 0},    // the first arming reports it was not armed
		{"reset", 25 * ms, 1},    // armed now
		{"advance", 24 * ms, 0},  // never early
		{"advance", 1 * ms, 1},   // fires once for the arming
		{"advance", 100 * ms, 0}, // and not again
		{"stop", 0, 0},           // it fired
		{"resetAt", 10 * ms, 0},  // fired: not armed
		{"resetAt", 20 * ms, 1},  // armed
		{"stop", 0, 1},           // armed: Stop cancels it
		{"stop", 0, 0},           // and only once
		{"advance", 50 * ms, 0},  // stopped: nothing runs
		{"reset", 0, 0},          // due at once: fires on the next Advance, not inside Reset
		{"advance", 0, 1},
		{"reset", 10 * ms, 0}, // it fired: Reset arms it anew and reports false
		{"advance", 10 * ms, 1},
	}
	for _, kind := range []string{"Init", "AfterFunc+Stop"} {
		t.Run(kind, func(t *testing.T) {
			mock := clock.NewMock()
			h, err := timingwheel.New(timingwheel.WithClock(mock))
			require.NoError(t, err)
			ran := 0
			f := func() { ran++ }
			var tm *timingwheel.Timer
			if kind == "Init" {
				var held struct{ tm timingwheel.Timer } // a zero Timer inside the caller's struct
				tm = held.tm.Init(h, f)
				require.Same(t, &held.tm, tm, "Init returns its receiver")
			} else {
				tm = h.AfterFunc(time.Hour, f)
				require.True(t, tm.Stop())
			}
			require.Zero(t, h.Len(), "armed timers before the script")

			armed := 0
			for i, s := range script {
				got := 0
				switch s.op {
				case "reset", "resetAt":
					var wasArmed bool
					if s.op == "reset" {
						wasArmed = tm.Reset(s.d)
					} else {
						wasArmed = tm.ResetAt(mock.Now().Add(s.d))
					}
					assert.Equal(t, mock.Now().Add(s.d), tm.Deadline(), "step %d: Deadline after %s(%v)", i, s.op, s.d)
					if wasArmed {
						got = 1
					}
					armed = 1
				case "stop":
					if tm.Stop() {
						got = 1
					}
					armed = 0
				case "advance":
					mock.Add(s.d)
					before := ran
					got = timingwheel.AdvanceWithin(t, h, fmt.Sprintf("step %d of the script", i))
					assert.Equal(t, got, ran-before, "step %d: Advance's count against the callbacks run", i)
					armed -= got
				}
				assert.Equal(t, s.want, got, "step %d: %s(%v)", i, s.op, s.d)
				assert.Equal(t, armed, h.Len(), "step %d: Len after %s(%v)", i, s.op, s.d)
			}
			// Deadline stays the last arming's after it fired.
			assert.Equal(t, mock.Now(), tm.Deadline(), "Deadline after the last firing")
		})
	}
}

// TestTimer_Init_Order checks "Order" (docs/guarantees.md) with by-value timers mixed with
// AfterFunc ones: one Advance runs them in order of their deadlines.
func TestTimer_Init_Order(t *testing.T) {
	mock := clock.NewMock()
	h, err := timingwheel.New(timingwheel.WithClock(mock))
	require.NoError(t, err)
	var got []string
	held := make([]timingwheel.Timer, 3)
	for i, ms := range []int{30, 10, 50} {
		name := fmt.Sprint("held", ms)
		held[i].Init(h, func() { got = append(got, name) }).Reset(time.Duration(ms) * time.Millisecond)
	}
	for _, ms := range []int{40, 20} {
		name := fmt.Sprint("after", ms)
		h.AfterFunc(time.Duration(ms)*time.Millisecond, func() { got = append(got, name) })
	}
	mock.Add(time.Second)
	assert.Equal(t, 5, timingwheel.AdvanceWithin(t, h, "five timers held by value"))
	assert.Equal(t, []string{"held10", "after20", "held30", "after40", "held50"}, got)
}

func TestTimer_Init_Panics(t *testing.T) {
	mock := clock.NewMock()
	h, err := timingwheel.New(timingwheel.WithClock(mock))
	require.NoError(t, err)
	fired := ""
	f := func() { fired += "f" }
	g := func() { fired += "g" }

	var zero timingwheel.Timer
	timingwheel.MustPanic(t, "nil", func() { zero.Init(nil, f) })
	timingwheel.MustPanic(t, "nil", func() { zero.Init(h, nil) })

	// Armed, by Init and Reset or by AfterFunc: Init panics and leaves the
	// timer armed, with its callback.
	var held timingwheel.Timer
	held.Init(h, f).Reset(time.Second)
	timingwheel.MustPanic(t, "armed", func() { held.Init(h, g) })
	after := h.AfterFunc(time.Second, f)
	timingwheel.MustPanic(t, "armed", func() { after.Init(h, g) })
	// On an armed timer the nil checks and the armed check all panic.
	timingwheel.MustPanic(t, "", func() { held.Init(nil, g) })
	timingwheel.MustPanic(t, "", func() { held.Init(h, nil) })

	assert.Equal(t, 2, h.Len(), "armed after the panics")
	mock.Add(time.Second)
	assert.Equal(t, 2, timingwheel.AdvanceWithin(t, h, "the timers re-armed after the panics"))
	assert.Equal(t, "ff", fired, "callbacks run after Init panicked")
}

// TestTimer_Init_Allocs checks that Init and every Reset, ResetAt and Stop of
// a timer held by value allocate nothing, armed or not.
func TestTimer_Init_Allocs(t *testing.T) {
	mock := clock.NewMock()
	h, err := timingwheel.New(timingwheel.WithClock(mock))
	require.NoError(t, err)
	f := func() {}
	for i := range 1000 { // other timers at every level
		h.AfterFunc(time.Duration(i)*time.Minute/7, f)
	}
	var held struct {
		seq uint64
		rto timingwheel.Timer
	}
	for _, tt := range []struct {
		name string
		op   func()
	}{
		{"Init", func() { held.rto.Init(h, f) }},
		{"Reset/unarmed+Stop", func() { held.rto.Reset(30 * time.Second); held.rto.Stop() }},
		{"Reset/armed", func() { held.rto.Reset(40 * time.Second); held.rto.Reset(20 * time.Millisecond) }},
		{"Reset/past", func() { held.rto.Reset(-time.Second) }},
		{"ResetAt", func() {
			held.rto.ResetAt(mock.Now().Add(time.Hour))
			held.rto.ResetAt(mock.Now().Add(time.Millisecond))
		}},
		{"Stop", func() { held.rto.Stop(); held.rto.Stop() }},
		{"Init+Reset+Stop", func() { held.rto.Init(h, f).Reset(time.Second); held.rto.Stop() }},
	} {
		assert.Zero(t, testing.AllocsPerRun(1000, tt.op), "%s allocates", tt.name)
	}
}

// TestTimer_Init_Rebind checks that a timer that is not armed, whether
// stopped or fired, may be bound again to another hierarchy and callback.
func TestTimer_Init_Rebind(t *testing.T) {
	mock := clock.NewMock()
	h1, err := timingwheel.New(timingwheel.WithClock(mock))
	require.NoError(t, err)
	h2, err := timingwheel.New(timingwheel.WithClock(mock), timingwheel.WithTick(10*time.Millisecond))
	require.NoError(t, err)
	var fired []string
	on := func(name string) func() { return func() { fired = append(fired, name) } }

	for _, tt := range []struct {
		name  string
		timer func() *timingwheel.Timer // bound to h1, "f1", and no longer armed
	}{
		{"stopped", func() *timingwheel.Timer {
			tm := new(timingwheel.Timer).Init(h1, on("f1"))
			tm.Reset(time.Second)
			require.True(t, tm.Stop())
			return tm
		}},
		{"fired", func() *timingwheel.Timer {
			tm := new(timingwheel.Timer).Init(h1, on("f1"))
			tm.Reset(time.Millisecond)
			mock.Add(time.Millisecond)
			require.Equal(t, 1, timingwheel.AdvanceWithin(t, h1, "a timer to fire before its Init to another hierarchy"))
			return tm
		}},
		{"AfterFunc fired", func() *timingwheel.Timer {
			tm := h1.AfterFunc(time.Millisecond, on("f1"))
			mock.Add(time.Millisecond)
			require.Equal(t, 1, timingwheel.AdvanceWithin(t, h1, "a timer from AfterFunc to fire before its Init to another hierarchy"))
			return tm
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tm := tt.timer()
			fired = nil
			require.Same(t, tm, tm.Init(h2, on("f2")))
			assert.False(t, tm.Reset(time.Second), "first Reset after Init")
			assert.Equal(t, 0, h1.Len(), "timers armed in the old hierarchy")
			assert.Equal(t, 1, h2.Len(), "timers armed in the new hierarchy")
			mock.Add(time.Second + 10*time.Millisecond) // h2's deadline is rounded up to its 10ms tick
			assert.Equal(t, 0, timingwheel.AdvanceWithin(t, h1, "the old hierarchy"), "old hierarchy's Advance")
			assert.Equal(t, 1, timingwheel.AdvanceWithin(t, h2, "the new hierarchy"), "new hierarchy's Advance")
			assert.Equal(t, []string{"f2"}, fired)
			// And back to h1 with the same callback as before.
			tm.Init(h1, on("f1"))
			tm.Reset(0)
			assert.Equal(t, 1, timingwheel.AdvanceWithin(t, h1, "the old hierarchy again"))
			assert.Equal(t, []string{"f2", "f1"}, fired)
		})
	}
}

// A zero Timer's methods panic with a message that names every way to
// make a usable one.
func TestTimer_ZeroPanicNamesEveryConstructor(t *testing.T) {
	var z timingwheel.Timer
	for name, call := range map[string]func(){
		"Stop":       func() { z.Stop() },
		"Reset":      func() { z.Reset(time.Second) },
		"ResetEvery": func() { z.ResetEvery(time.Second) },
		"Deadline":   func() { z.Deadline() },
	} {
		msg := fmt.Sprint(timingwheel.Recovered(call))
		for _, want := range []string{name, "AfterFunc", "AtFunc", "Every", "Init", "InitOn"} {
			assert.Contains(t, msg, want, "%s's panic", name)
		}
	}
}

// A nil *Timer panics with the library's message naming the method, as a
// zero one does, not with a nil dereference.
func TestTimer_NilPanicsWithAClearMessage(t *testing.T) {
	var n *timingwheel.Timer
	h, _ := timingwheel.New(timingwheel.WithClock(clock.NewMock()))
	for name, call := range map[string]func(){
		"Stop":       func() { n.Stop() },
		"Reset":      func() { n.Reset(time.Second) },
		"ResetAt":    func() { n.ResetAt(time.Now()) },
		"ResetEvery": func() { n.ResetEvery(time.Second) },
		"Deadline":   func() { n.Deadline() },
		"Init":       func() { n.Init(h, func() {}) },
	} {
		msg := fmt.Sprint(timingwheel.Recovered(call))
		assert.Contains(t, msg, "timingwheel: ", "%s's panic", name)
		assert.Contains(t, msg, name, "%s's panic", name)
		assert.Contains(t, msg, "nil *Timer", "%s's panic", name)
	}
}
