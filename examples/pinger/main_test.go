package main

import (
	"io"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel/internal/demotest"
)

// TestRun runs both modes at small scale, with the checks of the exit
// status: no ping before Ping of write silence, no idle close before
// Timeout of read silence, every silent client closed. Each is measured on
// the server's side, at the socket below the wheel (see tap), from the
// instants the promises count from: so a loaded machine on which a
// client's heartbeat waits for a CPU, or the server's reader does, and a
// heartbeating client is closed after the server has read nothing from it
// for Timeout, fails nothing (the run reports those closes); a close that
// came less than Timeout after the server last read data fails it.
func TestRun(t *testing.T) {
	for _, mode := range []string{modeWheel, modeTicker} {
		t.Run("mode="+mode, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.Mode = mode
			cfg.Conns = 100
			cfg.Ping = 100 * time.Millisecond
			cfg.Timeout = 300 * time.Millisecond
			cfg.Interval = 60 * time.Millisecond
			cfg.Msg = 250 * time.Millisecond
			cfg.Duration = 1400 * time.Millisecond
			cfg.Seed = 23
			// run waits up to 10s for the dials, 10s for the accepts and
			// 10s for the silent clients' closes on a loaded machine.
			rep, err := demotest.Within(t, 60*time.Second, "a run of 1.4s", func() (*report, error) { return run(cfg) })
			if err != nil {
				t.Fatal(err)
			}
			demotest.LogReport(t, rep.print, rep.problems())
			if rep.Closes != rep.Silent || rep.Silent != 20 {
				t.Errorf("%d idle closes of %d silent clients, want 20 of 20", rep.Closes, rep.Silent)
			}
			if rep.LagCloses > 0 {
				t.Logf("%d heartbeating clients closed after %v with nothing read by the server: the machine did not keep up (not a failure)", rep.LagCloses, cfg.Timeout)
			}
			if rep.PingsReceived == 0 {
				t.Error("no client received a ping")
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	for _, bad := range [][]string{{"-mode", "x"}, {"-conns", "0"}, {"-interval", "2s"}, {"-duration", "3s"}, {"extra"}} {
		if _, _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted it", bad)
		}
	}
	cfg, _, err := parseFlags(nil, io.Discard)
	if err != nil || cfg != defaultConfig() {
		t.Errorf("parseFlags(nil) = %+v, %v; want the defaults", cfg, err)
	}
}
