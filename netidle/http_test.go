package netidle_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/netidle"
)

// Idle connections for real servers (docs/guarantees.md, "Idle
// connections for real servers") as a real server sees it: a net/http server over
// IdleListener, with ConnState pausing each conn on StateActive and
// resuming it on StateIdle, and a real client, on the real clock.

// pauseWhileActive is the ConnState hook of a netidle Listener's server,
// as Control's godoc shows it.
func pauseWhileActive(c net.Conn, s http.ConnState) {
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
}

type httpIdleServer struct {
	h      *timingwheel.Hierarchy
	url    string
	mu     sync.Mutex
	idleAt map[net.Conn]time.Time // when its last idle period began: Resume's clock reading
	closed chan time.Duration     // how long after its last idle period began a conn was closed
}

func startHTTPIdleServer(t *testing.T, idle time.Duration) *httpIdleServer {
	t.Helper()
	h := startedHierarchy(t)
	ln := listen(t)
	s := &httpIdleServer{h: h, url: "http://" + ln.Addr().String(), idleAt: map[net.Conn]time.Time{},
		closed: make(chan time.Duration, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(3 * idle)
		io.WriteString(w, "slow done")
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		for i := range 8 {
			fmt.Fprintf(w, "part %d\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(idle / 2)
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
	srv := &http.Server{Handler: mux, ConnState: func(c net.Conn, st http.ConnState) {
		pauseWhileActive(c, st)
		s.mu.Lock()
		defer s.mu.Unlock()
		switch st {
		case http.StateIdle:
			// The instant Resume counted the idle from, not a reading of
			// the clock taken after it (later by however long this
			// goroutine waited in between).
			s.idleAt[c] = c.(netidle.Control).IdleDeadline().Add(-idle)
		case http.StateClosed:
			if at, ok := s.idleAt[c]; ok {
				s.closed <- h.Now().Sub(at)
			}
		}
	}}
	go srv.Serve(netidle.Listener(h, ln, idle))
	t.Cleanup(func() { srv.Close() })
	return s
}

func get(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err, "GET %s", url)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "GET %s: the body", url)
	return string(b)
}

func TestIdleHTTP_SlowHandlerAndStreamComplete(t *testing.T) {
	const idle = 100 * time.Millisecond
	s := startHTTPIdleServer(t, idle)
	tr := &http.Transport{DisableKeepAlives: false, MaxIdleConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	assert.Equal(t, "slow done", get(t, client, s.url+"/slow"), "a handler slower than idle (3x)")
	body := get(t, client, s.url+"/stream")
	assert.Equal(t, 8, strings.Count(body, "part "), "a streamed response longer than idle (4x) to a silent client: %q", body)
	assert.Equal(t, "hello", get(t, client, s.url+"/"), "a request on the same keep-alive conn")
}

// A keep-alive conn idle between requests is closed, never before idle has
// passed since its last request ended.
func TestIdleHTTP_KeepAliveConnIdleBetweenRequestsIsClosed(t *testing.T) {
	const idle = 200 * time.Millisecond
	s := startHTTPIdleServer(t, idle)
	closedByServer := make(chan struct{}, 4)
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		return &watchEOF{Conn: c, eof: closedByServer}, err
	}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for range 3 {
		assert.Equal(t, "hello", get(t, client, s.url+"/"))
		time.Sleep(idle / 10) // well within idle: the conn is reused
	}
	after := recvWithin(t, 10*time.Second, s.closed, "the idle close of a keep-alive conn")
	assert.GreaterOrEqual(t, after, idle, "closed %v after its last request: before idle", after)
	recvWithin(t, 10*time.Second, closedByServer, "the client seeing its conn closed")
	// The client dials again for the next request, and it is served.
	assert.Equal(t, "hello", get(t, client, s.url+"/"))
}

// watchEOF tells when the server closed a client conn: its Read (the
// transport reads every idle conn) returns an error.
type watchEOF struct {
	net.Conn
	once sync.Once
	eof  chan struct{}
}

func (c *watchEOF) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(func() { c.eof <- struct{}{} })
	}
	return n, err
}

// AllIdle on a raw TCP server: a conn streaming to a client that never
// sends stays open while it writes, and is closed once it has been idle
// both ways for idle. The server notes when each of its writes returned:
// a cut stream is a failure only if no gap between two writes reached
// idle (on a loaded machine the writer itself can stall that long; such a
// round tells nothing, and the test tries again, a few times at most).
func TestIdleHTTP_AllIdleRawServerStreamsToSilentClient(t *testing.T) {
	h := startedHierarchy(t)
	const idle = 300 * time.Millisecond // 10 gaps between lines: a loaded machine's late wake-ups fit
	const lines = 15                    // over idle in all
	for round := range 5 {
		stalled, ok := allIdleStreamRound(t, h, idle, lines)
		if ok {
			return
		}
		t.Logf("round %d: the writer stalled %v between two lines, over idle: again", round, stalled)
	}
	t.Fatal("the writer stalled over idle in every round: nothing was shown")
}

