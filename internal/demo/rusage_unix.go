//go:build unix

package demo

import (
	"syscall"
	"time"
)

// ProcessCPU returns the CPU time the process has used so far, user and
// system, and whether it could be read.
func ProcessCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
