// Package demo holds the plumbing the demos under examples/ (and the gnet
// module's) share, so that each demo's own files show the timers it is
// about: a main's handling of flags, errors and failed checks; connecting
// many clients at once; fitting their connections under the open-file
// limit; and measuring the process's CPU time and live memory.
//
// Its tests' counterpart is package demotest.
package demo
