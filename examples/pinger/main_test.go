package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestRun runs both modes at small scale, with the checks of the exit
// status. The margins are wide: heartbeats at most 72ms apart against a
// 300ms timeout, and the last silent client's deadline a full second
// before the end; so only a real bug fails it, not a slow machine.
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
			done := make(chan struct{})
			wd := time.AfterFunc(30*time.Second, func() {
				select {
				case <-done:
				default:
					panic("hung: a run of 1.4s did not return within 30s")
				}
			})
			defer wd.Stop()
			rep, err := run(cfg)
			close(done)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			rep.print(&out)
			t.Log(out.String())
			for _, p := range rep.problems() {
				t.Error(p)
			}
			if rep.Closes != rep.Silent || rep.Silent != 20 {
				t.Errorf("%d idle closes of %d silent clients, want 20 of 20", rep.Closes, rep.Silent)
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