// allIdleStreamRound runs one stream of lines to a silent client and its
// idle close. It reports ok, or, if the stream was cut after the writer
// itself stalled for idle or more, the longest gap between two writes.
func allIdleStreamRound(t *testing.T, h *timingwheel.Hierarchy, idle time.Duration, lines int) (stalled time.Duration, ok bool) {
	ln := listen(t)
	defer ln.Close() // one listener a round
	il := netidle.Listener(h, ln, idle, netidle.AllIdle())
	type result struct {
		err    error
		maxGap time.Duration
	}
	served := make(chan result, 2)
	go func() {
		c, err := il.Accept()
		if err != nil {
			served <- result{err: err}
			return
		}
		defer c.Close()
		last, maxGap := time.Now(), time.Duration(0)
		for i := range lines { // the client silent
			_, err := fmt.Fprintf(c, "line %d\n", i)
			now := time.Now()
			maxGap = max(maxGap, now.Sub(last))
			last = now
			if err != nil {
				served <- result{err, maxGap}
				return
			}
			time.Sleep(idle / 10)
		}
		served <- result{nil, maxGap}
		_, err = c.Read(make([]byte, 1)) // then silent both ways
		served <- result{err: err}
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer client.Close()
	watchdog(t, 20*time.Second, "the stream and its idle close", client)
	r := bufio.NewReader(client)
	for i := range lines {
		line, err := r.ReadString('\n')
		if err != nil {
			client.Close()
			res := recvWithin(t, 10*time.Second, served, "the cut stream's writer")
			if res.maxGap >= idle {
				return res.maxGap, false
			}
			require.NoError(t, err, "line %d: the stream was cut though no gap between writes reached idle (longest %v)", i, res.maxGap)
		}
		assert.Equal(t, fmt.Sprintf("line %d\n", i), line)
	}
	res := recvWithin(t, 10*time.Second, served, "the stream")
	if res.err != nil && res.maxGap >= idle {
		return res.maxGap, false
	}
	require.NoError(t, res.err, "the stream was cut (longest gap between writes %v)", res.maxGap)
	assertIdleErr(t, recvWithin(t, 10*time.Second, served, "the idle close").err, netidle.ErrIdle, "the server's Read once idle both ways")
	_, err = r.ReadString('\n')
	assert.ErrorIs(t, err, io.EOF, "the client sees the close")
	return 0, true
}

// ServeTLS over a netidle Listener, with Control's ConnState hook: the
// hook finds each conn's Control under the *tls.Conn (ControlOf), requests
// over HTTP/1.1 and HTTP/2 (by ALPN) are served with r.TLS set, and a conn
// idle after its requests is closed, never before idle has passed.
func TestIdleHTTP_ServeTLSWithTheConnStateHook(t *testing.T) {
	const idle = 200 * time.Millisecond
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			h := startedHierarchy(t)
			ln := listen(t)
			var logs syncLog
			type request struct {
				tls   bool
				proto int
			}
			served := make(chan request, 4)
			idleAt := make(chan time.Time, 16)
			closed := make(chan time.Time, 4)
			srv := &http.Server{
				Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					served <- request{r.TLS != nil, r.ProtoMajor}
					io.WriteString(w, "ok")
				}),
				ErrorLog: log.New(&logs, "", 0),
				ConnState: func(c net.Conn, s http.ConnState) {
					if s == http.StateIdle {
						idleAt <- time.Now() // before Resume reads the clock
					}
					pauseWhileActive(c, s)
					if s == http.StateClosed {
						closed <- time.Now()
					}
				},
				TLSConfig: &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}},
			}
			go srv.ServeTLS(netidle.Listener(h, ln, idle), "", "")
			t.Cleanup(func() { srv.Close() })
			tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: h2}
			if !h2 {
				tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
			}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			want := request{tls: true, proto: 1}
			if h2 {
				want.proto = 2
			}
			for range 2 {
				assert.Equal(t, "ok", get(t, client, "https://"+ln.Addr().String()+"/"))
				assert.Equal(t, want, recvWithin(t, 5*time.Second, served, "the handler"))
			}
			var last time.Time
			if !h2 { // an HTTP/2 server conn is idle as its streams end, not as HTTP/1's
				last = recvWithin(t, 5*time.Second, idleAt, "StateIdle")
			}
			at := recvWithin(t, 10*time.Second, closed, "the idle close of the conn")
			for len(idleAt) > 0 {
				last = <-idleAt
			}
			if !last.IsZero() {
				assert.GreaterOrEqual(t, at.Sub(last), idle, "closed before idle had passed since its last request")
			}
			assert.NotContains(t, logs.String(), "panic", "the server's log")
		})
	}
}

// A conn a handler hijacked (a WebSocket) gets the idle close again, by
// Control's ConnState hook: silent, it is closed once idle has passed.
func TestIdleHTTP_HijackedConnIsClosedOnceIdle(t *testing.T) {
	const idle = 100 * time.Millisecond
	h := startedHierarchy(t)
	ln := listen(t)
	hijacked := make(chan net.Conn, 1)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, bw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			bw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")
			bw.Flush()
			hijacked <- c
		}),
		ConnState: pauseWhileActive,
	}
	go srv.Serve(netidle.Listener(h, ln, idle))
	t.Cleanup(func() { srv.Close() })
	cli, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	require.NoError(t, err)
	defer cli.Close()
	io.WriteString(cli, "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")
	c := recvWithin(t, 5*time.Second, hijacked, "the hijack")
	defer c.Close()
	cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.ReadAll(cli) // the 101 response, then the server's close
	require.NoError(t, err, "the client's read of a silent hijacked conn: not closed within 10 s")
	_, err = c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, netidle.ErrIdle, "the handler's read of its hijacked conn after the close")
}

// syncLog is an http.Server's ErrorLog sink, safe for its goroutines.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.WriteString(string(p))
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
