package demo

import (
	"flag"
	"os"
	"slices"
	"testing"
)

// childEnv, set, makes this test binary the child of TestRunSelf: see
// TestMain.
const childEnv = "DEMO_RUNSELF_CHILD"

// TestMain runs the child of TestRunSelf instead of the tests when childEnv
// is set: it writes a report of the arguments it was given (unless
// -no-report) and exits with -status.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "" {
		os.Exit(m.Run())
	}
	fs := flag.NewFlagSet("child", flag.ExitOnError)
	status := fs.Int("status", 0, "")
	noReport := fs.Bool("no-report", false, "")
	file := fs.String("report", "", "")
	fs.Parse(os.Args[1:])
	if !*noReport {
		if err := WriteReport(*file, childReport{Args: os.Args[1:]}); err != nil {
			os.Exit(100)
		}
	}
	os.Exit(*status)
}

type childReport struct{ Args []string }

func TestRunSelf(t *testing.T) {
	t.Setenv(childEnv, "1")
	for _, tt := range []struct {
		args             []string
		wantRan, wantErr bool
	}{
		{[]string{"-status", "0"}, false, false},
		{[]string{"-status", "1"}, true, false},
		{[]string{"-status", "0", "-no-report"}, false, true},
	} {
		var rep childReport
		ran, err := RunSelf(tt.args, "-report", &rep)
		if (ran != nil) != tt.wantRan || (err != nil) != tt.wantErr {
			t.Errorf("RunSelf(%q): ran %v, err %v; want a ran error %v, an err %v", tt.args, ran, err, tt.wantRan, tt.wantErr)
			continue
		}
		if err == nil && (len(rep.Args) != len(tt.args)+2 || !slices.Equal(rep.Args[:len(tt.args)], tt.args) || rep.Args[len(tt.args)] != "-report") {
			t.Errorf("RunSelf(%q): the child was given %q, want the args, then -report and a file", tt.args, rep.Args)
		}
	}
}
