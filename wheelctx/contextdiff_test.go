package wheelctx

// A differential test of request deadlines: random trees of contexts,
// built twice, once with WithTimeout and once with context.WithTimeout
// in the same places, under the same standard contexts (WithCancel,
// WithCancelCause, WithValue), with the same Done calls and cancels. The
// deadlines are an hour away, so only cancellation ends anything: after
// every cancel, each context must be done in one tree exactly when it is
// in the other, with the same Err and Cause. The trees mix the ways this
// package registers with a parent: through context.AfterFunc, as a kid of
// one of its own contexts, under a WithValue wrapper. WithTimeoutCause
// contexts are an hour away or done at once, so their cause is compared
// too, in them and in the contexts under them.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/timingwheel/timingwheel"
)

func TestWithTimeout_DifferentialAgainstPackageContext(t *testing.T) {
	seeds := 30
	if testing.Short() {
		seeds = 5
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			diffContexts(t, seed)
		})
	}
}

// A diffNode is one context in both trees.
type diffNode struct {
	kind         int // 0 WithCancel, 1 WithCancelCause, 2 WithValue, 3 WithTimeout, 4 WithTimeoutCause
	ours, theirs context.Context
	cancel       [2]func(error) // of ours and theirs; nil for WithValue
	parent       *diffNode      // nil for the root
}

func diffContexts(t *testing.T, seed uint64) {
	h, _ := newFake(t, timingwheel.WithShards(1+int(seed%3)))
	r := rand.New(rand.NewPCG(seed, 7))
	type key struct{}
	nodes := []*diffNode{{kind: 0, ours: context.Background(), theirs: context.Background()}}
	var cleanups []func()
	defer func() {
		for _, f := range cleanups {
			f()
		}
	}()
	wrap := func(c context.CancelFunc) func(error) { return func(error) { c() } }
	for step := range 300 {
		switch op := r.IntN(10); {
		case op < 6: // a new context under a random one
			p := nodes[r.IntN(len(nodes))]
			n := &diffNode{kind: r.IntN(5), parent: p}
			switch n.kind {
			case 0:
				o, oc := context.WithCancel(p.ours)
				s, sc := context.WithCancel(p.theirs)
				n.ours, n.theirs, n.cancel = o, s, [2]func(error){wrap(oc), wrap(sc)}
			case 1:
				o, oc := context.WithCancelCause(p.ours)
				s, sc := context.WithCancelCause(p.theirs)
				n.ours, n.theirs, n.cancel = o, s, [2]func(error){oc, sc}
			case 2:
				n.ours, n.theirs = context.WithValue(p.ours, key{}, step), context.WithValue(p.theirs, key{}, step)
			case 3:
				o, oc := WithTimeout(h, p.ours, time.Hour)
				s, sc := context.WithTimeout(p.theirs, time.Hour)
				n.ours, n.theirs, n.cancel = o, s, [2]func(error){wrap(oc), wrap(sc)}
			case 4: // an hour away, or done at once with its cause
				d := time.Duration(r.IntN(2)) * time.Hour
				cause := fmt.Errorf("timeout cause of step %d", step)
				o, oc := WithTimeoutCause(h, p.ours, d, cause)
				s, sc := context.WithTimeoutCause(p.theirs, d, cause)
				n.ours, n.theirs, n.cancel = o, s, [2]func(error){wrap(oc), wrap(sc)}
			}
			if n.cancel[0] != nil {
				cleanups = append(cleanups, func() { n.cancel[0](nil); n.cancel[1](nil) })
			}
			nodes = append(nodes, n)
		case op < 8: // something waits for a random context
			n := nodes[r.IntN(len(nodes))]
			n.ours.Done()
			n.theirs.Done()
		default: // a random context is cancelled
			n := nodes[r.IntN(len(nodes))]
			if n.cancel[0] == nil {
				continue
			}
			cause := fmt.Errorf("cause of step %d", step)
			n.cancel[0](cause)
			n.cancel[1](cause)
			diffCheck(t, seed, step, nodes)
		}
	}
	diffCheck(t, seed, -1, nodes)
}

// diffCheck checks that every context ended in one tree exactly when it
// did in the other, alike. Package context ends its own children before
// cancel returns; a context of this package under one of package
// context's learns of its parent's end through context.AfterFunc, in a
// goroutine (its Err asks the parent, and knows at once), and so do the
// standard contexts under it: those may end a moment later. So each waits
// a while for its Done before its Err and Cause are compared.
func diffCheck(t *testing.T, seed uint64, step int, nodes []*diffNode) {
	t.Helper()
	for i, n := range nodes {
		what := fmt.Sprintf("seed %d step %d: context %d (kind %d)", seed, step, i, n.kind)
		if n.theirs.Err() == nil {
			if n.ours.Err() != nil || isDone(n.ours) {
				t.Fatalf("%s: ended (%v), package context's has not", what, n.ours.Err())
			}
			continue
		}
		select {
		case <-n.ours.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Done not closed 5s after package context's", what)
		}
		if got, want := n.ours.Err(), n.theirs.Err(); got != want {
			t.Fatalf("%s: Err %v, package context's %v", what, got, want)
		}
		if got, want := context.Cause(n.ours), context.Cause(n.theirs); got != want {
			// A plain context cancelled first keeps no cause of its own, so
			// an ancestor cancelled with a cause after it shows through, as
			// WithDeadline's godoc says, and contexts made under it after
			// that inherit it (their parent, checked before them, differs
			// the same way); nothing else may differ.
			p := n.parent
			inherited := context.Cause(p.ours) != context.Cause(p.theirs)
			if got != context.Cause(p.ours) || !(n.kind == 3 || inherited) {
				t.Fatalf("%s: Cause %v, package context's %v", what, got, want)
			}
		}
	}
}
