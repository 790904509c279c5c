//go:build !unix

package main

import "time"

// raiseFileLimit has no limit to raise here; 0 means unknown.
func raiseFileLimit(uint64) uint64 { return 0 }

// processCPU cannot read the process's CPU time here.
func processCPU() time.Duration { return 0 }
