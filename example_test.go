package timingwheel_test

import (
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/timingwheel/timingwheel"
)

// README.md shows ExampleHierarchy_AfterFunc (quick start) and ExampleTimer_Reset
// (timers held by value) word for word, and a part of ExampleHierarchy_Every;
// examples/readme checks that they match.

// The package doc's snippet, with a real connection: the server's side is
// closed once nothing pushed its timer back for 30ms. The hierarchy drives
// itself: its first timer armed starts the driver.
func Example() {
	h, err := timingwheel.New() // 1ms tick; levels of ms, s, min, h
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Stop()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	conn, err := ln.Accept()
	if err != nil {
		fmt.Println(err)
		return
	}

	t := h.AfterFunc(30*time.Millisecond, func() { conn.Close() })
	t.Reset(30 * time.Millisecond) // heartbeat: push the deadline back

	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = client.Read(make([]byte, 1)) // until the server's side is closed
	fmt.Println("closed:", err == io.EOF, "armed:", h.Len())
	// Output:
	// closed: true armed: 0
}

func ExampleNew() {
	// A 10ms tick and three levels: 10ms slots for a second, 1s slots for a
	// minute, 1min slots for an hour. Later deadlines work too.
	h, err := timingwheel.New(
		timingwheel.WithTick(10*time.Millisecond),
		timingwheel.WithLevels(100, 60, 60),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("armed:", h.Len())

	_, err = timingwheel.New(timingwheel.WithLevels(60, 1))
	fmt.Println(err)
	// Output:
	// armed: 0
	// timingwheel: invalid config: WithLevels([60 1]): level 1 has 1 slots; each level needs 2 to 4194304
}

func ExampleHierarchy_AfterFunc() {
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))

	h.AfterFunc(25*time.Millisecond, func() { fmt.Println("fired") })

	mock.Add(30 * time.Millisecond)
	fmt.Println("ran:", h.Advance())
	// Output:
	// fired
	// ran: 1
}

func ExampleHierarchy_Advance() {
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))
	start := mock.Now()

	for _, d := range []time.Duration{3 * time.Second, time.Second, 2 * time.Hour} {
		h.AfterFunc(d, func() { fmt.Println("due after", d, "- fired at", mock.Now().Sub(start)) })
	}
	// Drive the hierarchy from your own loop: jump to when Next says there is
	// work (a firing, or a coarse slot to cascade) and Advance.
	for h.Len() > 0 {
		next, _ := h.Next()
		mock.Set(next)
		h.Advance()
	}
	// Output:
	// due after 1s - fired at 1s
	// due after 3s - fired at 3s
	// due after 2h0m0s - fired at 2h0m0s
}

func ExampleTimer_Reset() {
	// A retransmit timer that backs off: each time it fires without an
	// acknowledgement, it re-arms itself with twice the timeout.
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))
	start := mock.Now()

	type packet struct {
		rto     timingwheel.Timer // held by value in the packet's record
		timeout time.Duration
	}
	p := &packet{timeout: 200 * time.Millisecond}
	// Init binds the timer before it is first armed, so its callback can
	// use it even if a running driver fires it at once.
	p.rto.Init(h, func() {
		fmt.Println("retransmit at", mock.Now().Sub(start))
		p.timeout *= 2
		p.rto.Reset(p.timeout) // from inside its own callback
	})
	p.rto.Reset(p.timeout) // the packet is sent: arm its timer

	for fired := 0; fired < 3; {
		next, _ := h.Next() // the next work: a deadline, or a cascade before it
		mock.Set(next)
		fired += h.Advance()
	}
	// The acknowledgement arrives: stop retransmitting.
	fmt.Println("stopped before firing again:", p.rto.Stop())
	// Output:
	// retransmit at 200ms
	// retransmit at 600ms
	// retransmit at 1.4s
	// stopped before firing again: true
}

func ExampleTimer_Init() {
	// Timers held by value in the caller's own records: the slice is the
	// only allocation, and Init, Reset and Stop allocate nothing.
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))

	type session struct {
		user   string
		expiry timingwheel.Timer
	}
	// Use the records in place (&sessions[i]): a Timer must not be copied
	// once bound, so do not append to this slice afterwards.
	sessions := make([]session, 3)
	for i, user := range []string{"alice", "bob", "carol"} {
		s := &sessions[i]
		s.user = user
		s.expiry.Init(h, func() { fmt.Println(s.user, "expired") })
	}
	fmt.Println("armed after Init:", h.Len())

	for i := range sessions {
		wasArmed := sessions[i].expiry.Reset(time.Duration(i+1) * time.Minute)
		fmt.Println(sessions[i].user, "was armed:", wasArmed)
	}
	fmt.Println("bob logs out, stopped:", sessions[1].expiry.Stop())

	mock.Add(5 * time.Minute)
	fmt.Println("ran:", h.Advance())
	// Output:
	// armed after Init: 0
	// alice was armed: false
	// bob was armed: false
	// carol was armed: false
	// bob logs out, stopped: true
	// alice expired
	// carol expired
	// ran: 2
}

