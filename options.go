package timingwheel

import (
	"errors"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"
)

// ErrInvalidConfig is reported (wrapped) by [New] for an invalid [Option];
// test for it with errors.Is.
var ErrInvalidConfig = errors.New("timingwheel: invalid config")

// MaxSlots is the largest number of slots [WithLevels] accepts for one
// level. Each slot takes 48 bytes per shard, so a level this large takes
// about 201 MB per shard.
const MaxSlots = 1 << 22

// MaxShards is the largest number of shards [WithShards] accepts.
const MaxShards = 1024

// MaxTotalSlots is the most slots a hierarchy may come to hold: the slots
// of the levels [WithLevels] gives and of the levels far deadlines may add
// above them (each with the last level's count), times the shards. At 48
// bytes a slot that is about 805 MB; a configuration that may ask for more
// is an error of [New] ([ErrInvalidConfig]), not an allocation that would
// exhaust memory.
const MaxTotalSlots = 1 << 24

// An Option configures a [Hierarchy] built by [New]. A nil Option makes New
// return an error.
type Option interface {
	apply(*config) error
}

type config struct {
	clock    clock.Clock
	tick     time.Duration
	slots    []int
	shards   int // 0: one per GOMAXPROCS
	parallel bool
	manual   bool // WithManualAdvance, or WithClock
	// batch, if positive, replaces the size of the batches of long work
	// under a shard's lock (see batch). Only tests set it, to open the
	// windows between batches at small sizes.
	batch int
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithTick sets the resolution of the finest level: deadlines are rounded up
// to a multiple of d after the origin. The default is 1ms. d must be > 0.
func WithTick(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithTick(%v): the tick must be positive", ErrInvalidConfig, d)
		}
		c.tick = d
		return nil
	})
}

// WithLevels sets the number of slots of each level, finest first. The
// default is 1000, 60, 60, 24: with the default 1ms tick, levels of
// milliseconds, seconds, minutes and hours spanning one day. There must be
// at least one level and every level needs at least 2 (and at most
// [MaxSlots]) slots; counts need not be powers of two. Deadlines beyond the
// top level are held in further levels added as needed, each with as many
// slots as the last level given. Each slot costs 48 bytes in every shard; as
// the last count also sizes every overflow level, keep it small.
func WithLevels(slots ...int) Option {
	slots = append([]int(nil), slots...) // the caller may reuse its slice
	return optionFunc(func(c *config) error {
		if len(slots) == 0 {
			return fmt.Errorf("%w: WithLevels(): at least one level is needed", ErrInvalidConfig)
		}
		for i, n := range slots {
			if n < 2 || n > MaxSlots {
				return fmt.Errorf("%w: WithLevels(%v): level %d has %d slots; each level needs 2 to %d",
					ErrInvalidConfig, slots, i, n, MaxSlots)
			}
		}
		c.slots = slots
		return nil
	})
}

// WithShards sets the number of shards: independent sets of wheels, each
// with its own lock, over which timers are spread so that goroutines on
// different cores arm and stop timers without waiting for one another. A
// timer is placed in the shard of the processor that created (or
// initialized) it, and stays there while it is armed; an unarmed timer
// armed again while its shard's lock is contended may move to the shard
// the processor prefers then. The default, 0, is one shard per
// GOMAXPROCS at the time of [New], and one shard with a clock given by
// [WithClock] (a test's: then every timer armed for a tick already come
// fires in the order armed, which holds within a shard, and placement
// cannot vary). n must be between 0 and [MaxShards].
//
// With a clock given by [WithClock] and more than one shard, placement
// follows the calls alone, so that a test is deterministic across shards
// too: new timers are dealt to
// the shards in turn, in the order they are armed or initialized. A timer
// stays in its shard when armed again, as on the default clock, unless its
// shard's lock is held by another goroutine at that instant (then it moves
// to the next shard in turn): calls made on one goroutine never meet that.
//
// More shards cost memory (every shard has every level's slots) and make
// each Advance visit more locks per tick that has work; fewer make arming
// from many cores contend. Callbacks still run one at a time, in deadline
// order across all shards, unless [WithParallelCallbacks] is given.
func WithShards(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 0 || n > MaxShards {
			return fmt.Errorf("%w: WithShards(%d): the count must be 0 (one per GOMAXPROCS) to %d",
				ErrInvalidConfig, n, MaxShards)
		}
		c.shards = n
		return nil
	})
}

// WithManualAdvance makes the caller drive the hierarchy: it calls
// [Hierarchy.Advance] (when [Hierarchy.Next] says) from a loop of its own,
// and no driver goroutine starts until [Hierarchy.Start]. [WithClock]
// implies it. Without either, the hierarchy drives itself (see "Driving
// the wheels" in the package doc).
func WithManualAdvance() Option {
	return optionFunc(func(c *config) error {
		c.manual = true
		return nil
	})
}

// WithParallelCallbacks makes [Hierarchy.Advance] (and so the driver) run
// the callbacks of each shard on a goroutine of its own, so that a mass
// expiry — 10^5 connections closed at once, a socket close in each callback
// — uses every core instead of one.
//
// It relaxes two guarantees: callbacks of different shards run at the same
// time (those of one shard still run one at a time, in order of their
// deadlines), and the order holds only within a shard, not across shards.
// Everything else holds: a timer never fires early and at most once per
// arming, Stop and Reset returning true mean the old callback never runs,
// and Advance returns after every due callback has run. A callback that
// panics still makes Advance panic, on its caller's goroutine, after the
// other shards are done, with the panic's value (its stack is lost; if
// callbacks of several shards panic, only the first value is raised); the
// timers left due fire on the next Advance. Callbacks must then be safe to
// run concurrently with each other.
func WithParallelCallbacks() Option {
	return optionFunc(func(c *config) error {
		c.parallel = true
		return nil
	})
}
