package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/zeromicro/go-zero/core/collection"

	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/wheeltest"
)

// wakeupWindow is how long each idle scenario is watched, in bubble time.
const wakeupWindow = 10 * time.Minute

// TestWakeups counts how often a driver goroutine wakes while the wheel is
// idle: with nothing armed, and with one timer a minute away. It runs inside a
// testing/synctest bubble, whose fake clock jumps ahead whenever every
// goroutine is blocked, so ten minutes take milliseconds and are exact.
//
// The wheel's clock is the real one (clock.New, which is package time, which
// the bubble fakes) wrapped in countingClock. A wake-up is a distinct instant
// of bubble time at which the driver used its clock: bubble time stands still
// while goroutines run, so each time the driver wakes and works it shows up
// as one instant however many clock calls it makes.
//
// go-zero's wheel has a ticker instead; a wake-up is a tick it receives.
//
// Results are printed as lines starting "Wakeups " for cmd/report (a
// capital, so benchstat does not take them for configuration lines). Nothing
// is asserted: this is a measurement, not a test of the library.
func TestWakeups(t *testing.T) {
	t.Run("impl=wheel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cc := newCountingClock(clock.New())
			h, err := timingwheel.New(timingwheel.WithClock(cc))
			if err != nil {
				t.Fatal(err)
			}
			h.Start()
			defer h.Stop()
			synctest.Wait()

			cc.reset()
			time.Sleep(wakeupWindow)
			synctest.Wait()
			report(t, "wheel", "idle", cc.wakeups(time.Time{}), cc.calls.Load(), "")

			// One timer a minute away; then one that is not a whole number of
			// coarse slots away, so it cascades through each level on its way
			// down instead of firing at the instant its minute slot comes up.
			for _, d := range []time.Duration{time.Minute, 90*time.Second + 500*time.Millisecond} {
				var firedAt time.Time
				cc.reset()
				armedAt := time.Now()
				h.AfterFunc(d, func() { firedAt = time.Now() })
				time.Sleep(wakeupWindow)
				synctest.Wait()
				// The instant of arming is the caller's own clock read (plus the
				// driver re-arming its sleep): not counted as an idle wake-up.
				report(t, "wheel", "one-timer-"+shortDuration(d), cc.wakeups(armedAt), cc.calls.Load(),
					fmt.Sprintf("fired-after=%v", firedAt.Sub(armedAt)))
			}

			// Many timers spread over an hour: the driver wakes at their
			// ticks and at the cascades of the coarse slots they are in.
			cc.reset()
			armedAt := time.Now()
			var fired atomic.Int64
			for _, d := range spreadOverAnHour() {
				h.AfterFunc(d, func() { fired.Add(1) })
			}
			time.Sleep(time.Hour + time.Second)
			synctest.Wait()
			reportIn(t, "wheel", fmt.Sprintf("driver-%d-timers-1h", spreadTimers), time.Hour+time.Second, cc.wakeups(armedAt), cc.calls.Load(),
				fmt.Sprintf("fired=%d", fired.Load()))
		})
	})
	// The same timers, driven by a loop of the caller's own that moves a
	// manual clock to each Next and calls Advance there; a wake-up is a
	// turn of the loop.
	t.Run("impl=wheel/loop=next", func(t *testing.T) {
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		c := wheeltest.NewClock(start)
		h, err := timingwheel.New(timingwheel.WithClock(c))
		if err != nil {
			t.Fatal(err)
		}
		fired := 0
		for _, d := range spreadOverAnHour() {
			h.AfterFunc(d, func() { fired++ })
		}
		turns := int64(0)
		for next, ok := h.Next(); ok; next, ok = h.Next() {
			c.Set(next)
			h.Advance()
			turns++
		}
		reportIn(t, "wheel", fmt.Sprintf("loop-next-%d-timers-1h", spreadTimers), c.Now().Sub(start), turns, 0,
			fmt.Sprintf("fired=%d", fired))
	})
	t.Run("impl=gozero", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tk := newCountingTicker(gozeroInterval)
			var firedAt time.Time
			tw, err := collection.NewTimingWheelWithTicker(gozeroInterval, gozeroSlots,
				func(_, _ any) { firedAt = time.Now() }, tk)
			if err != nil {
				t.Fatal(err)
			}
			defer tk.wait()
			defer tw.Stop()
			synctest.Wait()

			tk.ticks.Store(0)
			time.Sleep(wakeupWindow)
			synctest.Wait()
			report(t, "gozero", "idle", tk.ticks.Load(), 0, "")

			tk.ticks.Store(0)
			armedAt := time.Now()
			tw.SetTimer("k", nil, time.Minute)
			time.Sleep(wakeupWindow)
			synctest.Wait()
			report(t, "gozero", "one-timer-"+shortDuration(time.Minute), tk.ticks.Load(), 0,
				fmt.Sprintf("fired-after=%v", firedAt.Sub(armedAt)))
		})
	})
}

