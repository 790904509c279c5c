package readme

import (
	"os"
	"strings"
	"testing"
)

// maxREADMELines bounds README.md: what it repeats from elsewhere belongs
// in docs/, CHANGELOG.md or the godoc, so that a newcomer reads it whole.
const maxREADMELines = 350

func TestREADMEFitsItsLength(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > maxREADMELines {
		t.Errorf("README.md has %d lines, want at most %d: move what is said elsewhere to docs/", n, maxREADMELines)
	}
}
