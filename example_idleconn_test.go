package timingwheel_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/timingwheel/timingwheel"
)

func ExampleHierarchy_IdleConn() {
	// A mock clock makes the example exact; in production leave out
	// WithClock and call h.Start().
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))

	client, server := net.Pipe()
	conn := h.IdleConn(server, 30*time.Second)
	go fmt.Fprintln(client, "ping")

	mock.Add(20 * time.Second)
	line, _ := bufio.NewReader(conn).ReadString('\n') // data: idle counts from now
	fmt.Printf("read %q\n", line)

	mock.Add(20 * time.Second) // 40s since wrapped, 20s since the Read
	fmt.Println("closed:", h.Advance())
	mock.Add(10 * time.Second) // 30s since the Read
	fmt.Println("closed:", h.Advance())

	_, err := conn.Read(make([]byte, 1))
	var ne net.Error
	fmt.Println(errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout())
	// Output:
	// read "ping\n"
	// closed: 0
	// closed: 1
	// true true
}

// A server that closes connections that send nothing for a minute: its
// reader sees the same timeout error a read deadline would give.
func ExampleHierarchy_IdleListener() {
	h, err := timingwheel.New()
	if err != nil {
		panic(err)
	}
	h.Start()
	defer h.Stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	ln = h.IdleListener(ln, time.Minute)
	defer ln.Close()

	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close() // stops the idle timer too
			lines := bufio.NewScanner(c)
			for lines.Scan() { // each line pushes the timeout back
				fmt.Printf("%s: %s\n", c.RemoteAddr(), lines.Text())
			}
			if errors.Is(lines.Err(), os.ErrDeadlineExceeded) {
				fmt.Printf("%s: idle for a minute, closed\n", c.RemoteAddr())
			}
		}()
	}
}
