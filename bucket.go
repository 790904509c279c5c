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

// initList makes s the sentinel of an empty list at (level, slot).
func (s *Timer) initList(level, slot int) {
	s.next, s.prev = s, s
	s.when.Store(int64(level))
	s.filed.Store(int64(slot))
}

// empty reports whether the list with sentinel s has no timers.
func (s *Timer) empty() bool { return s.next == s }

// pushBack appends t to the list with sentinel s.
func (s *Timer) pushBack(t *Timer) {
	t.prev, t.next = s.prev, s
	s.prev.next = t
	s.prev = t
}

// insertBefore links t just before x.
func (x *Timer) insertBefore(t *Timer) {
	t.prev, t.next = x.prev, x
	x.prev.next = t
	x.prev = t
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

// takeAll empties the list with sentinel s and returns its timers as a
// chain linked by next and ending in nil.
func (s *Timer) takeAll() *Timer {
	if s.empty() {
		return nil
	}
	first := s.next
	s.prev.next = nil
	s.next, s.prev = s, s
	return first
}

// moveAllTo appends every timer of the list s to the list dst, in order.
func (s *Timer) moveAllTo(dst *Timer) {
	if s.empty() {
		return
	}
	first, last := s.next, s.prev
	first.prev, last.next = dst.prev, dst
	dst.prev.next = first
	dst.prev = last
	s.next, s.prev = s, s
}
