package demotest

import (
	"os"
	"strings"
	"testing"
)

// Read returns the text of the file at path, failing the test at once if
// it cannot be read.
func Read(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// GoBlocks returns the text of each ```go block of the Markdown file at
// path, in order, without its fences. It fails the test at once if the file
// cannot be read or a block is not closed.
func GoBlocks(t testing.TB, path string) []string {
	t.Helper()
	var blocks []string
	for rest := Read(t, path); ; {
		_, after, ok := strings.Cut(rest, "```go\n")
		if !ok {
			return blocks
		}
		block, after, ok := strings.Cut(after, "\n```")
		if !ok {
			t.Fatalf("%s: unterminated ```go block", path)
		}
		blocks, rest = append(blocks, block), after
	}
}

// DocCode returns the code of the comments of the Go file at path: each run
// of comment lines indented by a tab ("//\t"), without the "//\t", as a
// block. It fails the test at once if the file cannot be read.
func DocCode(t testing.TB, path string) []string {
	t.Helper()
	var blocks, code []string
	for _, line := range strings.Split(Read(t, path), "\n") {
		if l, ok := strings.CutPrefix(line, "//\t"); ok {
			code = append(code, l)
			continue
		}
		if len(code) > 0 {
			blocks, code = append(blocks, strings.Join(code, "\n")), nil
		}
	}
	return blocks
}