func ExampleTimeouts() {
	// Idle-connection timeouts: every heartbeat re-arms the connection's
	// timeout; the silent one is reported once it expires.
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))
	idle := timingwheel.NewTimeouts(h, func(conn string) {
		fmt.Println("closing idle connection", conn)
	})

	idle.Add("alice", 30*time.Second)
	idle.Add("bob", 30*time.Second)
	for range 3 {
		mock.Add(20 * time.Second)
		idle.Add("alice", 30*time.Second) // alice sends a heartbeat, bob does not
		h.Advance()
	}
	fmt.Println("still tracked:", idle.Len())
	// Output:
	// closing idle connection bob
	// still tracked: 1
}

func ExampleHierarchy_AtFunc() {
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))
	start := mock.Now()

	// An absolute deadline, like a session that expires at a set time.
	t := h.AtFunc(start.Add(90*time.Minute), func() { fmt.Println("session expired") })
	fmt.Println("deadline:", t.Deadline().Sub(start))

	mock.Add(90*time.Minute - time.Millisecond)
	fmt.Println("ran:", h.Advance())
	mock.Add(time.Millisecond)
	fmt.Println("ran:", h.Advance())
	// Output:
	// deadline: 1h30m0s
	// ran: 0
	// session expired
	// ran: 1
}

func ExampleHierarchy_Start() {
	// In production: the real clock and the driver goroutine, which sleeps
	// until the next timer is due (and not at all while none is armed).
	h, err := timingwheel.New()
	if err != nil {
		panic(err)
	}
	h.Start()
	defer h.Stop() // waits for the driver to exit; armed timers stay armed

	done := make(chan struct{})
	h.AfterFunc(10*time.Millisecond, func() { close(done) })
	select {
	case <-done:
		fmt.Println("fired; armed now:", h.Len())
	case <-time.After(10 * time.Second):
		fmt.Println("not fired within 10s")
	}
	// Output:
	// fired; armed now: 0
}

func ExampleHierarchy_Next() {
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))
	start := mock.Now()

	_, ok := h.Next()
	fmt.Println("work pending:", ok)

	h.AfterFunc(250*time.Millisecond, func() {})
	next, ok := h.Next()
	fmt.Println("work pending:", ok, "at", next.Sub(start))

	// Next may be early, never late: for a timer further out, it is when
	// the coarse slot that holds the timer cascades. Advancing there and
	// asking again gets to the deadline.
	h2, _ := timingwheel.New(timingwheel.WithClock(mock))
	deadline := start.Add(90 * time.Second)
	h2.AtFunc(deadline, func() {})
	next, _ = h2.Next()
	for next.Before(deadline) {
		fmt.Println("a cascade at", next.Sub(start))
		mock.Set(next)
		h2.Advance()
		next, _ = h2.Next()
	}
	fmt.Println("the deadline at", next.Sub(start))
	// Output:
	// work pending: false
	// work pending: true at 250ms
	// a cascade at 1m0s
	// the deadline at 1m30s
}

func ExampleTimer_Stop() {
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))

	t := h.AfterFunc(time.Second, func() { fmt.Println("never runs") })
	fmt.Println("stopped:", t.Stop())
	fmt.Println("stopped again:", t.Stop())
	fmt.Println("armed:", h.Len())

	mock.Add(2 * time.Second)
	fmt.Println("ran:", h.Advance())
	// Output:
	// stopped: true
	// stopped again: false
	// armed: 0
	// ran: 0
}

func ExampleTimer_ResetAt() {
	// An event loop that re-arms many timers reads the clock once for all.
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))
	start := mock.Now()

	timers := make([]*timingwheel.Timer, 3)
	for i := range timers {
		timers[i] = h.AfterFunc(time.Minute, func() {})
	}
	mock.Add(10 * time.Second)
	deadline := mock.Now().Add(time.Minute) // one clock read
	for _, t := range timers {
		t.ResetAt(deadline)
	}
	fmt.Println("deadline:", timers[0].Deadline().Sub(start))
	// Output:
	// deadline: 1m10s
}

func ExampleTimeouts_Remove() {
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))
	idle := timingwheel.NewTimeouts(h, func(conn int) { fmt.Println("expired", conn) })

	idle.Add(1, time.Minute)
	idle.Add(2, time.Minute)
	d, ok := idle.Deadline(1)
	fmt.Println("conn 1 tracked:", ok, "deadline in", d.Sub(mock.Now()))

	// Connection 1 closes on its own: stop tracking it.
	fmt.Println("removed:", idle.Remove(1), "left:", idle.Len())

	mock.Add(time.Minute)
	h.Advance()
	fmt.Println("left:", idle.Len())
	// Output:
	// conn 1 tracked: true deadline in 1m0s
	// removed: true left: 1
	// expired 2
	// left: 0
}

