package timingwheel

// A bucket is an intrusive, circular, doubly linked list of timers: each
// Timer is its own node, so linking and unlinking are O(1) and allocate
// nothing, and a stopped timer leaves nothing behind.
//
// A list is identified by its sentinel, a Timer whose f is nil and which is
// never handed out. A sentinel of a wheel slot records its position (level
// in when, slot in filed) so that unlinking the last timer of a slot can
// clear the slot's occupancy bit; other lists (the overdue and firing lists)
// record level -1.
//
// None of this is safe for concurrent use; the Hierarchy's mutex guards it.

// The receiver of every method is named t, whether it is a timer or a
// list's sentinel.

// initList makes t the sentinel of an empty list at (level, slot).
func (t *Timer) initList(level, slot int) {
	t.next, t.prev = t, t
	t.when.Store(int64(level))
	t.filed.Store(int64(slot))
}

// empty reports whether the list with sentinel t has no timers.
func (t *Timer) empty() bool { return t.next == t }

// pushBack appends x to the list with sentinel t.
func (t *Timer) pushBack(x *Timer) {
	x.prev, x.next = t.prev, t
	t.prev.next = x
	t.prev = x
}

// insertBefore links x just before t.
func (t *Timer) insertBefore(x *Timer) {
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
