package readme

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"go/scanner"
	"go/token"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/internal/demotest"
	"github.com/timingwheel/timingwheel/netidle"
	"github.com/timingwheel/timingwheel/wheelctx"
	"github.com/timingwheel/timingwheel/wheeltest"
)

// Each ```go block of README.md must appear verbatim in this file or, for
// the examples it shows (the quick start, timers held by value, periodic
// timers), in the root example_test.go. Each function shown here is run by
// a test of this file.
func TestREADMESnippets(t *testing.T) {
	own := demotest.Read(t, "readme_test.go")
	example, err := os.ReadFile("../../example_test.go")
	if errors.Is(err, fs.ErrNotExist) {
		t.Log("../../example_test.go does not exist yet, so the quick start is not checked")
	} else if err != nil {
		t.Fatal(err)
	}
	blocks := demotest.GoBlocks(t, "../../README.md")
	for i, block := range blocks {
		switch {
		case strings.Contains(own, block):
		case strings.HasPrefix(block, "func Example") && example == nil:
		case !strings.Contains(string(example), block):
			t.Errorf("README.md snippet %d is not in readme_test.go or example_test.go word for word:\n%s", i+1, block)
		}
	}
	if len(blocks) < 4 {
		t.Errorf("README.md has %d ```go blocks, want at least 4", len(blocks))
	}
}

// serve closes every connection that sends nothing for idle.
func serve(ln net.Listener, idle time.Duration) error {
	h, err := timingwheel.New()
	if err != nil {
		return err
	}
	h.Start()
	defer h.Stop()
	timeouts := timingwheel.NewTimeouts(h, func(c net.Conn) { c.Close() })

	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		timeouts.Add(c, idle)
		go func() {
			defer timeouts.Remove(c)
			defer c.Close()
			lines := bufio.NewScanner(c)
			for lines.Scan() {
				timeouts.Add(c, idle) // every message re-arms the timeout
			}
		}()
	}
}

func TestServe(t *testing.T) {
	c := serveAndDial(t, "serve", func(ln net.Listener) error { return serve(ln, time.Second) })
	// Talking keeps the connection open past the idle time...
	for range 15 {
		if _, err := fmt.Fprintln(c, "ping"); err != nil {
			t.Fatalf("the connection was closed while in use: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// ... and silence gets it closed, not before the idle time.
	quiet := time.Now()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := c.Read(make([]byte, 1))
	if !errors.Is(err, io.EOF) {
		t.Fatalf("read after going quiet: %v, want io.EOF (closed by the server)", err)
	}
	if d := time.Since(quiet); d < 800*time.Millisecond {
		t.Errorf("closed %v after the last message, want at least the idle time (1s, less the 100ms already spent)", d)
	}
}

func TestSessionsExpire(t *testing.T) {
	clk := wheeltest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h, _ := timingwheel.New(timingwheel.WithClock(clk)) // no driver: the test drives
	var expired []string
	sessions := timingwheel.NewTimeouts(h, func(id string) { expired = append(expired, id) })
	sessions.Add("alice", time.Minute)
	sessions.Add("bob", time.Minute)

	wheeltest.AdvanceTo(h, clk, clk.Now().Add(45*time.Second))
	sessions.Add("alice", time.Minute) // alice is active again
	wheeltest.AdvanceTo(h, clk, clk.Now().Add(30*time.Second))
	if len(expired) != 1 || expired[0] != "bob" {
		t.Fatalf("expired = %v, want [bob]", expired)
	}
}

func TestSessionsExpireSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := timingwheel.New()
		if err != nil {
			t.Fatal(err)
		}
		h.Start()
		defer h.Stop()
		var expired []string
		sessions := timingwheel.NewTimeouts(h, func(id string) { expired = append(expired, id) })
		sessions.Add("alice", time.Minute)
		sessions.Add("bob", time.Minute)

		time.Sleep(45 * time.Second) // instant: the bubble's clock jumps
		sessions.Add("alice", time.Minute)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if len(expired) != 1 || expired[0] != "bob" {
			t.Fatalf("expired = %v, want [bob]", expired)
		}
	})
}

// searchHandler gives each request 200ms; search gives up when ctx is done.
func searchHandler(h *timingwheel.Hierarchy, search func(context.Context, string) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := wheelctx.WithTimeout(h, r.Context(), 200*time.Millisecond)
		defer cancel() // stops the timer at once
		result, err := search(ctx, r.URL.Query().Get("q"))
		if errors.Is(err, context.DeadlineExceeded) {
			http.Error(w, "too slow", http.StatusGatewayTimeout)
			return
		}
		fmt.Fprintln(w, result)
	}
}

func TestSearchHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := demotest.StartHierarchy(t)
		slow := func(ctx context.Context, q string) (string, error) {
			select {
			case <-time.After(time.Duration(len(q)) * 100 * time.Millisecond):
				return "found " + q, nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		for q, want := range map[string]int{"a": http.StatusOK, "abc": http.StatusGatewayTimeout} {
			rec := httptest.NewRecorder()
			searchHandler(h, slow)(rec, httptest.NewRequest("GET", "/search?q="+q, nil))
			if rec.Code != want {
				t.Errorf("q=%s: status %d, want %d", q, rec.Code, want)
			}
		}
	})
}

// serveIdle serves ln, closing each conn that reads nothing for idle:
// handle's blocked Read then returns an error that errors.Is reports as
// netidle.ErrIdle (and os.ErrDeadlineExceeded, as a read deadline's).
func serveIdle(h *timingwheel.Hierarchy, ln net.Listener, idle time.Duration, handle func(net.Conn)) error {
	ln = netidle.Listener(h, ln, idle)
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go handle(c)
	}
}

// TestServeIdle runs serveIdle over real sockets on 127.0.0.1, on a clock
// moved by hand (the server echoes each line, so its Read has re-armed the
// idle close before the clock moves on): a client that talks is not
// closed, and once it falls silent its conn is closed at the idle time, not
// before, and the server's Read returns the idle error.
func TestServeIdle(t *testing.T) {
	mock := wheeltest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // moved by hand, without the real millisecond a clock.Mock sleeps per move
	h := demotest.NewHierarchy(t, timingwheel.WithClock(mock))
	type result struct {
		lines int
		err   error
	}
	results := make(chan result, 1)
	c := serveAndDial(t, "serveIdle", func(ln net.Listener) error {
		return serveIdle(h, ln, time.Minute, func(c net.Conn) {
			defer c.Close()
			lines := bufio.NewScanner(c)
			n := 0
			for lines.Scan() {
				n++
				fmt.Fprintln(c, lines.Text()) // the echo
			}
			results <- result{n, lines.Err()}
		})
	})
	c.SetDeadline(time.Now().Add(20 * time.Second)) // a watchdog: a hung read or write fails the test
	echoes := bufio.NewReader(c)
	talk := func(at time.Duration) {
		t.Helper()
		if _, err := fmt.Fprintln(c, "hello"); err != nil {
			t.Fatalf("at %v: the client was closed while it talked: %v", at, err)
		}
		if line, err := echoes.ReadString('\n'); err != nil || line != "hello\n" {
			t.Fatalf("at %v: the echo: %q, %v", at, line, err)
		}
	}
	at := time.Duration(0)
	for ; at < 5*time.Minute; at += 59 * time.Second {
		talk(at) // never silent for a minute
		mock.Add(59 * time.Second)
		h.Advance()
	}
	talk(at) // 59s after the last line: still open
	mock.Add(time.Minute)
	h.Advance() // a minute after the last line: closed
	select {
	case r := <-results:
		if r.lines != 7 {
			t.Errorf("the server read %d lines, want 7", r.lines)
		}
		if !errors.Is(r.err, netidle.ErrIdle) || !errors.Is(r.err, os.ErrDeadlineExceeded) {
			t.Errorf("the server's Read: %v, want netidle.ErrIdle and os.ErrDeadlineExceeded", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watchdog: the silent conn was not closed within 10s of its idle time")
	}
}

// idleEvents closes a conn after a minute with nothing read, pings a peer
// written nothing for 15s, and cuts every conn at a day. The ping's Write
// runs on a goroutine of pings: the driver never waits on a full socket,
// and while the Write waits on a peer that reads nothing, no other starts.
func idleEvents(h *timingwheel.Hierarchy, ln net.Listener, pings *sync.WaitGroup) net.Listener {
	ping := func(c net.Conn) { pings.Go(func() { c.Write([]byte("ping\n")) }) }
	return netidle.Listener(h, ln, time.Minute,
		netidle.OnWriteIdle(15*time.Second, ping),
		netidle.MaxLifetime(24*time.Hour))
}

// TestIdleEvents runs idleEvents on a clock advanced by hand, over real
// sockets on 127.0.0.1: a silent client gets a ping every 15s and is
// closed after a minute; one that talks at least once a minute (the
// server echoes each line, so its Read has re-armed the idle close before
// the clock moves on) stays open until it is cut at a day.
func TestIdleEvents(t *testing.T) {
	mock := wheeltest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // moved by hand, without the real millisecond a clock.Mock sleeps per move
	h := demotest.NewHierarchy(t, timingwheel.WithClock(mock))
	ln := demotest.Listen(t)
	var pings sync.WaitGroup
	wrapped := idleEvents(h, ln, &pings)
	defer wrapped.Close()
	dial := func() (client net.Conn, lines *bufio.Reader, server net.Conn) {
		t.Helper()
		client, server = demotest.DialAccept(t, wrapped)
		client.SetReadDeadline(time.Now().Add(20 * time.Second)) // a watchdog: a hung read fails the test
		return client, bufio.NewReader(client), server
	}
	_, silentLines, _ := dial()
	talker, talkerLines, talkerServer := dial()
	go func() { // echo, line by line
		lines := bufio.NewScanner(talkerServer)
		for lines.Scan() {
			if _, err := fmt.Fprintln(talkerServer, lines.Text()); err != nil {
				return
			}
		}
	}()
	// talk sends a line and reads its echo, past the pings written since.
	talk := func(at time.Duration) {
		t.Helper()
		if _, err := fmt.Fprintln(talker, "hello"); err != nil {
			t.Fatalf("at %v: the talking client was closed: %v", at, err)
		}
		for {
			line, err := talkerLines.ReadString('\n')
			if err != nil {
				t.Fatalf("at %v: the talking client: %v", at, err)
			}
			if line == "hello\n" {
				return
			}
			if line != "ping\n" {
				t.Fatalf("at %v: the talking client read %q", at, line)
			}
		}
	}
	// pingsThenEOF reads lines up to the close, each a ping; the test
	// fails at once, saying who and want, on any other line or error.
	pingsThenEOF := func(lines *bufio.Reader, who, want string) {
		t.Helper()
		for {
			line, err := lines.ReadString('\n')
			if err == io.EOF {
				return
			}
			if err != nil || line != "ping\n" {
				t.Fatalf("%s: %q, %v; %s", who, line, err, want)
			}
		}
	}
	advance := func(d time.Duration) {
		mock.Add(d)
		h.Advance()
		pings.Wait() // a ping counts as written when its Write ends
	}

	for at := 15 * time.Second; at < time.Minute; at += 15 * time.Second {
		advance(15 * time.Second)
		if line, err := silentLines.ReadString('\n'); err != nil || line != "ping\n" {
			t.Fatalf("the silent client at %v: %q, %v; want a ping", at, line, err)
		}
	}
	talk(45 * time.Second)
	advance(15 * time.Second) // a minute with nothing read from the silent client; its next ping is due too
	pingsThenEOF(silentLines, "the silent client at a minute", "want at most a ping, then the close")

	at := time.Minute
	for ; at+59*time.Second < 24*time.Hour; at += 59 * time.Second {
		talk(at)
		advance(59 * time.Second)
	}
	talk(at)
	advance(24*time.Hour - at) // a day since it was wrapped
	fmt.Fprintln(talker, "hello")
	pingsThenEOF(talkerLines, "the talking client at a day", "want closed by MaxLifetime")
}

// session is a conn whose writes are all made by its own writer goroutine.
type session struct {
	conn  net.Conn
	pings chan struct{} // buffered, one slot: the writer sends a ping for it
}

// pingIdle is the session's OnWriteIdle function: it never blocks.
func (sess *session) pingIdle(net.Conn) {
	select {
	case sess.pings <- struct{}{}:
	default: // the writer is busy writing: no ping needed
	}
}

// TestSessionPingIdle runs pingIdle with the driver, over real sockets on
// 127.0.0.1: the session's writer sends the pings it is handed.
func TestSessionPingIdle(t *testing.T) {
	h := demotest.StartHierarchy(t)
	client, raw := demotest.ConnPair(t)
	sess := &session{pings: make(chan struct{}, 1)}
	sess.conn = netidle.Conn(h, raw, time.Minute, netidle.OnWriteIdle(20*time.Millisecond, sess.pingIdle))
	go func() { // the writer
		for range sess.pings {
			if _, err := sess.conn.Write([]byte("ping\n")); err != nil {
				return
			}
		}
	}()
	defer func() {
		sess.conn.Close() // stops its events
		h.Stop()          // waits for a callback running
		close(sess.pings) // then no pingIdle can send on it
	}()
	client.SetReadDeadline(time.Now().Add(10 * time.Second)) // a watchdog
	lines := bufio.NewReader(client)
	for i := range 3 {
		if line, err := lines.ReadString('\n'); err != nil || line != "ping\n" {
			t.Fatalf("ping %d: %q, %v", i+1, line, err)
		}
	}
}

// eventLoop runs the tasks other goroutines post, one at a time on its own
// goroutine, as a netpoll server's loop or a worker does.
type eventLoop struct {
	mu      sync.Mutex
	tasks   []func()
	wake    chan struct{} // one slot: tasks are waiting
	running int           // written only by the loop: a task is running
}

// post queues task for the loop. It never blocks, so it can be a timer's
// executor: a timer bound by InitOn calls it on the advancing goroutine.
func (l *eventLoop) post(task func()) {
	l.mu.Lock()
	l.tasks = append(l.tasks, task)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run runs the posted tasks until done is closed.
func (l *eventLoop) run(done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-l.wake:
		}
		l.mu.Lock()
		tasks := l.tasks
		l.tasks = nil
		l.mu.Unlock()
		for _, task := range tasks {
			l.running++
			task()
			l.running--
		}
	}
}

// loopConn is a connection's state, owned by its event loop.
type loopConn struct {
	loop     *eventLoop
	closed   int  // times close ran
	onLoop   bool // close ran on the loop
	closedAt time.Time
}

func (c *loopConn) close() {
	c.closed++
	c.onLoop = c.loop.running == 1
	c.closedAt = time.Now()
}

// TestTimerOnEventLoop runs README's executor snippet with the driver: the
// callback runs on the loop, once, a minute after the last Reset, and a
// Reset made on the loop pushes it back.
func TestTimerOnEventLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := demotest.StartHierarchy(t)
		loop := &eventLoop{wake: make(chan struct{}, 1)}
		done, stopped := make(chan struct{}), make(chan struct{})
		go func() { loop.run(done); close(stopped) }()
		defer func() { close(done); <-stopped }()
		conn := &loopConn{loop: loop}
		start := time.Now()

		// conn belongs to the loop: its idle timer's callback is queued
		// there by loop.post (an executor must not block) and runs there.
		var idle timingwheel.Timer
		idle.InitOn(h, loop.post, conn.close)
		idle.Reset(time.Minute)

		time.Sleep(50 * time.Second)
		loop.post(func() { idle.Reset(time.Minute) }) // traffic, seen on the loop
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		seen := make(chan loopConn, 1)
		loop.post(func() { seen <- *conn })
		got := <-seen
		if got.closed != 1 || !got.onLoop {
			t.Fatalf("close ran %d times, on the loop: %v; want once, on the loop", got.closed, got.onLoop)
		}
		if at, want := got.closedAt.Sub(start), 110*time.Second; at < want || at > want+time.Millisecond {
			t.Errorf("closed at %v, want %v (a minute after the Reset at 50s), within a tick", at, want)
		}
	})
}

