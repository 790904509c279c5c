package demo

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// dialParallel is how many dials DialAll has under way at once: enough to
// connect thousands of clients in a moment, few enough that the server's
// listen queue never overflows.
const dialParallel = 64

// DialTimeout bounds each of DialAll's dials.
const DialTimeout = 10 * time.Second

// DialAll connects n TCP clients to addr, dialParallel at a time, and
// calls dialed(i, c) for client i as soon as it is connected, on the
// goroutine that dialed it. On the first dial that fails it starts no
// more, waits for those under way, and returns that dial's error and the
// client it was for.
func DialAll(addr string, n int, dialed func(i int, c net.Conn)) (failed int, err error) {
	type failure struct {
		i   int
		err error
	}
	ids := make(chan int)
	var first atomic.Pointer[failure]
	var wg sync.WaitGroup
	for range dialParallel {
		wg.Go(func() {
			for i := range ids {
				c, err := net.DialTimeout("tcp", addr, DialTimeout)
				if err != nil {
					first.CompareAndSwap(nil, &failure{i, err})
					continue
				}
				dialed(i, c)
			}
		})
	}
	for i := range n {
		if first.Load() != nil {
			break
		}
		ids <- i
	}
	close(ids)
	wg.Wait()
	if f := first.Load(); f != nil {
		return f.i, f.err
	}
	return n, nil
}
