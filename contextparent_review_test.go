package timingwheel

// Tests from an outside review of the shared registrations and of the
// context that is its own cancel func: what the hierarchy must not keep
// alive, and contexts ending three ways at once.

import (
	"context"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/assert"
)

// waitFreed runs the collector until p's target is freed or 2s pass.
func waitFreed[T any](p weak.Pointer[T]) bool {
	deadline := time.Now().Add(2 * time.Second)
	for p.Value() != nil && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	return p.Value() == nil
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
		parent, pcancel := context.WithCancel(context.WithValue(context.Background(), key{}, big))
		big = nil
		c, cancel := h.WithTimeout(parent, time.Hour)
		c.Done() // waits: registers on its own, notes the parent as seen
		cancel()
		if ended {
			pcancel()
		}
		freed := weak.Make((*byte)(dataWord(parent)))
		parent, pcancel, c, cancel = nil, nil, nil, nil
		goroutinesSettle()
		assert.True(t, waitFreed(freed), "ended=%v: parent kept alive by the hierarchy (watchSet.seen)", ended)
		assert.True(t, waitFreed(bigFreed), "ended=%v: parent's value kept alive by the hierarchy", ended)
		runtime.KeepAlive(h)
	}
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
					if err == context.Canceled && cs != context.Canceled && cs != errReviewCause {
						t.Errorf("round %d: canceled, Cause %v", round, cs)
					}
				}
			}()
		}
		go func() {
			time.Sleep(time.Duration(round%5) * time.Millisecond)
			pcancel(errReviewCause)
		}()
		for range 4 {
			<-done
		}
		pcancel(errReviewCause)
	}
	stopAdv()
	deadline := time.Now().Add(5 * time.Second)
	for (watchedKids(h) != 0 || h.Len() != 0) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	assert.Zero(t, watchedKids(h), "contexts left in watches")
	assert.Zero(t, h.Len(), "timers left")
}

var errReviewCause = context.Canceled // replaced in init
func init()                           { errReviewCause = &reviewErr{} }

type reviewErr struct{}

func (*reviewErr) Error() string { return "review cause" }

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

// The context that is its own cancel func: cancel funcs kept only as func
// values (the context itself unreachable otherwise) survive collections and
// stack copies, and still cancel their context.
func TestWithTimeout_SelfCancelFuncSurvivesGCAndStackGrowth(t *testing.T) {
	h, _ := newFake(t, WithShards(2))
	parent, pcancel := context.WithCancel(context.Background())
	defer pcancel()
	var cancels []context.CancelFunc
	var dones []<-chan struct{}
	for i := range 2000 {
		c, cancel := h.WithTimeout(parent, time.Hour)
		if i%2 == 0 {
			dones = append(dones, c.Done())
		} else {
			dones = append(dones, nil)
		}
		cancels = append(cancels, cancel)
	}
	runtime.GC()
	var grow func(n int, f context.CancelFunc)
	grow = func(n int, f context.CancelFunc) {
		var pad [256]byte
		_ = pad
		if n > 0 {
			grow(n-1, f)
			return
		}
		runtime.GC()
		f()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, f := range cancels {
			grow(i%64, f)
			if i%100 == 0 {
				runtime.GC()
			}
		}
	}()
	<-done
	for i, d := range dones {
		if d != nil && !func() bool {
			select {
			case <-d:
				return true
			default:
				return false
			}
		}() {
			t.Fatalf("context %d not done after its cancel", i)
		}
	}
	assert.Zero(t, h.Len(), "timers left")
	assert.Zero(t, watchedKids(h), "kids left")
}
