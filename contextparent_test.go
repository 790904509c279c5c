package timingwheel

// Tests of the registration that contexts under one parent of package
// context share (parentWatch): a parent's end reaches every context of it,
// whichever way each registered; the table keeps no parent alive (nor a
// dropped hierarchy); a parent that lives long keeps no more registrations
// than are in use; and contexts that end three ways at once (deadline,
// cancel, parent) end once, leaving nothing behind.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// watchesMade holds every parentWatch made while the tests run, weakly.
var watchesMade struct {
	sync.Mutex
	all []weak.Pointer[parentWatch]
}

func init() {
	testHookWatch = func(w *parentWatch) {
		watchesMade.Lock()
		watchesMade.all = append(watchesMade.all, weak.Make(w))
		watchesMade.Unlock()
	}
}

// liveWatches counts the watches made that are neither ended nor freed.
func liveWatches() int {
	watchesMade.Lock()
	defer watchesMade.Unlock()
	n := 0
	for _, p := range watchesMade.all {
		if w := p.Value(); w != nil {
			w.s.lock()
			if !w.ended {
				n++
			}
			w.s.mu.Unlock()
		}
	}
	return n
}

// settleWatches waits until liveWatches is at most want, running the
// garbage collector, and returns what it is then: a parent's end reaches
// its watch on a goroutine of context.AfterFunc's.
func settleWatches(want int) int {
	deadline := time.Now().Add(5 * time.Second)
	for liveWatches() > want && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	return liveWatches()
}

// watchedKids counts the contexts linked in the watches of h's tables that
// have not ended.
func watchedKids(h *Hierarchy) int {
	n := 0
	for _, s := range h.shards {
		s.lock()
		if s.watches != nil {
			for _, w := range s.watches[0].m {
				if !w.ended {
					n += len(w.kids)
				}
			}
		}
		s.mu.Unlock()
	}
	return n
}

// makeWatch makes, waits for and cancels three contexts under parent: the
// first registers on its own, the second makes a watch, the third finds it.
func makeWatch(h *Hierarchy, parent context.Context) {
	for range 3 {
		c, cancel := h.WithTimeout(parent, time.Hour)
		c.Done()
		cancel()
	}
}

// The first context under a parent registers on its own, the later ones
// share a watch; when the parent is cancelled, each is done with its
// parent's Err and Cause, and so are the standard children of each.
func TestParentWatch_ParentEndReachesEveryContext(t *testing.T) {
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			h, _ := newFake(t, WithShards(shards))
			cause := errors.New("request over")
			base, cancel := context.WithCancelCause(context.Background())
			type key struct{}
			parents := []context.Context{base, context.WithValue(base, key{}, 1)} // one cancelCtx under both
			var ctxs, derived []context.Context
			for i := range 50 {
				c, ccancel := h.WithTimeout(parents[i%2], time.Hour)
				defer ccancel()
				c.Done()
				ctxs = append(ctxs, c)
				d, dcancel := context.WithCancel(c)
				defer dcancel()
				derived = append(derived, d)
			}
			assert.Positive(t, watchedKids(h), "no context shares a watch")
			for i, c := range ctxs {
				assertLive(t, c, fmt.Sprintf("context %d before the parent's end", i))
			}
			cancel(cause)
			for i, c := range append(ctxs, derived...) {
				waitDone(t, c, fmt.Sprintf("context %d after the parent's end", i))
				assertEnded(t, c, context.Canceled, cause, fmt.Sprintf("context %d", i))
			}
			assert.Zero(t, h.Len(), "timers after the parent's end")
			assert.Zero(t, watchedKids(h), "contexts left in watches")
		})
	}
}

// A context that shares a watch and is cancelled leaves it at once: the
// watch keeps no reference to it, and the parent's later end is not
// reported to it.
func TestParentWatch_CancelLeavesTheWatch(t *testing.T) {
	h, _ := newFake(t, WithShards(1))
	parent, pcancel := context.WithCancel(context.Background())
	defer pcancel()
	first, cancel := h.WithTimeout(parent, time.Hour) // registers on its own
	first.Done()
	cancel()
	ctx, cancel := h.WithTimeout(parent, time.Hour)
	ctx.Done()
	require.Equal(t, 1, watchedKids(h), "the second context is not in a watch")
	freed := weak.Make(ctx.(*deadlineCtx))
	cancel()
	assert.Zero(t, watchedKids(h), "cancelled context still in the watch")
	assertEnded(t, ctx, context.Canceled, context.Canceled, "cancelled context")
	ctx = nil
	assert.True(t, waitFreed(freed), "cancelled context not freed: the watch keeps it")
}

