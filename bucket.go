package timingwheel

// A bucket is an intrusive, circular, doubly linked list of timers: each
// Timer is its own node, so linking and unlinking are O(1) and allocate
// nothing, and a stopped timer leaves nothing behind.
//
// A list is identified by its sentinel, a Timer that is never handed out
// and of which only next and prev are used, as container/list's root
// Element.
//
// None of this is safe for concurrent use: the lock of the shard that owns
// a list guards it.

// The receiver of every method is named t, whether it is a timer or a
// list's sentinel.

// initList makes t the sentinel of an empty list.
func (t *Timer) initList() { t.next, t.prev = t, t }

// empty reports whether the list with sentinel t has no timers.
func (t *Timer) empty() bool { return t.next == t }

// pushBack appends x to the list with sentinel t.
func (t *Timer) pushBack(x *Timer) {
	x.prev, x.next = t.prev, t
	t.prev.next = x
	t.prev = x
}

// unlink takes t off its list. If that left the list empty it returns the
// list's sentinel, otherwise nil.
func (t *Timer) unlink() *Timer {
	p, n := t.prev, t.next
	p.next, n.prev = n, p
	t.next, t.prev = nil, nil // the node holds no references into the wheel
	if p == n {
		return p // only the sentinel is left
	}
	return nil
}

// moveAllTo appends every timer of the list t to the list dst, in order.
func (t *Timer) moveAllTo(dst *Timer) {
	if t.empty() {
		return
	}
	first, last := t.next, t.prev
	first.prev, last.next = dst.prev, dst
	dst.prev.next = first
	dst.prev = last
	t.next, t.prev = t, t
}
