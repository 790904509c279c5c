package timingwheel

import (
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
)

// A callback must not call Advance or Stop of its own hierarchy: Advance
// would wait for the Advance that runs the callback, and Stop for a driver
// that cannot end before the callback returns. Both panic instead of
// hanging, but only for such a call: one from another goroutine, or from
// a callback of another hierarchy, must wait as usual.
//
// To tell them apart without goroutine ids, the goroutine that advances a
// hierarchy carries the hierarchy's number on its own stack: Advance runs
// its work (and each goroutine of WithParallelCallbacks its shard's) under
// a chain of calls, one function per hexadecimal digit of the number
// (mark0 … markF, then markEnd), which runtime.Callers reads back. Only a
// call that would otherwise block looks at the stack (Advance that finds
// another Advance running, Stop while the driver runs), and the numbers
// are small, so the chain is one or two calls deep: the common paths pay
// a few calls.

// hierarchies hands out the numbers, from 1.
var hierarchies atomic.Uint64

// number returns h's number, handing it one the first time.
func (h *Hierarchy) number() uint64 {
	n := h.driver.num.Load()
	if n == 0 {
		h.driver.num.CompareAndSwap(0, hierarchies.Add(1))
		n = h.driver.num.Load()
	}
	return n
}

// marked calls body on this goroutine with h's number on the stack (see
// inOwnCallback).
func (h *Hierarchy) marked(body func()) { markDigits(h.number(), body) }

// markDigits calls the marker of n's lowest hexadecimal digit, which calls
// markDigits for the others; once none is left, markEnd calls body. On
// the stack, the digits so read from markEnd outwards, highest first.
func markDigits(n uint64, body func()) {
	if n == 0 {
		markEnd(body)
		return
	}
	rest := n >> 4
	switch n & 15 {
	case 0:
		mark0(rest, body)
	case 1:
		mark1(rest, body)
	case 2:
		mark2(rest, body)
	case 3:
		mark3(rest, body)
	case 4:
		mark4(rest, body)
	case 5:
		mark5(rest, body)
	case 6:
		mark6(rest, body)
	case 7:
		mark7(rest, body)
	case 8:
		mark8(rest, body)
	case 9:
		mark9(rest, body)
	case 10:
		markA(rest, body)
	case 11:
		markB(rest, body)
	case 12:
		markC(rest, body)
	case 13:
		markD(rest, body)
	case 14:
		markE(rest, body)
	default:
		markF(rest, body)
	}
}

// The markers: each is a frame of its own (go:noinline), whose name says
// its digit. runtime.CallersFrames would name them even if inlined.

//go:noinline
func markEnd(body func()) { body() }

//go:noinline
func mark0(rest uint64, body func()) { markDigits(rest, body) }

//go:noinline
func mark1(rest uint64, body func()) { markDigits(rest, body) }

//go:noinline
func mark2(rest uint64, body func()) { markDigits(rest, body) }

//go:noinline
func mark3(rest uint64, body func()) { markDigits(rest, body) }

//go:noinline
func mark4(rest uint64, body func()) { markDigits(rest, body) }

//go:noinline
func mark5(rest uint64, body func()) { markDigits(rest, body) }

//go:noinline
func mark6(rest uint64, body func()) { markDigits(rest, body) }

//go:noinline
func mark7(rest uint64, body func()) { markDigits(rest, body) }

//go:noinline
func mark8(rest uint64, body func()) { markDigits(rest, body) }

//go:noinline
func mark9(rest uint64, body func()) { markDigits(rest, body) }

//go:noinline
func markA(rest uint64, body func()) { markDigits(rest, body) }

//go:noinline
func markB(rest uint64, body func()) { markDigits(rest, body) }

//go:noinline
func markC(rest uint64, body func()) { markDigits(rest, body) }

//go:noinline
func markD(rest uint64, body func()) { markDigits(rest, body) }

//go:noinline
func markE(rest uint64, body func()) { markDigits(rest, body) }

//go:noinline
func markF(rest uint64, body func()) { markDigits(rest, body) }

// markNames maps each marker's function name to its digit, markEnd's to
// -1 and markDigits's to -2; made on first use.
var markNames = sync.OnceValue(func() map[string]int {
	names := map[string]int{}
	for d, f := range []func(uint64, func()){
		mark0, mark1, mark2, mark3, mark4, mark5, mark6, mark7,
		mark8, mark9, markA, markB, markC, markD, markE, markF,
	} {
		names[funcName(f)] = d
	}
	names[funcName(markEnd)] = -1
	names[funcName(markDigits)] = -2
	return names
})

func funcName(f any) string { return runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name() }

// inOwnCallback reports whether the calling goroutine is running h's
// Advance (a callback of h, or code a callback called): whether h's
// number is on its stack. It walks the whole stack: call it only where
// the alternative is to block.
func (h *Hierarchy) inOwnCallback() bool {
	n := h.driver.num.Load()
	if n == 0 {
		return false // never advanced
	}
	pcs := make([]uintptr, 64)
	for {
		k := runtime.Callers(1, pcs)
		if k < len(pcs) {
			pcs = pcs[:k]
			break
		}
		pcs = make([]uintptr, 2*len(pcs))
	}
	names := markNames()
	frames := runtime.CallersFrames(pcs)
	var (
		inChain bool
		got     uint64
	)
	for {
		fr, more := frames.Next()
		d, isMark := names[fr.Function]
		switch {
		case isMark && d == -1: // markEnd: a chain starts, highest digit first
			inChain, got = true, 0
		case inChain && isMark && d >= 0:
			got = got<<4 | uint64(d)
		case inChain && isMark: // markDigits, between the digits
		case inChain:
			if got == n {
				return true
			}
			inChain = false
		}
		if !more {
			return inChain && got == n
		}
	}
}
