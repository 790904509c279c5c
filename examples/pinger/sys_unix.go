//go:build unix

package main

import (
	"syscall"
	"time"
)

// raiseFileLimit makes RLIMIT_NOFILE at least need if it may, and returns
// the soft limit in force.
func raiseFileLimit(need uint64) uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	if lim.Cur >= need {
		return lim.Cur
	}
	want := syscall.Rlimit{Cur: need, Max: max(lim.Max, need)}
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) == nil {
		return need
	}
	return lim.Cur
}

// processCPU returns the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
