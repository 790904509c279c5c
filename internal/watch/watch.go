// Package watch holds the watchdogs of the module's tests: each runs what
// may hang and fails the test, naming what hung, unless it returns in
// time. The root package's and netidle's tests share them; it imports
// nothing of the library, so the root package's own tests can use it.
package watch

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// GoWatched runs f on a goroutine of its own. done is closed when f ends;
// settle, called after that, raises a panic of f again here, and stops the
// test here too if f ended its goroutine by t.FailNow (a require inside it)
// or runtime.Goexit: f has reported why.
func GoWatched(t testing.TB, f func()) (done <-chan struct{}, settle func()) {
	ch := make(chan struct{})
	var p any
	returned := false
	go func() {
		defer close(ch)
		defer func() { p = recover() }()
		f()
		returned = true
	}()
	return ch, func() {
		if p != nil {
			panic(p)
		}
		if !returned {
			t.FailNow()
		}
	}
}

// MustReturn runs f on a goroutine of its own and fails the test, naming
// what hung, unless f returns within d (the hung goroutine is left behind;
// it holds only the test's own hierarchy). A panic of f is raised again
// here. If f ends its goroutine by t.FailNow (a require inside it), the test
// stops here too.
func MustReturn(t testing.TB, d time.Duration, what string, f func()) {
	t.Helper()
	done, settle := GoWatched(t, f)
	select {
	case <-done:
		settle()
	case <-time.After(d):
		t.Fatalf("hung: %s did not return within %v", what, d)
	}
}

// ReturnsWithin runs f on a goroutine of its own and waits up to d for it
// to return: it reports whether f returned within d, and done is closed
// whenever f returns. Unlike MustReturn it fails nothing: the caller says
// what a return within d, or none, means (a call that must wait, one that
// hung). A panic of f is not recovered.
func ReturnsWithin(d time.Duration, f func()) (returned bool, done <-chan struct{}) {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		f()
	}()
	select {
	case <-ch:
		return true, ch
	case <-time.After(d):
		return false, ch
	}
}

// WaitWithin is wg.Wait under MustReturn.
func WaitWithin(t testing.TB, d time.Duration, wg *sync.WaitGroup, what string) {
	t.Helper()
	MustReturn(t, d, what, wg.Wait)
}

// RecvWithin waits for a value on ch, failing the test, naming what hung,
// unless one comes within d.
func RecvWithin[T any](t testing.TB, d time.Duration, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("hung: %s did not happen within %v", what, d)
		panic("unreachable")
	}
}

// InBubble runs f in a synctest bubble under MustReturn: a driver that
// spins keeps the bubble from ever blocking, and synctest.Wait from
// returning.
func InBubble(t *testing.T, what string, f func(t *testing.T)) {
	t.Helper()
	MustReturn(t, 30*time.Second, what+" (in a synctest bubble)", func() { synctest.Test(t, f) })
}