// shortDuration is d without zero units: 1m, not 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func report(t *testing.T, impl, scenario string, wakeups, calls int64, note string) {
	t.Helper()
	reportIn(t, impl, scenario, wakeupWindow, wakeups, calls, note)
}

// reportIn is report for a window of its own.
func reportIn(t *testing.T, impl, scenario string, window time.Duration, wakeups, calls int64, note string) {
	t.Helper()
	// Print, not t.Log: one undecorated line per result for cmd/report.
	fmt.Printf("Wakeups impl=%s scenario=%s window=%v wakeups=%d clock-calls=%d note=%q\n",
		impl, scenario, window, wakeups, calls, note)
}

// spreadTimers is how many timers spreadOverAnHour returns.
const spreadTimers = 10_000

// spreadOverAnHour returns spreadTimers durations spread at random (the
// same each run) over an hour, off the tick.
func spreadOverAnHour() []time.Duration {
	r := rand.New(rand.NewPCG(1, 2))
	ds := make([]time.Duration, spreadTimers)
	for i := range ds {
		ds[i] = time.Duration(1 + r.Int64N(int64(time.Hour)))
	}
	return ds
}

// countingClock is a clock.Clock that counts every call and remembers the
// (bubble) instants at which calls happened.
type countingClock struct {
	clock.Clock
	calls    atomic.Int64
	mu       sync.Mutex
	instants map[int64]bool
}

func newCountingClock(c clock.Clock) *countingClock {
	return &countingClock{Clock: c, instants: map[int64]bool{}}
}

func (c *countingClock) note() {
	c.calls.Add(1)
	now := time.Now().UnixNano() // the bubble's time, not c.Clock's: no recursion
	c.mu.Lock()
	c.instants[now] = true
	c.mu.Unlock()
}

func (c *countingClock) reset() {
	c.calls.Store(0)
	c.mu.Lock()
	clear(c.instants)
	c.mu.Unlock()
}

// wakeups is the number of distinct instants with clock calls, other than
// the one at except.
func (c *countingClock) wakeups(except time.Time) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := int64(len(c.instants))
	if c.instants[except.UnixNano()] {
		n--
	}
	return n
}

func (c *countingClock) After(d time.Duration) <-chan time.Time { c.note(); return c.Clock.After(d) }
func (c *countingClock) AfterFunc(d time.Duration, f func()) *clock.Timer {
	c.note()
	return c.Clock.AfterFunc(d, f)
}
func (c *countingClock) Now() time.Time                        { c.note(); return c.Clock.Now() }
func (c *countingClock) Since(t time.Time) time.Duration       { c.note(); return c.Clock.Since(t) }
func (c *countingClock) Until(t time.Time) time.Duration       { c.note(); return c.Clock.Until(t) }
func (c *countingClock) Sleep(d time.Duration)                 { c.note(); c.Clock.Sleep(d) }
func (c *countingClock) Tick(d time.Duration) <-chan time.Time { c.note(); return c.Clock.Tick(d) }
func (c *countingClock) Ticker(d time.Duration) *clock.Ticker  { c.note(); return c.Clock.Ticker(d) }
func (c *countingClock) Timer(d time.Duration) *clock.Timer    { c.note(); return c.Clock.Timer(d) }
func (c *countingClock) WithDeadline(p context.Context, d time.Time) (context.Context, context.CancelFunc) {
	c.note()
	return c.Clock.WithDeadline(p, d)
}
func (c *countingClock) WithTimeout(p context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	c.note()
	return c.Clock.WithTimeout(p, d)
}

// countingTicker is a go-zero timex.Ticker that counts the ticks it passes on.
type countingTicker struct {
	ticks atomic.Int64
	c     chan time.Time
	quit  chan struct{}
	done  chan struct{}
}

func newCountingTicker(d time.Duration) *countingTicker {
	tk := &countingTicker{c: make(chan time.Time), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(tk.done)
		real := time.NewTicker(d)
		defer real.Stop()
		for {
			select {
			case now := <-real.C:
				tk.ticks.Add(1)
				select {
				case tk.c <- now:
				case <-tk.quit:
					return
				}
			case <-tk.quit:
				return
			}
		}
	}()
	return tk
}

func (tk *countingTicker) Chan() <-chan time.Time { return tk.c }
func (tk *countingTicker) Stop()                  { close(tk.quit) }

// wait returns once the forwarding goroutine has exited.
func (tk *countingTicker) wait() { <-tk.done }
