package netidle_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/netidle"
	"github.com/timingwheel/timingwheel/wheeltest"
)

func ExampleConn() {
	// A mock clock makes the example exact; in production leave out
	// WithClock and call h.Start().
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))

	client, server := net.Pipe()
	conn := netidle.Conn(h, server, 30*time.Second)
	go fmt.Fprintln(client, "ping")

	mock.Add(20 * time.Second)
	line, _ := bufio.NewReader(conn).ReadString('\n') // data: idle counts from now
	fmt.Printf("read %q\n", line)

	mock.Add(20 * time.Second) // 40s since wrapped, 20s since the Read
	h.Advance()                // the conn's timer looks, finds the Read, and waits 10s more
	fmt.Println("idle deadline in:", conn.(netidle.Control).IdleDeadline().Sub(mock.Now()))
	mock.Add(10 * time.Second) // 30s since the Read
	h.Advance()

	_, err := conn.Read(make([]byte, 1))
	var ne net.Error
	fmt.Println(errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout())
	// Output:
	// read "ping\n"
	// idle deadline in: 10s
	// true true
}

// A server that closes connections that send nothing for a minute: its
// reader sees the same timeout error a read deadline would give.
func ExampleListener() {
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
	ln = netidle.Listener(h, ln, time.Minute)
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

// A server pings a peer it has written nothing to for 15s, as WebSocket
// and HTTP/2 servers do, and still closes it after a minute of silence.
// The event only starts the ping's Write on a goroutine of its own, so
// the goroutine that advances the hierarchy never waits on a full socket;
// the WaitGroup lets the server wait for the pings being written.
func ExampleOnWriteIdle() {
	// A clock moved by hand makes the example exact; in production leave
	// out WithClock and call h.Start().
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := wheeltest.NewClock(start)
	h, _ := timingwheel.New(timingwheel.WithClock(clk))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		panic(err)
	}
	defer client.Close()
	accepted, err := ln.Accept()
	if err != nil {
		panic(err)
	}

	var pings sync.WaitGroup // the pings being written
	sent := 0
	ping := func(c net.Conn) {
		sent++ // events run one at a time
		pings.Go(func() { c.Write([]byte("ping\n")) })
	}
	conn := netidle.Conn(h, accepted, time.Minute, netidle.OnWriteIdle(15*time.Second, ping))
	defer conn.Close()
	peer := bufio.NewReader(client)
	advance := func(to time.Duration) {
		wheeltest.AdvanceTo(h, clk, start.Add(to))
		pings.Wait() // a ping counts as written once its Write ends
	}

	advance(15 * time.Second)
	line, _ := peer.ReadString('\n')
	fmt.Printf("15s: %s", line)

	advance(25 * time.Second)
	fmt.Fprintln(conn, "news") // data: no ping needed until 15s from now
	line, _ = peer.ReadString('\n')
	fmt.Printf("25s: %s", line)

	advance(39 * time.Second)
	fmt.Println("39s: pings so far:", sent)

	advance(40 * time.Second)
	line, _ = peer.ReadString('\n')
	fmt.Printf("40s: %s", line)
	// Output:
	// 15s: ping
	// 25s: news
	// 39s: pings so far: 1
	// 40s: ping
}

// A server asks a silent peer whether it is still there, twice, before
// giving up on it. The question is handed to the conn's writer goroutine:
// the event must not block, and a send on a buffered channel with a
// default case never does.
func ExampleOnReadIdle() {
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))
	server, client := net.Pipe()

	questions := make(chan string, 1)
	silences := 0
	conn := netidle.Conn(h, server, 10*time.Second, netidle.OnReadIdle(func(c net.Conn) {
		// Each time 10s pass with nothing read; data read would restart
		// the count.
		if silences++; silences == 3 {
			c.Close()
			return
		}
		select {
		case questions <- "still there?\n":
		default: // the writer is busy: it has a question queued already
		}
	}))
	go func() { // the conn's writer
		for q := range questions {
			conn.Write([]byte(q))
		}
	}()
	defer close(questions)

	peer := bufio.NewReader(client)
	for _, at := range []string{"10s", "20s", "30s"} {
		mock.Add(10 * time.Second)
		h.Advance()
		line, err := peer.ReadString('\n')
		if err != nil {
			fmt.Printf("%s: the server closed the conn (%v)\n", at, err)
			break
		}
		fmt.Printf("%s: %s", at, line)
	}
	// Output:
	// 10s: still there?
	// 20s: still there?
	// 30s: the server closed the conn (EOF)
}

