// Package lincheck checks that concurrent histories of one timingwheel
// Timer, and of one key of a Timeouts set, are linearizable with respect to
// the sequential contract of docs/guarantees.md.
//
// It is a module of its own so that the library's go.mod keeps only its two
// dependencies: the checker needs porcupine, and nothing here is imported by
// the library. Everything is in _test.go files and uses only the exported
// API (black-box).
//
// # What is checked
//
// Several goroutines call Reset, ResetAt, Stop and Deadline on the same timers
// (Add, Remove and Deadline on the same keys) while the hierarchy is advanced:
// by a goroutine that moves a clock.Mock and calls Advance, by one goroutine
// moving the Mock while another calls Advance, by an Advance loop on the real
// clock, and by the real driver (Start). The start of each callback is an
// event of the history too, and so is the end of each Advance call. Every
// history must have a linearization that the sequential specification
// accepts:
//
//   - Reset(d) reports whether the timer was armed, and arms it at c+d, where
//     c is a clock reading within the call; the readings of the operations
//     that change the timer never decrease along the linearization (the
//     clock is monotonic), so a deadline computed from a reading older than
//     a change ordered before it is rejected. A deadline read is not one of
//     them: it reads no clock, and a Reset takes effect at the swap a moment
//     after its clock reading, so a Deadline in between returns the old
//     deadline ("Constant cost" in docs/guarantees.md). ResetAt(t) arms it
//     at exactly t.
//   - Stop reports whether the timer was armed, and disarms it.
//   - Deadline returns the deadline of the last arming (the zero Time if
//     there was none); for a key, Deadline reports whether the key is in the
//     set.
//   - A callback starts only for an armed timer, only once its deadline is
//     due, due(D) <= T for the Advance's clock T, and disarms it ("Never
//     early, at most one tick late" and "Exactly once" in
//     docs/guarantees.md).
//   - An Advance is two events, its start and its return: an arming that is
//     armed and due at the Advance's clock when it starts has fired, or has
//     been stopped or replaced, by the time it returns (every due timer
//     fires). A replacement armed while it runs, due or not, may wait for
//     the next Advance ("Exactly once" and "Callbacks may call back").
//
// Clock readings are modelled as intervals: each operation records the
// clock before it is called and after it returns, and the reading at its
// linearization point lies in between.
//
// The default run takes well under a minute with -race on two cores; set
// TIMINGWHEEL_LONG=1 for many more, longer histories. TIMINGWHEEL_SEED
// replays the scripts of one seed. A failure names its seed, the HTML
// file where porcupine drew the history, and the end of the longest
// linearization found; LINCHECK_DUMP=1 adds every operation of the timer
// or key that failed.
package lincheck