// The table holds watches weakly: a parent that is dropped without being
// cancelled, after contexts shared its watch, is freed.
func TestParentWatch_KeepsNoParentAlive(t *testing.T) {
	h, _ := newFake(t, WithShards(1))
	require.Zero(t, settleWatches(0), "watches of earlier tests left")
	const before = 0
	parent, pcancel, freed := watchedParent(context.Background())
	_ = pcancel // dropped, never called: the parent is garbage once unreachable
	makeWatch(h, parent)
	require.Equal(t, before+1, liveWatches(), "no watch made for the parent")
	parent, pcancel = nil, nil
	assert.True(t, waitFreed(freed), "dropped parent not freed: the hierarchy keeps it")
	runtime.KeepAlive(h)
}

// A parent that lives long, with contexts made under it between those of
// many other parents (which take its place in the table), keeps only the
// watches that are in use: once every context is cancelled and the other
// parents ended, at most one per shard is left.
func TestParentWatch_EvictedWatchesUnregister(t *testing.T) {
	const shards = 1
	h, _ := newFake(t, WithShards(shards))
	require.Zero(t, settleWatches(0), "watches of earlier tests left")
	long, lcancel := context.WithCancel(context.Background())
	defer lcancel()
	var held []context.CancelFunc // some of long's contexts wait across evictions
	for round := range 20 {
		for i := range 3 {
			c, cancel := h.WithTimeout(long, time.Hour)
			c.Done()
			if i == 2 && round%2 == 0 { // the first registers on its own, the second makes the watch
				held = append(held, cancel)
				continue
			}
			cancel()
		}
		// Enough other parents, each with a watch, to fill every set of
		// the table and so take the place of long's.
		// They live to the round's end, so that theirs are not ended.
		var others []context.CancelFunc
		for range 2 * 128 * 2 { // twice the 128 sets of 2 watches the table once had

			other, ocancel := context.WithCancel(context.Background())
			others = append(others, ocancel)
			for range 2 {
				c, cancel := h.WithTimeout(other, time.Hour)
				c.Done()
				cancel()
			}
		}
		for _, ocancel := range others {
			ocancel()
		}
	}
	for _, cancel := range held {
		cancel()
	}
	assert.LessOrEqual(t, settleWatches(shards), shards, "watches left registered")
	// And the ones left still work.
	c, cancel := h.WithTimeout(long, time.Hour)
	defer cancel()
	c.Done()
	lcancel()
	waitDone(t, c, "context under the long-lived parent after its end")
	assert.Zero(t, settleWatches(0), "watches left after every parent ended")
}

// Contexts made, waited for and cancelled from many goroutines under a
// few shared parents, while the parents end: each context ends once, by
// its own cancel or its parent's, and nothing is left registered.
func TestParentWatch_Concurrent(t *testing.T) {
	h, _ := newFake(t, WithShards(2))
	require.Zero(t, settleWatches(0), "watches of earlier tests left")
	for round := range 20 {
		var parents []context.Context
		var pcancels []context.CancelFunc
		for range 3 {
			p, c := context.WithCancel(context.Background())
			parents, pcancels = append(parents, p), append(pcancels, c)
		}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 200 {
					p := parents[(g+i)%len(parents)]
					c, cancel := h.WithTimeout(p, time.Hour)
					done := c.Done()
					if i%3 == 0 {
						cancel()
						<-done
						if err := c.Err(); err != context.Canceled {
							t.Errorf("round %d: cancelled context: Err %v", round, err)
						}
						continue
					}
					defer cancel()
					if p.Err() != nil {
						select {
						case <-done:
						case <-time.After(5 * time.Second):
							t.Errorf("round %d: context under an ended parent not done", round)
						}
					}
				}
			})
		}
		go func() {
			for _, c := range pcancels {
				runtime.Gosched()
				c()
			}
		}()
		wg.Wait()
		for _, c := range pcancels {
			c()
		}
	}
	assert.Zero(t, watchedKids(h), "contexts left in watches")
	assert.Zero(t, h.Len(), "timers left")
	assert.Zero(t, settleWatches(0), "watches left after every parent ended")
}