// A proxy caps every connection at an hour, busy or not; the cut is the
// idle close's, so the conn's reader sees the timeout error it knows.
func ExampleMaxLifetime() {
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))
	server, client := net.Pipe()
	defer client.Close()
	conn := netidle.Conn(h, server, 30*time.Minute, netidle.MaxLifetime(time.Hour))

	go func() {
		for {
			if _, err := client.Write([]byte("busy")); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 4)
	for _, at := range []string{"20m", "40m", "60m"} {
		mock.Add(20 * time.Minute) // never idle for 30 minutes
		h.Advance()
		_, err := conn.Read(buf)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			fmt.Printf("%s: closed, a timeout: %v\n", at, errors.Is(err, os.ErrDeadlineExceeded))
			break
		}
		fmt.Printf("%s: %s\n", at, buf)
	}
	// Output:
	// 20m: busy
	// 40m: busy
	// 60m: closed, a timeout: true
}

// A server caps its conns at about an hour: each conn's lifetime is drawn
// between 54 and 66 minutes, so clients that all connected after a
// restart do not all reconnect at once an hour later.
func ExampleMaxLifetimeJitter() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := wheeltest.NewClock(start)
	h, _ := timingwheel.New(timingwheel.WithClock(clk))
	p := netidle.NewPolicy(h, 2*time.Hour,
		netidle.MaxLifetime(time.Hour),
		netidle.MaxLifetimeJitter(0.1)) // ±10%, as gRPC's MaxConnectionAge

	var conns []net.Conn
	for range 3 { // accepted together
		server, client := net.Pipe()
		defer client.Close()
		conns = append(conns, p.Conn(server))
	}
	closed := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now()) // passed already: an open conn's Read does not wait
		_, err := c.Read(make([]byte, 1))
		return errors.Is(err, netidle.ErrLifetime)
	}
	wheeltest.AdvanceTo(h, clk, start.Add(54*time.Minute-time.Nanosecond))
	for i, c := range conns {
		fmt.Printf("54m: conn %d closed: %v\n", i, closed(c))
	}
	wheeltest.AdvanceTo(h, clk, start.Add(66*time.Minute))
	for i, c := range conns {
		end := c.(netidle.Control).IdleDeadline().Sub(start) // the end drawn for it
		fmt.Printf("66m: conn %d closed: %v, at 54m to 66m: %v\n", i, closed(c), end >= 54*time.Minute && end <= 66*time.Minute)
	}
	// Output:
	// 54m: conn 0 closed: false
	// 54m: conn 1 closed: false
	// 54m: conn 2 closed: false
	// 66m: conn 0 closed: true, at 54m to 66m: true
	// 66m: conn 1 closed: true, at 54m to 66m: true
	// 66m: conn 2 closed: true, at 54m to 66m: true
}

// One policy for a server's conns, wrapped one by one after a handshake:
// the options are checked once and shared, and each conn's idle can change
// afterwards (longer once its client has authenticated).
func ExampleNewPolicy() {
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))
	p := netidle.NewPolicy(h, 10*time.Second, netidle.MaxLifetime(time.Hour))

	client, server := net.Pipe()
	defer client.Close()
	conn := p.Conn(server) // after the handshake
	ctl := conn.(netidle.Control)
	ctl.SetIdle(time.Minute) // authenticated: a minute of silence is fine
	mock.Add(30 * time.Second)
	h.Advance()
	fmt.Println("closed in:", ctl.IdleDeadline().Sub(mock.Now()))
	// Output:
	// closed in: 30s
}

// An http.Server over a netidle.Listener pauses each conn while it serves
// a request and resumes it between requests (and once a handler hijacked
// it): keep-alive conns idle between requests are closed, a slow handler
// or a long response never is.
// ReadTimeout, ReadHeaderTimeout and WriteTimeout still bound one request:
// a paused conn whose request body stalls is closed by nothing else.
func ExampleControl() {
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
	srv := &http.Server{
		Handler: http.NotFoundHandler(),
		ConnState: func(c net.Conn, s http.ConnState) {
			ctl, ok := netidle.ControlOf(c) // also under ServeTLS's *tls.Conn
			if !ok {
				return
			}
			switch s {
			case http.StateActive:
				ctl.Pause()
			case http.StateIdle, http.StateHijacked:
				ctl.Resume()
			}
		},
		ReadTimeout:       time.Minute,
		ReadHeaderTimeout: 10 * time.Second,
		WriteTimeout:      time.Minute,
	}
	go srv.Serve(netidle.Listener(h, ln, 30*time.Second))
	defer srv.Close()
}
