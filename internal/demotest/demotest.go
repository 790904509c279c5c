// Package demotest holds what the tests of the demos under examples/ (and
// the gnet module's) share: a watchdog around a run, the logging of a
// run's report with the checks of the program's exit status, a table of
// command lines for a flag parser, and the set-up of a hierarchy and of
// loopback connections.
//
// Package demo is its counterpart for the programs themselves.
package demotest

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel"
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

// NewHierarchy returns timingwheel.New(opts...); the test fails at once
// if New does.
func NewHierarchy(t testing.TB, opts ...timingwheel.Option) *timingwheel.Hierarchy {
	t.Helper()
	h, err := timingwheel.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// StartHierarchy returns NewHierarchy(t, opts...) with its driver started;
// it is stopped when the test ends (a cleanup of t).
func StartHierarchy(t testing.TB, opts ...timingwheel.Option) *timingwheel.Hierarchy {
	t.Helper()
	h := NewHierarchy(t, opts...)
	h.Start()
	t.Cleanup(h.Stop)
	return h
}

// Listen returns a TCP listener on a free port of 127.0.0.1, closed when
// the test ends; the test fails at once if there is none.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// ConnPair returns the two ends of a new TCP connection on 127.0.0.1, the
// client's and the server's, both closed when the test ends.
func ConnPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ln := Listen(t)
	defer ln.Close()
	return DialAccept(t, ln)
}

// DialAccept dials ln's address and returns that client conn and the one
// ln accepts for it, both closed when the test ends; the test fails at
// once if either fails.
func DialAccept(t testing.TB, ln net.Listener) (client, server net.Conn) {
	t.Helper()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

// CheckParse is CheckFlags for a program's parseFlags(args, errOut) that
// returns a config and an error: it is called with errOut io.Discard.
func CheckParse[C any](t testing.TB, parse func(args []string, errOut io.Writer) (C, error), cases FlagCases) {
	t.Helper()
	CheckFlags(t, func(args []string) error {
		_, err := parse(args, io.Discard)
		return err
	}, cases)
}