// A parent that ends after the context is made and before its Done is
// called: Done finds it ended and registers nothing.
func TestParentWatch_ParentDoneBeforeDone(t *testing.T) {
	h, _ := newFake(t, WithShards(1))
	parent, pcancel := context.WithCancel(context.Background())
	c, cancel := h.WithTimeout(parent, time.Hour)
	c.Done()
	cancel() // the parent is seen: the next context would make the watch
	c, cancel = h.WithTimeout(parent, time.Hour)
	defer cancel()
	pcancel()
	waitDone(t, c, "context whose parent ended before its Done")
	assert.Equal(t, context.Canceled, c.Err())
	assert.Zero(t, watchedKids(h), "context linked in a watch of an ended parent")
	assert.Zero(t, h.Len(), "timer of a context whose parent ended")
}

// A watch whose parent ends leaves the table at once, strong hold and all:
// the first garbage collection after that frees the parent.
func TestParentWatch_EndedParentFreedByNextCollection(t *testing.T) {
	h, _ := newFake(t, WithShards(1))
	require.Zero(t, settleWatches(0), "watches of earlier tests left")
	const before = 0
	parent, pcancel, freed := watchedParent(context.Background())
	makeWatch(h, parent)
	require.Equal(t, before+1, liveWatches(), "no watch made for the parent")
	pcancel()
	// Wait for the end with no collection, which would clear the table's
	// strong holds anyway.
	for deadline := time.Now().Add(5 * time.Second); liveWatches() > before && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, before, liveWatches(), "the watch did not end with its parent")
	goroutinesSettle() // the goroutine that ran the watch's end has returned
	parent, pcancel = nil, nil
	runtime.GC()
	assert.Nil(t, freed.Value(), "ended parent kept past a collection: the table holds it")
	runtime.KeepAlive(h)
}

// Two parents whose keys fall in one set of the table, used in turn, each
// get a watch: neither's first context makes the other's note of being
// seen forgotten.
func TestParentWatch_AlternatingParentsInOneSetShare(t *testing.T) {
	h, _ := newFake(t, WithShards(1))
	require.Zero(t, settleWatches(0), "watches of earlier tests left")
	setOf := func(p context.Context) uint64 { return seenSlot(p.Done()) }
	bySet := map[uint64]context.Context{}
	var a, b context.Context
	for a == nil {
		p, cancel := context.WithCancel(context.Background())
		defer cancel()
		if o, ok := bySet[setOf(p)]; ok {
			a, b = o, p
		}
		bySet[setOf(p)] = p
	}
	for range 3 {
		for _, p := range []context.Context{a, b} {
			c, cancel := h.WithTimeout(p, time.Hour)
			c.Done()
			cancel()
		}
	}
	assert.Equal(t, 2, liveWatches(), "watches for two parents of one set used in turn")
}

// A watch's array of contexts shrinks as they leave: a parent that once
// had many waiting keeps no room for them.
func TestParentWatch_ArrayShrinksAsContextsLeave(t *testing.T) {
	h, _ := newFake(t, WithShards(1))
	parent, pcancel := context.WithCancel(context.Background())
	defer pcancel()
	var cancels []context.CancelFunc
	for range 4096 {
		c, cancel := h.WithTimeout(parent, time.Hour)
		c.Done()
		cancels = append(cancels, cancel)
	}
	require.Equal(t, 4095, watchedKids(h), "contexts in the watch (the first registered on its own)")
	var w *parentWatch
	s := h.shards[0]
	s.lock()
	for _, o := range s.watches[0].m {
		if !o.ended {
			w = o
		}
	}
	s.mu.Unlock()
	require.NotNil(t, w, "no watch")
	for _, cancel := range cancels[:len(cancels)-8] {
		cancel()
	}
	s.lock()
	n, c := len(w.kids), cap(w.kids)
	s.mu.Unlock()
	assert.Equal(t, 8, n, "contexts left in the watch")
	assert.LessOrEqual(t, c, 128, "room kept in the watch's array for contexts that left")
	for _, cancel := range cancels[len(cancels)-8:] {
		cancel()
	}
}

