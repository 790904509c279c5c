// Package timingwheel keeps very many timers — a timeout for every
// connection, a retransmit timer for every packet in flight — at O(1) cost
// per operation, in a hierarchy of hashed timing wheels (Varghese and Lauck,
// "Hashed and Hierarchical Timing Wheels", SOSP 1987).
//
//	h, err := timingwheel.New() // 1ms tick; levels of ms, s, min, h
//	if err != nil { ... }
//	defer h.Stop() // the driver starts with the first timer armed
//	t := h.AfterFunc(30*time.Second, func() { conn.Close() })
//	...
//	t.Reset(30 * time.Second) // heartbeat: push the deadline back
//
// These shapes cover most uses:
//
//   - [Hierarchy.AfterFunc] and [Hierarchy.AtFunc] return a *[Timer], like
//     [time.AfterFunc];
//   - a [Timer] held by value inside the caller's own struct and bound once
//     with [Timer.Init] allocates nothing, ever, and its callback may re-arm
//     it (a retransmit timer per packet);
//   - [Timeouts] is a set of keys that each expire at their own deadline
//     (an idle timeout per connection, keyed by the connection), and
//     package netidle (github.com/timingwheel/timingwheel/netidle) wraps a
//     net.Conn so that it is closed once idle, with optional idle events
//     (read idle, write idle, a maximum lifetime), on this package's
//     exported API;
//   - [Hierarchy.Every] and [Timer.ResetEvery] run a callback periodically,
//     on a grid that does not drift, like [time.Ticker];
//   - [Timer.InitOn] runs a timer's callback through an executor, such as
//     an event loop's queue, with Stop and Reset still able to cancel it
//     until it starts there;
//   - package wheelctx has request deadlines: drop-ins for
//     [context.WithTimeout] and [context.WithDeadline], kept by the wheel.
//
// # Resolution
//
// The finest level has one slot per tick ([WithTick], 1ms by default); each
// coarser level has slots as wide as a whole revolution of the level below
// ([WithLevels], by default 1000, 60, 60 and 24 slots: milliseconds,
// seconds, minutes, hours). A timer is placed by its own deadline and moves
// (cascades) to a finer level as the coarser wheel turns, so it fires with
// one-tick precision however far away it was armed. A deadline is rounded
// up to the next tick after the origin (the clock reading taken by [New]):
// a timer never fires early and fires at most one tick late.
//
// # Horizon
//
// Deadlines beyond the span of the top level (one day by default) are held
// in further levels that are added on demand, each with as many slots as
// the last configured level, every slot as wide as a whole revolution of
// the level below. Any deadline up to the largest [time.Duration] from now
// works; the arithmetic saturates instead of overflowing. Deadlines are
// kept in nanoseconds since the origin, so one at or beyond the largest
// Duration (about 292 years) from the origin is held at that limit and
// never fires, as the clock's reading saturates there too: firing it would
// be early. For the same reason, so does a deadline whose tick, rounded
// up, starts beyond that limit: with the default tick, one less than a
// millisecond before it; with WithTick(time.Hour), up to an hour before.
//
// # Many cores
//
// The timers are spread over shards ([WithShards]; one per GOMAXPROCS by
// default), each a complete set of wheels with its own lock, and a timer
// stays in the shard of the processor that created it. So goroutines on
// different cores arm, re-arm and stop timers without waiting for each
// other, and moving an armed timer's deadline later usually only stores
// it. No lock is held for long: cascades and scans work in batches of
// 2048 timers and let waiting goroutines in between.
//
// # Driving the wheels
//
// Timers fire only when the hierarchy is advanced: by its driver goroutine,
// which sleeps until the next tick that has work and not at all while
// nothing is armed, or by the caller calling [Hierarchy.Advance] from a
// loop of its own. Which of the two, and when the driver runs, is one rule:
//
//   - A hierarchy on the default clock drives itself: the first timer armed
//     (by AfterFunc, AtFunc, Every, a Reset of any kind, or a layer above)
//     starts the driver, as [Hierarchy.Start] does. Nothing else is needed,
//     and no call of the caller's keeps it from starting.
//   - [WithManualAdvance] makes the caller drive it, and [WithClock] implies
//     that: no driver starts until Start, and the callbacks run in the
//     caller's Advance.
//   - [Hierarchy.Stop] stops the driver; the timers stay armed. A hierarchy
//     that drives itself is then as New left it: the next timer armed
//     starts the driver again, and the timers that were pending fire with
//     it, late by as long as the driver was stopped. A timer pending when
//     Stop returns does not fire until then (or until Start or Advance), so
//     call Stop once no timer matters any more: at shutdown, after the work
//     whose deadlines must hold has ended. On a hierarchy its caller
//     drives, no driver runs after Stop until Start.
//
// A running driver is a goroutine that holds the hierarchy, and so every
// armed timer and what its callback refers to: a hierarchy dropped without
// Stop while its driver runs is never collected. One whose driver does not
// run is collected as any other value once nothing refers to it.
//
// # Testing
//
// Code built on a Hierarchy is tested without waiting in one of two ways.
// With a [clock.Mock] (see [WithClock]) and no driver, "mock.Add(d);
// h.Advance()" fires exactly the timers due, on the test's goroutine,
// before Advance returns. Or, with the default clock inside a
// testing/synctest bubble, "h.Start(); time.Sleep(d); synctest.Wait()"
// runs the driver on the bubble's fake time (call h.Stop before the
// bubble ends: the driver is a goroutine of the bubble's, also when it
// started by itself). With a clock given by WithClock, the same calls in
// the same order on one goroutine and the same clock steps run the same
// callbacks in the same order, also at one tick across shards (see
// [WithShards]). Avoid Start with a Mock in
// tests: the driver then fires on its own goroutine some time after
// mock.Add returns, and nothing tells the test when. The same holds for
// code under test that arms or re-arms timers from goroutines of its own
// (a connection's reader calling Reset): a test that moves a Mock races
// them, as "now" for their re-arms depends on which comes first. Run such
// code in a synctest bubble, where synctest.Wait returns once every
// goroutine of the bubble is blocked.
//
// # Callbacks
//
// Callbacks run one at a time on the goroutine that advances the hierarchy,
// in order of their (rounded) deadlines across all shards, with no lock
// held: they may arm, stop and reset any timer, their own included. They
// should be short, as they delay the timers after them; hand long work to
// another goroutine, or let each shard run its own callbacks with
// [WithParallelCallbacks].
package timingwheel
