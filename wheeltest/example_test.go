package wheeltest_test

import (
	"fmt"
	"time"

	"github.com/timingwheel/timingwheel"
	"github.com/timingwheel/timingwheel/wheeltest"
)

// A hierarchy on a Clock moves only when the test moves the clock, and
// fires only when the test advances it.
func ExampleNewClock() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := wheeltest.NewClock(start)
	h, _ := timingwheel.New(timingwheel.WithClock(c)) // no driver: the test drives

	h.AfterFunc(25*time.Millisecond, func() { fmt.Println("fired at", c.Now().Sub(start)) })

	c.Add(30 * time.Millisecond) // at once: no sleep, unlike a clock.Mock's Add
	fmt.Println("ran:", h.Advance())
	// Output:
	// fired at 30ms
	// ran: 1
}

// Set moves the clock to an instant, also back: the hierarchy fires
// nothing early, and resumes once the clock passes the deadline again.
func ExampleClock_Set() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := wheeltest.NewClock(start)
	h, _ := timingwheel.New(timingwheel.WithClock(c))
	h.AfterFunc(time.Minute, func() { fmt.Println("fired at", c.Now().Sub(start)) })

	c.Set(start.Add(-time.Hour)) // the clock steps back an hour
	fmt.Println("ran:", h.Advance())
	c.Set(start.Add(time.Minute))
	fmt.Println("ran:", h.Advance())
	// Output:
	// ran: 0
	// fired at 1m0s
	// ran: 1
}

// AdvanceTo walks the hierarchy to an instant as its driver would: each
// callback runs at its own tick, a retransmit timer re-armed by its own
// callback fires again within the walk, and a periodic timer runs once
// per period.
func ExampleAdvanceTo() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := wheeltest.NewClock(start)
	h, _ := timingwheel.New(timingwheel.WithClock(c))

	var rto timingwheel.Timer
	backoff := 200 * time.Millisecond
	rto.Init(h, func() {
		fmt.Println(c.Now().Sub(start), "retransmit")
		backoff *= 2
		rto.Reset(backoff) // armed by the callback, during the walk
	})
	rto.Reset(backoff)
	h.Every(900*time.Millisecond, func() { fmt.Println(c.Now().Sub(start), "tick") })

	ran := wheeltest.AdvanceTo(h, c, start.Add(3*time.Second))
	fmt.Println("ran:", ran, "clock:", c.Now().Sub(start))
	// Output:
	// 200ms retransmit
	// 600ms retransmit
	// 900ms tick
	// 1.4s retransmit
	// 1.8s tick
	// 2.7s tick
	// 3s retransmit
	// ran: 7 clock: 3s
}
