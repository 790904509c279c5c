package demo

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// RunSelf runs this program again, in a fresh process, with args followed
// by reportFlag and a file in a directory of its own (removed after), its
// standard output and error passed through to ours; it then decodes the
// JSON report the run wrote to that file (with WriteReport) into rep. A
// demo that compares ways of doing one job runs each this way, so that one
// way's heap, goroutines and CPU stay out of the next one's numbers.
//
// ran is the run's own error (it exited with a status other than 0); err
// says that the program could not be run again or left no report that
// decodes, and then rep is not to be read.
func RunSelf(args []string, reportFlag string, rep any) (ran, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find this program to run it again: %v", err)
	}
	dir, err := os.MkdirTemp("", filepath.Base(self)+"-child-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "report.json")
	cmd := exec.Command(self, append(args[:len(args):len(args)], reportFlag, file)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	ran = cmd.Run()
	b, err := os.ReadFile(file)
	if err != nil {
		return ran, fmt.Errorf("no report: %v", err)
	}
	if err := json.Unmarshal(b, rep); err != nil {
		return ran, fmt.Errorf("report: %v", err)
	}
	return ran, nil
}

// WriteReport writes rep to file as JSON: a run's report, for the process
// that started it with RunSelf.
func WriteReport(file string, rep any) error {
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}
