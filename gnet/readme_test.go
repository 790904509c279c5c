package gnetwheel_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/timingwheel/timingwheel"
	gnetwheel "github.com/timingwheel/timingwheel/gnet"
	"github.com/timingwheel/timingwheel/internal/demo"
	"github.com/timingwheel/timingwheel/internal/demotest"
	"golang.org/x/sys/unix"
)

// The handler README.md and the package's doc show, word for word (see
// TestREADMESnippets), run by TestREADMEHandler on a real gnet server.

type server struct {
	gnet.BuiltinEventEngine
	idler *gnetwheel.Idler
}

type session struct{ idle gnetwheel.Idle } // held by value in c.Context()

func newServer(h *timingwheel.Hierarchy) *server { // h driven: h.Start()
	w := gnetwheel.New(h)
	return &server{idler: w.Idler(30*time.Second, // close after 30 s without traffic...
		gnetwheel.OnWriteIdle(10*time.Second, sendPing), // ...optional: a ping when nothing was written
		gnetwheel.MaxLifetime(time.Hour))}               // ...optional: closed an hour after opening
}

func sendPing(c gnet.Conn) {
	c.Context().(*session).idle.Write([]byte("ping\n"))
}

func (s *server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	ss := new(session)
	ss.idle.Init(s.idler, c)
	c.SetContext(ss)
	return nil, gnet.None
}

func (s *server) OnTraffic(c gnet.Conn) gnet.Action {
	ss := c.Context().(*session)
	ss.idle.Traffic() // stores the time: no timer, lock or allocation
	buf, _ := c.Next(-1)
	ss.idle.Write(buf) // an echo: a write through Idle.Write pushes the ping back
	return gnet.None
}

func (s *server) OnClose(c gnet.Conn, err error) gnet.Action {
	ss := c.Context().(*session)
	_ = ss.idle.Err() // gnetwheel.ErrIdle or ErrLifetime if the wheel closed it
	ss.idle.Close()
	return gnet.None
}

// Each ```go block of README.md, and each run of code lines of the
// package's doc (doc.go), must appear in this file word for word.
func TestREADMESnippets(t *testing.T) {
	own := demotest.Read(t, "readme_test.go")
	blocks := append(demotest.GoBlocks(t, "README.md"), demotest.DocCode(t, "doc.go")...)
	if len(blocks) < 2 {
		t.Fatalf("README.md and doc.go have %d code blocks, want at least 2", len(blocks))
	}
	for i, b := range blocks {
		if !strings.Contains(own, b) {
			t.Errorf("code block %d of README.md or doc.go is not in readme_test.go word for word:\n%s", i+1, b)
		}
	}
}

// bootedServer is the README's server, telling the test its address.
type bootedServer struct {
	*server
	addr chan string
	eng  chan gnet.Engine
}

func (s bootedServer) OnBoot(eng gnet.Engine) gnet.Action {
	fd, err := eng.Dup()
	if err != nil {
		panic(err)
	}
	sa, _ := unix.Getsockname(fd)
	unix.Close(fd)
	s.addr <- fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port)
	s.eng <- eng
	return gnet.None
}

func TestREADMEHandler(t *testing.T) {
	h, err := timingwheel.New()
	if err != nil {
		t.Fatal(err)
	}
	h.Start()
	defer h.Stop()
	s := bootedServer{server: newServer(h), addr: make(chan string, 1), eng: make(chan gnet.Engine, 1)}
	ran := make(chan error, 1)
	go func() {
		ran <- gnet.Run(s, "tcp://127.0.0.1:0", gnet.WithLogger(demo.Quiet{}))
	}()
	var addr string
	select {
	case addr = <-s.addr:
	case err := <-ran:
		t.Fatalf("gnet.Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the README's server did not boot within 10 s")
	}
	eng := <-s.eng
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "hello\n"); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "hello\n" {
		t.Fatalf("the echo: %q, %v", b, err)
	}
	c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := eng.Stop(ctx); err != nil {
		t.Fatalf("Engine.Stop: %v", err)
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("gnet.Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("gnet.Run did not return within 10 s of Engine.Stop")
	}
	if n := h.Len(); n != 0 {
		t.Errorf("h.Len() = %d after the conn closed and the engine stopped, want 0", n)
	}
}
