// Package demo holds the plumbing the demos under examples/ (and the gnet
// module's) share, so that each demo's own files show the timers it is
// about: a main's flag set, -help text, seed, errors and failed checks;
// running the program again, in a fresh process, for a report of its own;
// starting a hierarchy and a listener for a server; connecting many
// clients at once; fitting their connections under the open-file limit;
// measuring the process's CPU time, live memory and quantiles; and a
// logger that drops everything, for gnet.
//
// Its tests' counterpart is package demotest.
package demo