func ExampleHierarchy_Every() {
	// A keepalive every 30s on a grid that does not drift: the runs are
	// due at 30s, 60s, 90s after it was armed, however late each one ran.
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))
	start := mock.Now()

	// A callback that uses its own timer (to stop it, or to read its
	// Deadline) needs the timer bound before it is armed: Init, then
	// ResetEvery. Written t = h.Every(p, f), a running driver may call f
	// before t is assigned, a data race.
	var t timingwheel.Timer
	runs := 0
	t.Init(h, func() {
		runs++
		fmt.Println("keepalive at", mock.Now().Sub(start), "next due", t.Deadline().Sub(start))
		if runs == 3 {
			t.Stop() // the next run is armed already: Stop from inside wins
		}
	})
	t.ResetEvery(30 * time.Second)

	// A callback that does not use its timer may be armed by Every.
	minutes := 0
	perMinute := h.Every(time.Minute, func() { minutes++ })

	mock.Add(31 * time.Second) // the driver was a second late
	h.Advance()
	mock.Add(29 * time.Second)
	h.Advance()
	mock.Add(75 * time.Second) // asleep across two instants: one run, the rest skipped
	h.Advance()
	mock.Add(time.Hour)
	h.Advance()
	fmt.Println("runs:", runs, "minutes:", minutes, "stopped:", perMinute.Stop())
	// Output:
	// keepalive at 31s next due 1m0s
	// keepalive at 1m0s next due 1m30s
	// keepalive at 2m15s next due 2m30s
	// runs: 3 minutes: 3 stopped: true
}

func ExampleTimer_ResetEvery() {
	// A periodic timer held by value in a connection's own struct: no
	// allocation to start, run or stop it.
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))

	type conn struct {
		flush timingwheel.Timer
		dirty int
	}
	c := &conn{dirty: 3}
	c.flush.Init(h, func() {
		fmt.Println("flushed", c.dirty)
		c.dirty = 0
	})
	c.flush.ResetEvery(time.Second)

	for range 2 {
		mock.Add(time.Second)
		h.Advance()
	}
	fmt.Println("stopped:", c.flush.Stop())
	// Output:
	// flushed 3
	// flushed 0
	// stopped: true
}

func ExampleTimer_InitOn() {
	// An event loop owns its connections' state: their timers' callbacks
	// must run on the loop. exec queues the run; the loop calls it. A
	// timer the loop re-arms before its queued run starts does not fire
	// for the old arming.
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))
	var queue []func() // the loop's task queue (a real loop locks it, or uses a channel)
	exec := func(run func()) { queue = append(queue, run) }

	var idle timingwheel.Timer
	idle.InitOn(h, exec, func() { fmt.Println("idle: closing on the loop") })
	idle.Reset(time.Second)

	mock.Add(time.Second)
	h.Advance() // fires: the run is queued, f has not run
	fmt.Println("queued:", len(queue))

	// Traffic reaches the loop before the queued run: the loop re-arms.
	fmt.Println("re-armed before the run:", idle.Reset(time.Second))
	for _, run := range queue {
		run() // does nothing: that arming was cancelled
	}
	queue = nil

	mock.Add(time.Second)
	h.Advance()
	for _, run := range queue {
		run()
	}
	// Output:
	// queued: 1
	// re-armed before the run: true
	// idle: closing on the loop
}

// An expiry racing a touch of the same key: a session's reader calls Add on
// every request while the hierarchy may be expiring the session. If the
// touch comes first, expired is not called; if it comes after the key left
// the set, the touch puts the key back and expired still runs for the
// expiry. So expired checks, under the session's own lock, whether a touch
// put the key back (Deadline reports it), and the touch does nothing for a
// session already closed: whichever wins, a session is open exactly when
// its key is in the set.
func ExampleTimeouts_expiryRacingATouch() {
	h, err := timingwheel.New() // drives itself
	if err != nil {
		panic(err)
	}
	defer h.Stop()
	type session struct {
		mu     sync.Mutex
		closed bool
	}
	sessions := make([]session, 200)
	var keys *timingwheel.Timeouts[int]
	keys = timingwheel.NewTimeouts(h, func(id int) {
		s := &sessions[id]
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, touched := keys.Deadline(id); touched {
			return // a touch came after the expiry: the session lives on
		}
		s.closed = true
	})
	touch := func(id int) {
		s := &sessions[id]
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return // too late: the session expired
		}
		keys.Add(id, 2*time.Millisecond) // also puts back a key whose expiry waits for mu
	}
	for id := range sessions {
		touch(id)
	}
	var readers sync.WaitGroup
	for id := range sessions {
		readers.Go(func() {
			time.Sleep(time.Duration(id%4) * time.Millisecond) // around the deadline
			touch(id)
		})
	}
	readers.Wait()
	// With no more touches every key expires in the end; Stop then waits
	// for a callback still running.
	for start := time.Now(); keys.Len() > 0 && time.Since(start) < 10*time.Second; {
		time.Sleep(time.Millisecond)
	}
	h.Stop()
	consistent := true
	for id := range sessions {
		_, live := keys.Deadline(id)
		consistent = consistent && sessions[id].closed && !live
	}
	fmt.Println("every session closed once, no key left:", consistent, keys.Len())
	// Output:
	// every session closed once, no key left: true 0
}