// TestSnippetsBindTimersBeforeTheirCallbacksUseThem fails on the shape of
// issue 29.3 in any snippet a user may copy — README.md's Go blocks, the
// code blocks of the package's doc comments, and its examples:
//
//	t = h.Every(p, func() { ... t.Stop() })
//
// With a running driver, f may run before the assignment: a data race. A
// timer whose callback uses it is bound first (Init, then Reset or
// ResetEvery), or the callback does not use it.
func TestSnippetsBindTimersBeforeTheirCallbacksUseThem(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{}
	for rest, n := string(readme), 1; ; n++ {
		_, after, ok := strings.Cut(rest, "```go\n")
		if !ok {
			break
		}
		block, after, _ := strings.Cut(after, "\n```")
		rest = after
		sources[fmt.Sprintf("README.md Go block %d", n)] = block
	}
	files, err := filepath.Glob("../../*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		text, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(name)
		if strings.HasPrefix(base, "example_") {
			sources[base] = string(text) // examples are shown in the godoc
		}
		var doc []string // the code blocks of the comments: lines "//\t..."
		for _, line := range strings.Split(string(text), "\n") {
			if code, ok := strings.CutPrefix(strings.TrimLeft(line, " \t"), "//\t"); ok {
				doc = append(doc, code)
			}
		}
		sources[base+" doc comments"] = strings.Join(doc, "\n")
	}
	checked := 0
	for where, src := range sources {
		for _, bad := range selfReferringArmings(src) {
			t.Errorf("%s: %s: the callback uses the timer that the assignment stores, which may run before it (bind the timer with Init first)", where, bad)
		}
		checked++
	}
	if checked < 10 {
		t.Errorf("checked %d sources, want README.md's blocks and the package's files", checked)
	}
}

