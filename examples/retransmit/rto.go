package main

import "time"

// rtoEstimator computes the retransmission timeout as RFC 6298 does:
//
//	first sample R:  SRTT = R, RTTVAR = R/2
//	each later R:    RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|, then SRTT = 7/8 SRTT + 1/8 R
//	RTO = SRTT + max(G, 4 RTTVAR), at least min and at most max
//
// where G is the timer granularity: the hierarchy's tick. Before the first
// sample the RTO is initial. Samples come only from packets that were sent
// once (Karn's algorithm): an ack for a retransmitted packet could belong to
// either copy.
type rtoEstimator struct {
	g, min, max, initial time.Duration

	srtt, rttvar time.Duration
	sampled      bool
}

func (e *rtoEstimator) sample(r time.Duration) {
	if !e.sampled {
		e.srtt, e.rttvar, e.sampled = r, r/2, true
		return
	}
	diff := e.srtt - r
	if diff < 0 {
		diff = -diff
	}
	e.rttvar = (3*e.rttvar + diff) / 4
	e.srtt = (7*e.srtt + r) / 8
}

// rto is the timeout for a packet's first transmission.
func (e *rtoEstimator) rto() time.Duration {
	if !e.sampled {
		return min(max(e.initial, e.min), e.max)
	}
	return min(max(e.srtt+max(e.g, 4*e.rttvar), e.min), e.max)
}

// backoff is the timeout after a packet's n-th retransmission: the RTO
// doubled n times, at most max. (RFC 6298 backs off the connection's single
// timer; here every packet has its own, so each backs off on its own.)
func (e *rtoEstimator) backoff(n int) time.Duration {
	d := e.rto()
	for range n {
		if d >= e.max/2 {
			return e.max
		}
		d *= 2
	}
	return d
}
