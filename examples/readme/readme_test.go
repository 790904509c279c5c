package readme

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/timingwheel/timingwheel"
)

// Each ```go block of README.md must appear verbatim in this file or, for
// the examples it shows (the quick start, timers held by value), in the
// root example_test.go.
func TestREADMESnippets(t *testing.T) {
	own, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../example_test.go")
	if errors.Is(err, fs.ErrNotExist) {
		t.Log("../../example_test.go does not exist yet, so the quick start is not checked")
	} else if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for rest := string(readme); ; {
		_, after, ok := strings.Cut(rest, "```go\n")
		if !ok {
			break
		}
		block, after, ok := strings.Cut(after, "\n```")
		if !ok {
			t.Fatal("README.md: unterminated ```go block")
		}
		rest = after
		blocks++
		switch {
		case strings.Contains(string(own), block):
		case strings.HasPrefix(block, "func Example") && example == nil:
		case !strings.Contains(string(example), block):
			t.Errorf("README.md snippet %d is not in readme_test.go or example_test.go word for word:\n%s", blocks, block)
		}
	}
	if blocks < 4 {
		t.Errorf("README.md has %d ```go blocks, want at least 4", blocks)
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- serve(ln, time.Second) }()
	defer func() {
		ln.Close()
		if err := <-served; !errors.Is(err, net.ErrClosed) {
			t.Errorf("serve returned %v, want net.ErrClosed", err)
		}
	}()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
	_, err = c.Read(make([]byte, 1))
	if !errors.Is(err, io.EOF) {
		t.Fatalf("read after going quiet: %v, want io.EOF (closed by the server)", err)
	}
	if d := time.Since(quiet); d < 800*time.Millisecond {
		t.Errorf("closed %v after the last message, want at least the idle time (1s, less the 100ms already spent)", d)
	}
}

func TestSessionsExpire(t *testing.T) {
	mock := clock.NewMock()
	h, err := timingwheel.New(timingwheel.WithClock(mock))
	if err != nil {
		t.Fatal(err)
	}
	var expired []string
	sessions := timingwheel.NewTimeouts(h, func(id string) { expired = append(expired, id) })
	sessions.Add("alice", time.Minute)
	sessions.Add("bob", time.Minute)

	mock.Add(45 * time.Second)
	sessions.Add("alice", time.Minute) // alice is active again
	h.Advance()

	mock.Add(30 * time.Second) // bob has been idle 75s, alice 30s
	h.Advance()
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
		ctx, cancel := h.WithTimeout(r.Context(), 200*time.Millisecond)
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
		h, err := timingwheel.New()
		if err != nil {
			t.Fatal(err)
		}
		h.Start()
		defer h.Stop()
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

// idleEvents closes a conn after a minute with nothing read, pings a peer
// written nothing for 15s, and cuts every conn at a day.
func idleEvents(h *timingwheel.Hierarchy, ln net.Listener) net.Listener {
	return h.IdleListener(ln, time.Minute,
		timingwheel.OnWriteIdle(15*time.Second, ping),
		timingwheel.MaxLifetime(24*time.Hour))
}

func ping(c net.Conn) {
	// Runs on the hierarchy's driver goroutine: it must not block. A socket
	// with room takes the ping at once; a peer that reads nothing costs the
	// deadline at most.
	c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
	c.Write([]byte("ping\n"))
}