// Cancelling the last context armed, one that shares a watch (its timer
// stopped in the same hold of the lock as it leaves the watch), lets the
// driver sleep: it does not wake for a deadline no longer armed. One
// shard: watches are kept per shard, and with more the context could land
// on a shard other than the watch's.
func TestParentWatch_CancelOfLastContextMeansAsleep(t *testing.T) {
	inBubble(t, "a driver whose last context, in a watch, is cancelled", func(t *testing.T) {
		h, clk := startCounting(t, WithShards(1))
		parent, pcancel := context.WithCancel(context.Background())
		defer pcancel()
		makeWatch(h, parent)
		c, cancel := h.WithTimeout(parent, time.Hour)
		c.Done()
		require.Equal(t, 1, watchedKids(h), "the context does not share the watch")
		synctest.Wait()
		cancel()
		require.Zero(t, h.Len())
		assertAsleep(t, clk, 2*time.Hour)
	})
}

// A parent under which a single context waited (the common request with one
// deadline) is noted in the table's seen hint: the hint must not keep the
// parent, or what its values reach, alive, whether or not the parent ended.
func TestParentWatch_LoneContextKeepsNoParentAlive(t *testing.T) {
	for _, ended := range []bool{false, true} {
		h, _ := newFake(t, WithShards(1))
		type key struct{}
		big := new([1 << 16]byte)
		bigFreed := weak.Make(big)
		parent, pcancel, freed := watchedParent(context.WithValue(context.Background(), key{}, big))
		big = nil
		c, cancel := h.WithTimeout(parent, time.Hour)
		c.Done() // waits: registers on its own, notes the parent as seen
		cancel()
		if ended {
			pcancel()
		}
		parent, pcancel, c, cancel = nil, nil, nil, nil
		goroutinesSettle()
		assert.True(t, waitFreed(freed), "ended=%v: parent kept alive by the hierarchy (watchSet.seen)", ended)
		assert.True(t, waitFreed(bigFreed), "ended=%v: parent's value kept alive by the hierarchy", ended)
		runtime.KeepAlive(h)
	}
}

// A long-lived parent (a server's base context) under steady traffic: each
// request wraps it with values of its own and takes a deadline that it
// waits on. The shared registration is made through one request's wrapper;
// the sweeps register it again through later ones, so that no request's
// values are held a few collections after its context was cancelled.
func TestParentWatch_KeepsNoRequestsWrapperOfALongLivedParent(t *testing.T) {
	h, _ := newFake(t, WithShards(1))
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	type reqKey struct{}
	request := func() weak.Pointer[[128]byte] {
		v := new([128]byte)
		ctx, cancel := h.WithTimeout(context.WithValue(base, reqKey{}, v), time.Hour)
		ctx.Done() // waits: the second request under base makes the shard's watch
		cancel()
		return weak.Make(v)
	}
	var first []weak.Pointer[[128]byte]
	for range 3 {
		first = append(first, request())
	}
	for range 10 {
		for range 100 { // traffic between collections keeps the watch in use
			request()
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond) // the sweep, a cleanup, runs
	}
	for i, w := range first {
		assert.Nil(t, w.Value(), "request %d's values, cancelled 10 collections ago, are still held", i)
	}
	s := h.shards[0]
	s.lock()
	n := len(s.watches[0].m)
	s.mu.Unlock()
	assert.Equal(t, 1, n, "watches in the shard's table: the watch of base, in use, left it")
}

// Kids of shared watches end three ways at once: their deadline (the
// hierarchy advancing), their cancel, their parent's end. Each must end
// once with a consistent Err/Cause, and nothing may be left in watches or
// timers.
func TestParentWatch_ExpiryCancelAndParentEndTogether(t *testing.T) {
	h, clk := newFake(t, WithShards(2))
	stopAdv := advanceContinuously(t, h, clk)
	for round := range 30 {
		type key struct{}
		base, pcancel := context.WithCancelCause(context.Background())
		parents := []context.Context{base, context.WithValue(base, key{}, 1)}
		cause := context.Cause(base)
		_ = cause
		done := make(chan struct{})
		for g := range 4 {
			go func() {
				defer func() { done <- struct{}{} }()
				for i := range 150 {
					p := parents[(g+i)%2]
					d := time.Duration(1+(i*7+g)%20) * time.Millisecond
					c, cancel := h.WithTimeout(p, d)
					ch := c.Done()
					switch i % 3 {
					case 0:
						cancel()
					case 1:
						<-ch
						cancel()
					default:
						defer cancel()
						continue
					}
					<-ch
					err, cs := c.Err(), context.Cause(c)
					switch err {
					case context.Canceled, context.DeadlineExceeded:
					default:
						t.Errorf("round %d: Err %v", round, err)
					}
					if err == context.DeadlineExceeded && cs != context.DeadlineExceeded {
						t.Errorf("round %d: expired, Cause %v", round, cs)
					}
					if err == context.Canceled && cs != context.Canceled && cs != errParentCause {
						t.Errorf("round %d: canceled, Cause %v", round, cs)
					}
				}
			}()
		}
		go func() {
			time.Sleep(time.Duration(round%5) * time.Millisecond)
			pcancel(errParentCause)
		}()
		for range 4 {
			<-done
		}
		pcancel(errParentCause)
	}
	stopAdv()
	deadline := time.Now().Add(5 * time.Second)
	for (watchedKids(h) != 0 || h.Len() != 0) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	assert.Zero(t, watchedKids(h), "contexts left in watches")
	assert.Zero(t, h.Len(), "timers left")
}