// selfReferringArmings returns the statements of src of the shape
// x = h.Every(p, f), h.AfterFunc(d, f) or h.AtFunc(t, f) (x may be a
// selector, p.t) whose arguments mention x.
func selfReferringArmings(src string) []string {
	type tok struct {
		t   token.Token
		lit string
	}
	var toks []tok
	var s scanner.Scanner
	fset := token.NewFileSet()
	s.Init(fset.AddFile("", -1, len(src)), []byte(src), func(token.Position, string) {}, 0)
	for {
		_, t, lit := s.Scan()
		if t == token.EOF {
			break
		}
		if lit == "" {
			lit = t.String()
		}
		toks = append(toks, tok{t, lit})
	}
	var found []string
	for i, tk := range toks {
		if tk.t != token.ASSIGN {
			continue
		}
		// The left side: an identifier or a selector chain.
		j := i
		for j > 0 && (toks[j-1].t == token.IDENT || toks[j-1].t == token.PERIOD) {
			j--
		}
		if j == i || toks[j].t != token.IDENT {
			continue
		}
		var lhs []string
		for _, l := range toks[j:i] {
			lhs = append(lhs, l.lit)
		}
		// The right side: a selector chain ending in an arming method, then
		// its arguments.
		k := i + 1
		for k < len(toks) && (toks[k].t == token.IDENT || toks[k].t == token.PERIOD) {
			k++
		}
		if k >= len(toks) || k < i+3 || toks[k].t != token.LPAREN {
			continue
		}
		switch toks[k-1].lit {
		case "Every", "AfterFunc", "AtFunc":
		default:
			continue
		}
		depth, end := 0, k
		for ; end < len(toks); end++ {
			switch toks[end].t {
			case token.LPAREN:
				depth++
			case token.RPAREN:
				depth--
			}
			if depth == 0 {
				break
			}
		}
		for m := k; m+len(lhs) <= min(end, len(toks)); m++ {
			same := true
			for n, l := range lhs {
				if toks[m+n].lit != l {
					same = false
					break
				}
			}
			if same && (m == 0 || toks[m-1].t != token.PERIOD) {
				found = append(found, strings.Join(lhs, "")+" = "+toks[k-1].lit+"(…)")
				break
			}
		}
	}
	return found
}

