package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// meta is what a run records about itself in the "# key: value" header of
// the raw results file, so that -in can rebuild the report later.
type meta map[string]string

// metaKeys is the header order.
var metaKeys = []string{
	"date", "cpu-model", "nproc", "memory", "kernel", "go", "commit",
	"rounds", "benchtime", "tags", "fd-limit",
	"report-command", "bench-command", "wakeups-command",
}

func machineMeta(root, benchDir string) meta {
	m := meta{
		"nproc":  output(root, "nproc"),
		"kernel": output(root, "uname", "-sr"),
		"go":     output(benchDir, "go", "version"),
		"commit": output(root, "git", "rev-parse", "--short", "HEAD"),
	}
	// What a run writes (the page, its plots, the raw results) does not make
	// the measured code differ from the commit.
	if output(root, "git", "status", "--porcelain", "--untracked-files=no", "--", ".",
		":(exclude)docs/benchmarks.md", ":(exclude)docs/*.png", ":(exclude)bench/results") != "" {
		m["commit"] += " (with uncommitted changes)"
	}
	m["cpu-model"] = procField("/proc/cpuinfo", "model name")
	m["memory"] = procField("/proc/meminfo", "MemTotal")
	return m
}

// procField returns the value of the first "key : value" line of a /proc file.
func procField(path, key string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func (m meta) write(w *strings.Builder) {
	for _, k := range metaKeys {
		fmt.Fprintf(w, "# %s: %s\n", k, m[k])
	}
}

var metaLine = regexp.MustCompile(`^# ([a-z-]+): (.*)$`)

// parseMeta reads the "# key: value" lines, wherever they are (the run's
// duration is appended at the end).
func parseMeta(data string) meta {
	m := meta{}
	for line := range strings.Lines(data) {
		if s := metaLine.FindStringSubmatch(strings.TrimRight(line, "\n")); s != nil {
			m[s[1]] = s[2]
		}
	}
	return m
}
