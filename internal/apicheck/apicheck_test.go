package apicheck

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "write api/*.txt from the packages' API (a change made on purpose: commit it with a CHANGELOG line)")

// apiDir is api/ at the repository root.
const apiDir = "../../api"

// TestAPIMatchesItsFile fails when the exported API of a published package
// differs from api/NAME.txt, saying which lines were added and removed, and
// when a file of api/ belongs to no package of Packages.
func TestAPIMatchesItsFile(t *testing.T) {
	pkgs, failed, err := load(".", Packages)
	if err != nil {
		t.Fatal(err)
	}
	written := map[string]bool{}
	for _, path := range Packages {
		if err, ok := failed[path]; ok {
			if !inWorkspace(t) {
				// Outside the repository's go.work (GOWORK=off, or the
				// module's zip) the other modules cannot be loaded.
				t.Logf("%s not checked: it loads only in the repository's workspace (go.work): %v", path, err)
				continue
			}
			t.Errorf("%s: %v", path, err)
			continue
		}
		pkg := pkgs[path]
		file := filepath.Join(apiDir, pkg.Name()+".txt")
		written[filepath.Base(file)] = true
		got := API(pkg)
		if *update {
			if err := os.MkdirAll(apiDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: %v (a new package: go test ./internal/apicheck -update)", path, err)
			continue
		}
		want := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if slices.Equal(got, want) {
			continue
		}
		if added, removed := diff(got, want); len(added)+len(removed) == 0 {
			t.Errorf("%s is not sorted, or repeats a line: go test ./internal/apicheck -update", file)
		} else {
			t.Errorf("the API of %s differs from %s:\n%s%s"+
				"If the change is on purpose, run go test ./internal/apicheck -update and commit api/ with it, with a line in CHANGELOG.md.",
				path, file, lines("+ ", added), lines("- ", removed))
		}
	}
	entries, err := os.ReadDir(apiDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !written[e.Name()] && len(failed) == 0 {
			t.Errorf("api/%s belongs to no package of apicheck.Packages: remove it, or add its package there", e.Name())
		}
	}
}

// TestAPILinesOfATypeAndItsMethods pins the format of the lines on the
// core's own package: a generic function, a struct with its fields, a
// method with a pointer receiver, a variadic parameter, a function-typed
// parameter without its names.
func TestAPILinesOfATypeAndItsMethods(t *testing.T) {
	const core = "github.com/timingwheel/timingwheel"
	pkgs, failed, err := load(".", []string{core})
	if err != nil {
		t.Fatal(err)
	}
	if err := failed[core]; err != nil {
		t.Fatal(err)
	}
	got := API(pkgs[core])
	for _, want := range []string{
		"pkg timingwheel, func New(...Option) (*Hierarchy, error)",
		"pkg timingwheel, func NewTimeouts[K comparable](*Hierarchy, func(K)) *Timeouts[K]",
		"pkg timingwheel, method (*Timeouts[K]) Add(K, time.Duration)",
		"pkg timingwheel, method (*Timer) InitOn(*Hierarchy, func(func()), func()) *Timer",
		"pkg timingwheel, type Stats struct",
		"pkg timingwheel, type Stats struct, Lateness [32]uint64",
		"pkg timingwheel, const LatenessBuckets untyped int = 32",
		"pkg timingwheel, var ErrInvalidConfig error",
		"pkg timingwheel, func WithClock(clock.Clock) Option",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("no line %q in the API:\n%s", want, strings.Join(got, "\n"))
		}
	}
	if !slices.IsSorted(got) {
		t.Error("the lines are not sorted")
	}
}

// inWorkspace reports whether the go command uses a go.work here.
func inWorkspace(t *testing.T) bool {
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil {
		t.Fatalf("go env GOWORK: %v", err)
	}
	gowork := strings.TrimSpace(string(out))
	return gowork != "" && gowork != "off"
}

// diff returns the lines of got not in want, and of want not in got.
func diff(got, want []string) (added, removed []string) {
	for _, l := range got {
		if !slices.Contains(want, l) {
			added = append(added, l)
		}
	}
	for _, l := range want {
		if !slices.Contains(got, l) {
			removed = append(removed, l)
		}
	}
	return added, removed
}

func lines(prefix string, ls []string) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(prefix + l + "\n")
	}
	return b.String()
}