// TestSelfReferringArmings pins what the check above finds and passes.
func TestSelfReferringArmings(t *testing.T) {
	for src, want := range map[string]int{
		"t = h.Every(30*time.Second, func() { t.Stop() })":              1,
		"p.rto = h.AfterFunc(d, func() { p.rto.Reset(d) })":             1,
		"var t *timingwheel.Timer\nt = h.AtFunc(at, func() { use(t) })": 1,
		"t := h.AfterFunc(d, func() { conn.Close() })":                  0,
		"t = h.AfterFunc(d, func() { conn.Close() }); t.Stop()":         0,
		"t.Init(h, func() { t.Stop() })\nt.ResetEvery(p)":               0,
		"x.t = h.Every(p, func() { t.Stop() })":                         0, // another t
		"n = h.Len()":                                                   0,
		"t = h.Every(p, f(t))":                                          1,
	} {
		if got := len(selfReferringArmings(src)); got != want {
			t.Errorf("%q: %d found, want %d", src, got, want)
		}
	}
}

// serveAndDial runs serve on a new listener on 127.0.0.1 and returns a
// client conn to it. At the end of the test the conn and then the listener
// are closed, and serve (named what in the error) must have returned
// net.ErrClosed.
func serveAndDial(t *testing.T, what string, serve func(net.Listener) error) net.Conn {
	t.Helper()
	ln := demotest.Listen(t)
	served := make(chan error, 1)
	go func() { served <- serve(ln) }()
	t.Cleanup(func() {
		ln.Close()
		if err := <-served; !errors.Is(err, net.ErrClosed) {
			t.Errorf("%s returned %v, want net.ErrClosed", what, err)
		}
	})
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
