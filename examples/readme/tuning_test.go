package readme

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/internal/demotest"
)

// Each ```go block of docs/tuning.md must appear in this file word for
// word, indented as a function body: the layouts below, each run by
// TestTuningLayouts.
func TestTuningSnippets(t *testing.T) {
	own := demotest.Read(t, "tuning_test.go")
	blocks := demotest.GoBlocks(t, "../../docs/tuning.md")
	for i, block := range blocks {
		lines := strings.Split(block, "\n")
		for i, l := range lines {
			if l != "" {
				lines[i] = "\t" + l
			}
		}
		if !strings.Contains(own, strings.Join(lines, "\n")+"\n") {
			t.Errorf("docs/tuning.md snippet %d is not in tuning_test.go word for word (indented by a tab):\n%s", i+1, block)
		}
	}
	if len(blocks) < 4 {
		t.Errorf("docs/tuning.md has %d ```go blocks, want at least 4", len(blocks))
	}
}

// idleConnLayout is docs/tuning.md's layout for idle-connection timeouts
// of 30 s to 600 s.
func idleConnLayout() (*timingwheel.Hierarchy, error) {
	h, err := timingwheel.New(
		timingwheel.WithTick(100*time.Millisecond),
		timingwheel.WithLevels(10, 60, 60, 24),
	)
	return h, err
}

// retransmitLayout is docs/tuning.md's layout for retransmit timers: the
// default.
func retransmitLayout() (*timingwheel.Hierarchy, error) {
	h, err := timingwheel.New() // WithTick(time.Millisecond), WithLevels(1000, 60, 60, 24)
	return h, err
}

// retransmitCoarseLayout is docs/tuning.md's retransmit layout with 10 ms
// of lateness.
func retransmitCoarseLayout() (*timingwheel.Hierarchy, error) {
	h, err := timingwheel.New(
		timingwheel.WithTick(10*time.Millisecond),
		timingwheel.WithLevels(100, 60, 60),
	)
	return h, err
}

// sessionLayout is docs/tuning.md's layout for session expiry, hours to
// days.
func sessionLayout() (*timingwheel.Hierarchy, error) {
	h, err := timingwheel.New(
		timingwheel.WithTick(time.Second),
		timingwheel.WithLevels(60, 60, 24, 30),
	)
	return h, err
}

// TestTuningLayouts runs each layout of docs/tuning.md (its ```go blocks
// above, and the alternatives its text names) with the driver, in a
// synctest bubble: New succeeds, a timer at each level the page's table
// lists, and one past them (an overflow level), fires once at the tick its
// deadline rounds up to, never before and less than a tick after; and a
// heartbeat's Resets to a later deadline each find the timer armed and move
// its firing to the last one.
func TestTuningLayouts(t *testing.T) {
	for _, c := range []struct {
		name      string
		layout    func() (*timingwheel.Hierarchy, error)
		tick      time.Duration
		heartbeat time.Duration   // a timeout re-armed to later halfway through, twice
		deadlines []time.Duration // one per level, then one in an overflow level
	}{
		{"idle conns", idleConnLayout, 100 * time.Millisecond, 30 * time.Second,
			[]time.Duration{250 * time.Millisecond, 30 * time.Second, 600 * time.Second, 2 * time.Hour, 2 * 24 * time.Hour}},
		{"idle conns, 1s tick", func() (*timingwheel.Hierarchy, error) {
			return timingwheel.New(timingwheel.WithTick(time.Second), timingwheel.WithLevels(60, 60, 24))
		}, time.Second, 30 * time.Second,
			[]time.Duration{30 * time.Second, 600 * time.Second, 2 * time.Hour, 2 * 24 * time.Hour}},
		{"retransmits", retransmitLayout, time.Millisecond, 1500 * time.Millisecond,
			[]time.Duration{200 * time.Millisecond, 1500 * time.Millisecond, 60 * time.Second, 2 * time.Hour, 2 * 24 * time.Hour}},
		{"retransmits, 10ms tick", retransmitCoarseLayout, 10 * time.Millisecond, 3 * time.Second,
			[]time.Duration{200 * time.Millisecond, 3 * time.Second, 60 * time.Second, 3 * time.Hour}},
		{"sessions", sessionLayout, time.Second, 30 * time.Minute,
			[]time.Duration{45 * time.Second, 30 * time.Minute, 5 * time.Hour, 2 * 24 * time.Hour, 40 * 24 * time.Hour}},
		{"sessions, 1min tick", func() (*timingwheel.Hierarchy, error) {
			return timingwheel.New(timingwheel.WithTick(time.Minute), timingwheel.WithLevels(60, 24, 30))
		}, time.Minute, 30 * time.Minute,
			[]time.Duration{30 * time.Minute, 5 * time.Hour, 3 * 24 * time.Hour, 40 * 24 * time.Hour}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h, err := c.layout()
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				h.Start()
				defer h.Stop()
				start := time.Now() // the origin: no time passes in the bubble until it sleeps
				var (
					mu    sync.Mutex
					fired = map[string][]time.Time{}
				)
				record := func(what string) func() {
					return func() {
						mu.Lock()
						defer mu.Unlock()
						fired[what] = append(fired[what], time.Now())
					}
				}
				due := map[string]time.Time{} // each timer's deadline rounded up to a tick
				for _, d := range c.deadlines {
					for _, e := range []time.Duration{d, d + c.tick/2} {
						what := fmt.Sprintf("AfterFunc(%v)", e)
						h.AfterFunc(e, record(what))
						due[what] = start.Add((e + c.tick - 1) / c.tick * c.tick)
					}
				}
				hb := h.AfterFunc(c.heartbeat, record("heartbeat"))
				for i := range 2 {
					time.Sleep(c.heartbeat / 2)
					if !hb.Reset(c.heartbeat) {
						t.Fatalf("heartbeat %d: Reset found the timer unarmed", i+1)
					}
				}
				due["heartbeat"] = start.Add(2 * c.heartbeat) // the last Reset, at one heartbeat, plus one
				last := start
				for _, at := range due {
					if at.After(last) {
						last = at
					}
				}
				time.Sleep(time.Until(last) + c.tick)
				synctest.Wait()
				mu.Lock()
				defer mu.Unlock()
				for what, at := range due {
					got := fired[what]
					switch {
					case len(got) != 1:
						t.Errorf("%s fired %d times, want once", what, len(got))
					case got[0].Before(at) || !got[0].Before(at.Add(c.tick)):
						t.Errorf("%s fired %v after the origin, want at its tick, %v", what, got[0].Sub(start), at.Sub(start))
					}
				}
				if n := h.Len(); n != 0 {
					t.Errorf("Len = %d once every timer fired", n)
				}
			})
		})
	}
}
