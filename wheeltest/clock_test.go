package wheeltest_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/timingwheel/timingwheel/wheeltest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestClock_MovesOnlyWhenTold pins what the clock reads after each move:
// Add forward and back, Set forward and back, and Since and Until, which a
// hierarchy and its layers read, agreeing with Now.
func TestClock_MovesOnlyWhenTold(t *testing.T) {
	c := wheeltest.NewClock(t0)
	for _, step := range []struct {
		name string
		move func()
		want time.Time
	}{
		{"nothing", func() {}, t0},
		{"Add(90s)", func() { c.Add(90 * time.Second) }, t0.Add(90 * time.Second)},
		{"Add(0)", func() { c.Add(0) }, t0.Add(90 * time.Second)},
		{"Add(-30s)", func() { c.Add(-30 * time.Second) }, t0.Add(time.Minute)},
		{"Set(t0+1h)", func() { c.Set(t0.Add(time.Hour)) }, t0.Add(time.Hour)},
		{"Set(t0-1ns)", func() { c.Set(t0.Add(-1)) }, t0.Add(-1)},
	} {
		step.move()
		if got := c.Now(); !got.Equal(step.want) {
			t.Fatalf("after %s: Now() = %v, want %v", step.name, got, step.want)
		}
		if got, want := c.Since(t0), step.want.Sub(t0); got != want {
			t.Errorf("after %s: Since(t0) = %v, want %v", step.name, got, want)
		}
		if got, want := c.Until(t0), t0.Sub(step.want); got != want {
			t.Errorf("after %s: Until(t0) = %v, want %v", step.name, got, want)
		}
	}
}

// TestClock_ReadingsCarryNoMonotonicReading: a time.Now() given to
// NewClock or Set reads back without its monotonic reading, in its
// location, so readings compare by the wall clock as a test's instants do.
func TestClock_ReadingsCarryNoMonotonicReading(t *testing.T) {
	now := time.Now()
	c := wheeltest.NewClock(now)
	if got := c.Now(); got != now.Round(0) {
		t.Errorf("NewClock(time.Now()).Now() = %v, want %v (no monotonic reading)", got, now.Round(0))
	}
	if strings.Contains(c.Now().String(), "m=") {
		t.Errorf("Now() = %v carries a monotonic reading", c.Now())
	}
	c.Set(now.Add(time.Second))
	if got := c.Now(); got != now.Add(time.Second).Round(0) {
		t.Errorf("after Set: Now() = %v, want %v", got, now.Add(time.Second).Round(0))
	}
	var zero wheeltest.Clock
	if !zero.Now().IsZero() {
		t.Errorf("the zero Clock reads %v, want the zero time", zero.Now())
	}
	zero.Add(time.Second)
	if got := zero.Now(); got != (time.Time{}).Add(time.Second) {
		t.Errorf("the zero Clock after Add(1s) reads %v", got)
	}
}

// TestClock_TimersPanicSayingSo: a Clock has no timers; each timer method
// panics with a message that names it and says what to use instead.
func TestClock_TimersPanicSayingSo(t *testing.T) {
	c := wheeltest.NewClock(t0)
	var _ clock.Clock = c
	for name, call := range map[string]func(){
		"After":        func() { c.After(time.Second) },
		"AfterFunc":    func() { c.AfterFunc(time.Second, func() {}) },
		"Sleep":        func() { c.Sleep(time.Second) },
		"Tick":         func() { c.Tick(time.Second) },
		"Ticker":       func() { c.Ticker(time.Second) },
		"Timer":        func() { c.Timer(time.Second) },
		"WithDeadline": func() { c.WithDeadline(context.Background(), t0.Add(time.Second)) },
		"WithTimeout":  func() { c.WithTimeout(context.Background(), time.Second) },
	} {
		t.Run(name, func(t *testing.T) {
			msg := func() (msg string) {
				defer func() { msg, _ = recover().(string) }()
				call()
				return ""
			}()
			for _, want := range []string{"wheeltest: Clock." + name + " is not implemented", "AdvanceTo", "synctest"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%s panicked with %q, want a message containing %q", name, msg, want)
				}
			}
		})
	}
}

// TestClock_ConcurrentReadsAndMoves: readers on other goroutines (conns
// reading the hierarchy's clock) race the test moving it; under -race
// nothing is reported, and every reading is one the clock was moved to.
func TestClock_ConcurrentReadsAndMoves(t *testing.T) {
	c := wheeltest.NewClock(t0)
	const moves = 2000
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			prev := t0
			for range moves {
				now := c.Now()
				if now.Before(prev) || now.After(t0.Add(moves*time.Millisecond)) {
					t.Errorf("read %v after %v: the clock only moved forward, by 1ms steps, up to %v", now, prev, t0.Add(moves*time.Millisecond))
					return
				}
				if d := c.Since(t0); d%time.Millisecond != 0 {
					t.Errorf("Since(t0) = %v, not a whole number of steps", d)
					return
				}
				prev = now
			}
		})
	}
	for range moves {
		c.Add(time.Millisecond)
	}
	wg.Wait()
	if got := c.Now(); !got.Equal(t0.Add(moves * time.Millisecond)) {
		t.Errorf("after %d moves of 1ms: %v", moves, got)
	}
}
