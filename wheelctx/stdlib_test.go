package wheelctx

import (
	"bufio"
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestStandardLibraryContextTests runs package context's own tests, the
// x_test.go and afterfunc_test.go of the Go toolchain that runs this test,
// with this package's four functions in place of package context's
// WithTimeout, WithDeadline, WithTimeoutCause and WithDeadlineCause (on a
// hierarchy on the real clock, driving itself). The files are read from
// GOROOT and rewritten into a module in a temporary directory, never kept
// in this repository. Left out: the four tests of x_test.go that call
// package context's internal tests (XTest…), which read its unexported
// types, and x_test.go's test of the -asan build.
//
// All pass but TestLayersCancel and TestLayersTimeout, the limit that
// WithDeadline's godoc names: a standard child of one of these contexts
// prints as "context.stopCtx.WithCancel", not "context.Background.…", and
// a context of this package under a standard child of another one learns
// of that child's cancel through context.AfterFunc's goroutine, so Done
// closes a moment after the cancel returns. The test fails if any other
// test fails, or if those two start to pass (then this comment is stale).
//
// It builds and runs a test binary of its own, so it runs only in the long
// pass (TIMINGWHEEL_LONG=1, as .ci/run sets it).
func TestStandardLibraryContextTests(t *testing.T) {
	if os.Getenv("TIMINGWHEEL_LONG") != "1" {
		t.Skip("builds and runs package context's tests: set TIMINGWHEEL_LONG=1")
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "src", "context")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"x_test.go", "afterfunc_test.go"} {
		rewriteContextTest(t, filepath.Join(src, name), filepath.Join(dir, name))
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod": "module stdlibcontext\n\ngo 1.25\n\nrequire (\n\tgithub.com/timingwheel/timingwheel v0.0.0\n\tgithub.com/benbjohnson/clock v1.3.5\n)\n\n" +
			"replace github.com/timingwheel/timingwheel => " + strconv.Quote(root) + "\n",
		"go.sum": string(sum),
		"wheel_test.go": "package context_test\n\nimport \"github.com/timingwheel/timingwheel\"\n\n" +
			"// stdlibWheel enforces the deadlines: the real clock, driving itself.\n" +
			"var stdlibWheel = func() *timingwheel.Hierarchy {\n\th, err := timingwheel.New()\n\tif err != nil {\n\t\tpanic(err)\n\t}\n\treturn h\n}()\n\n" +
			"// asan stands for internal/asan, which only the standard library imports.\n" +
			"var asan struct{ Enabled bool }\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-count=1", "-json", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, runErr := cmd.Output()
	passed, failed := testResults(t, stdout)
	want := []string{"TestLayersCancel", "TestLayersTimeout"}
	if len(passed) < 30 || !slices.Equal(failed, want) {
		t.Fatalf("package context's tests with these functions: %d passed, failed %v (want only %v); go test: %v\n%s\n%s",
			len(passed), failed, want, runErr, stderr.String(), lastLines(stdout, 60))
	}
	t.Logf("package context's tests with these functions: %d passed, failed %v", len(passed), failed)
}

// rewriteContextTest writes the test file from to to, with calls of
// package context's four deadline functions made calls of this package's,
// on stdlibWheel.
func rewriteContextTest(t *testing.T, from, to string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, from, nil, 0)
	if err != nil {
		t.Fatalf("package context's tests: %v", err)
	}
	ours := map[string]bool{"WithTimeout": true, "WithDeadline": true, "WithTimeoutCause": true, "WithDeadlineCause": true}
	internal := map[string]bool{"TestParentFinishesChild": true, "TestChildFinishesFirst": true, "TestCancelRemoves": true, "TestCustomContextGoroutines": true}
	f.Decls = slices.DeleteFunc(f.Decls, func(d ast.Decl) bool {
		fn, ok := d.(*ast.FuncDecl)
		return ok && internal[fn.Name.Name]
	})
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.IMPORT {
			continue
		}
		g.Specs = slices.DeleteFunc(g.Specs, func(s ast.Spec) bool {
			return s.(*ast.ImportSpec).Path.Value == `"internal/asan"`
		})
		g.Specs = append(g.Specs, &ast.ImportSpec{Path: &ast.BasicLit{Kind: token.STRING, Value: `"github.com/timingwheel/timingwheel/wheelctx"`}})
		break
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			var name string
			switch fun := n.Fun.(type) {
			case *ast.Ident: // x_test.go imports package context with a dot
				name = fun.Name
			case *ast.SelectorExpr: // afterfunc_test.go: context.WithTimeout
				if x, ok := fun.X.(*ast.Ident); ok && x.Name == "context" {
					name = fun.Sel.Name
				}
			}
			if ours[name] {
				n.Fun = &ast.SelectorExpr{X: ast.NewIdent("wheelctx"), Sel: ast.NewIdent(name)}
				n.Args = append([]ast.Expr{ast.NewIdent("stdlibWheel")}, n.Args...)
			}
		}
		return true
	})
	var buf bytes.Buffer
	if err := printer.Fprint(&buf, fset, f); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// testResults returns the top-level tests that passed and failed in go
// test -json's output, each sorted.
func testResults(t *testing.T, out []byte) (passed, failed []string) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct{ Action, Test string }
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Test == "" || strings.Contains(ev.Test, "/") {
			continue
		}
		switch ev.Action {
		case "pass":
			passed = append(passed, ev.Test)
		case "fail":
			failed = append(failed, ev.Test)
		}
	}
	slices.Sort(passed)
	slices.Sort(failed)
	return passed, failed
}

// lastLines returns the output lines of go test -json's events, the last
// n of them.
func lastLines(out []byte, n int) string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct{ Action, Output string }
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Action == "output" {
			lines = append(lines, strings.TrimRight(ev.Output, "\n"))
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
