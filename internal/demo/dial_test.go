package demo

import (
	"net"
	"sync"
	"testing"
	"time"
)

func TestDialAllConnectsEveryClientOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted sync.WaitGroup
	accepted.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	})
	const n = 300 // more than dialParallel
	var mu sync.Mutex
	got := make(map[int]int, n)
	var conns []net.Conn
	failed, err := DialAll(ln.Addr().String(), n, func(i int, c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		got[i]++
		conns = append(conns, c)
	})
	for _, c := range conns {
		c.Close()
	}
	ln.Close()
	accepted.Wait()
	if err != nil || failed != n {
		t.Fatalf("DialAll = %d, %v; want %d, nil", failed, err, n)
	}
	for i := range n {
		if got[i] != 1 {
			t.Errorf("client %d dialled %d times, want 1", i, got[i])
		}
	}
}

func TestDialAllReportsTheFirstFailureAndStops(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every dial is refused
	const n = 100_000
	start := time.Now()
	failed, err := DialAll(addr, n, func(i int, c net.Conn) {
		c.Close()
		t.Errorf("client %d connected to a closed port", i)
	})
	if err == nil || failed < 0 || failed >= n {
		t.Fatalf("DialAll to a closed port = %d, %v; want a client's index and its error", failed, err)
	}
	t.Logf("client %d: %v (after %v)", failed, err, time.Since(start))
}
