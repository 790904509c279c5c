package main

import "fmt"

// Both ends of every connection live in this process, so each one costs two
// file descriptors; fdReserve more are kept for the listener, the poller,
// standard streams and the like.
const fdReserve = 64

func fdsNeeded(conns int) uint64 { return 2*uint64(conns) + fdReserve }

// connsThatFit reports how many connections a limit of n open files allows.
func connsThatFit(n uint64) int {
	if n <= fdReserve {
		return 0
	}
	return int(min((n-fdReserve)/2, 1<<30))
}

// fitConns makes room for want connections: it raises RLIMIT_NOFILE where
// allowed, and otherwise reports how many fit, with a note saying so.
func fitConns(want int) (n int, note string, err error) {
	need := fdsNeeded(want)
	limit, raiseErr := raiseFileLimit(need)
	if limit == 0 || limit >= need { // 0: this platform has no such limit to read
		return want, "", nil
	}
	fit := connsThatFit(limit)
	if fit < 1 {
		return 0, "", fmt.Errorf("the open file limit is %d, too low for even one connection "+
			"(each takes two file descriptors here, plus %d for the process); raise it with ulimit -n", limit, fdReserve)
	}
	note = fmt.Sprintf("running %d connections, not %d: they need %d file descriptors (both ends are in this process), "+
		"the limit is %d, and raising it failed (%v); to run all, first: ulimit -n %d",
		fit, want, need, limit, raiseErr, need)
	return fit, note, nil
}
