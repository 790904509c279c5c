package demo

import "fmt"

// Both ends of every connection live in this process, so each one costs two
// file descriptors; FDReserve more are kept for the listener, the poller,
// standard streams and the like.
const FDReserve = 64

// FDsNeeded is how many file descriptors conns connections take, both ends
// in this process.
func FDsNeeded(conns int) uint64 { return 2*uint64(conns) + FDReserve }

// ConnsThatFit reports how many connections a limit of n open files allows.
func ConnsThatFit(n uint64) int {
	if n <= FDReserve {
		return 0
	}
	return int(min((n-FDReserve)/2, 1<<30))
}

// FitConns makes room for want connections: it raises RLIMIT_NOFILE where
// allowed, and otherwise reports how many fit, with a note saying so.
func FitConns(want int) (n int, note string, err error) {
	need := FDsNeeded(want)
	limit, raiseErr := RaiseFileLimit(need)
	if limit == 0 || limit >= need { // 0: this platform has no such limit to read
		return want, "", nil
	}
	fit := ConnsThatFit(limit)
	if fit < 1 {
		return 0, "", fmt.Errorf("the open file limit is %d, too low for even one connection "+
			"(each takes two file descriptors here, plus %d for the process); raise it with ulimit -n", limit, FDReserve)
	}
	note = fmt.Sprintf("running %d connections, not %d: they need %d file descriptors (both ends are in this process), "+
		"the limit is %d, and raising it failed (%v); to run all, first: ulimit -n %d",
		fit, want, need, limit, raiseErr, need)
	return fit, note, nil
}
