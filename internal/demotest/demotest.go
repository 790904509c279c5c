// Package demotest holds what the tests of the demos under examples/ (and
// the gnet module's) share: a watchdog around a run, the logging of a
// run's report with the checks of the program's exit status, and a table
// of command lines for a flag parser.
//
// Package demo is its counterpart for the programs themselves.
package demotest

import (
	"io"
	"strings"
	"testing"
	"time"
)

// Within calls run and returns what it returns. If run has not returned
// after d, the test fails at once, saying "hung: WHAT did not return
// within D" (run's goroutine is left behind).
func Within[R any](t testing.TB, d time.Duration, what string, run func() (R, error)) (R, error) {
	t.Helper()
	type result struct {
		r   R
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := run()
		done <- result{r, err}
	}()
	select {
	case res := <-done:
		return res.r, res.err
	case <-time.After(d):
		t.Fatalf("hung: %s did not return within %v", what, d)
		panic("unreachable")
	}
}

// LogReport writes a run's report with print, logs it, and fails the test
// (going on) on each of problems: the checks of the program's exit status.
// It returns the report's text.
func LogReport(t testing.TB, print func(io.Writer), problems []string) string {
	t.Helper()
	var out strings.Builder
	print(&out)
	t.Log("\n" + out.String())
	for _, p := range problems {
		t.Error(p)
	}
	return out.String()
}

// FlagCases is a table of command lines for a program's flag parser, each
// with the error it must give: Want is in the error, "" for none.
type FlagCases = []struct {
	Args []string
	Want string
}

// CheckFlags calls parse on each case's Args and fails the test on each
// whose error is not as the case wants.
func CheckFlags(t testing.TB, parse func(args []string) error, cases FlagCases) {
	t.Helper()
	for _, tt := range cases {
		err := parse(tt.Args)
		switch {
		case tt.Want == "" && err != nil:
			t.Errorf("parseFlags(%q) = %v, want no error", tt.Args, err)
		case tt.Want != "" && (err == nil || !strings.Contains(err.Error(), tt.Want)):
			t.Errorf("parseFlags(%q) = %v, want an error containing %q", tt.Args, err, tt.Want)
		}
	}
}