// errParentCause is the cause the parent of
// TestParentWatch_ExpiryCancelAndParentEndTogether ends with: an error of
// its own, so a Cause that is neither it nor the context's own is told.
var errParentCause error = &parentCauseErr{}

type parentCauseErr struct{}

func (*parentCauseErr) Error() string { return "the parent's cause" }

// Hierarchies made and dropped under a long-lived parent (a server's base
// context) after making shared watches under it are freed, and their
// registrations leave the parent: the registration holds its watch (and so
// the shard and the hierarchy) only weakly.
func TestParentWatch_LongParentKeepsNoDroppedHierarchy(t *testing.T) {
	require := assert.New(t)
	long, lcancel := context.WithCancel(context.Background())
	defer lcancel()
	before := liveWatches()
	var freed []weak.Pointer[Hierarchy]
	// Control: a hierarchy that made no shared watch is freed when dropped.
	{
		h, _ := newFake(t, WithShards(1))
		c, cancel := h.WithTimeout(long, time.Hour)
		c.Done()
		cancel()
		require.True(waitFreed(weak.Make(h)), "control: a dropped hierarchy is not freed at all")
	}
	for range 4 {
		h, _ := newFake(t, WithShards(1))
		for range 3 {
			c, cancel := h.WithTimeout(long, time.Hour)
			c.Done()
			cancel()
		}
		freed = append(freed, weak.Make(h))
	}
	kept := 0
	for i, p := range freed {
		if i > 0 && kept > 0 {
			runtime.GC()
			if p.Value() != nil {
				kept++
			}
			continue
		}
		if !waitFreed(p) {
			kept++
		}
	}
	require.Zero(kept, "dropped hierarchies kept alive by a live parent's registrations")
	require.LessOrEqual(liveWatches()-before, 0, "registrations of dropped hierarchies left with the parent")
}

// plainCtx is a parent of another package with no AfterFunc method:
// context.AfterFunc waits for it on a goroutine per registration.
type plainCtx struct {
	context.Context // Background: Deadline and Value
	done            chan struct{}
	err             atomic.Pointer[error]
}

func (c *plainCtx) Done() <-chan struct{} { return c.done }

func (c *plainCtx) Err() error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}

// TestParentWatch_ParentWithoutAfterFuncShares: which package made a
// parent is not something package context tells; any parent with no
// AfterFunc method of its own is shared, so its contexts cost one
// goroutine of context.AfterFunc's per shard, not one each, and its end
// reaches every one of them.
func TestParentWatch_ParentWithoutAfterFuncShares(t *testing.T) {
	h, _ := newFake(t, WithShards(1))
	parent := &plainCtx{Context: context.Background(), done: make(chan struct{})}
	before := goroutinesSettle()
	var ctxs []context.Context
	for range 100 {
		c, cancel := h.WithTimeout(parent, time.Hour)
		defer cancel()
		c.Done()
		ctxs = append(ctxs, c)
	}
	assert.Equal(t, 99, watchedKids(h), "every context but the first in the shard's watch")
	assert.LessOrEqual(t, goroutinesSettle()-before, 2, "goroutines for 100 contexts: the first's and the watch's")
	err := context.Canceled
	parent.err.Store(&err)
	close(parent.done)
	for i, c := range ctxs {
		waitDone(t, c, fmt.Sprintf("context %d after the parent's end", i))
		assertEnded(t, c, context.Canceled, context.Canceled, fmt.Sprintf("context %d", i))
	}
	assert.Zero(t, h.Len(), "timers after the parent's end")
	assert.Zero(t, watchedKids(h), "contexts left in watches")
}
