package gnetwheel

import (
	"time"

	"github.com/timingwheel/timingwheel"
)

// The workaround for a fault of gnet v2.9.7 (github.com/panjf2000/gnet/v2,
// eventloop_unix.go, (*eventloop).Execute): Execute returns
// ErrEngineInShutdown only once the engine's shutdown flag is set, and gnet
// sets that flag after every loop has exited and the pollers are closed.
// Between a loop's exit and that moment, Execute hands the task to the
// exited loop's poller, which never runs it, and returns nil: the task is
// dropped without a word. A drain lost so would strand its loop's queue,
// and the hierarchy would count the queued timers as armed forever.
//
// So while a drain is handed over and not yet taken, its loopRun's
// execWatch is armed; if it fires with the drain still not taken, the drain
// is handed over again (a drain that finds nothing queued returns at once,
// so a duplicate on a live but slow loop costs nothing), with a longer wait
// each time, until a drain runs or Execute reports the shutdown, which
// makes the loopRun dead (see loopRun.submit). Nothing else in the module
// knows of this: loop.go only tells the watch when a drain is handed over
// and when it is taken. A gnet whose Execute reports every task it drops
// makes this file, and its test, go.
const (
	recheckFirst = 10 * time.Millisecond // the first re-check of a queued drain
	recheckMax   = time.Second           // the longest wait between re-checks
)

// execWatch re-hands a loopRun's drain that its loop has not taken.
type execWatch struct {
	wait time.Duration     // guarded by the loopRun's mu
	t    timingwheel.Timer // armed while a drain is handed over and not taken
}

// init binds the watch of l, in h.
func (w *execWatch) init(h *timingwheel.Hierarchy, l *loopRun) {
	w.t.Init(h, l.recheck)
}

// handedOver starts the watch: a drain was just queued. l.mu must be held,
// so that it is ordered with taken.
func (w *execWatch) handedOver() {
	w.wait = recheckFirst
	w.t.Reset(w.wait)
}

// taken ends the watch: a drain took the queue, or the loop is dead. l.mu
// must be held.
func (w *execWatch) taken() { w.t.Stop() }

// recheck runs, on the goroutine that advances the hierarchy, when a
// drain has been queued for a while: if it has not taken pending yet, it
// may have been lost, and another is handed over.
func (l *loopRun) recheck() {
	l.mu.Lock()
	if !l.queued || l.dead {
		l.mu.Unlock()
		return
	}
	w := &l.watch
	w.wait = min(2*w.wait, recheckMax)
	w.t.Reset(w.wait)
	l.mu.Unlock()
	l.submit()
}
