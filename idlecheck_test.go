package timingwheel

import "fmt"

// check verifies an idle group's invariants (outside callbacks): its head
// maps hold the heads of the buckets in its map and no others; every
// bucket in its map has an armed timer in the group's shard and lists of
// at least one conn, well linked; each conn is of this group, open, and
// filed no later than its next event's tick; the spare bucket's timer is
// unarmed and it is in no map.
func (g *idleGroup) check(h *Hierarchy, idx int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sh != h.shards[idx] {
		return fmt.Errorf("its shard is not shard %d", idx)
	}
	if len(g.plainHeads) != len(g.buckets) || len(g.extHeads) != len(g.buckets) {
		return fmt.Errorf("the head maps hold %d and %d heads for %d buckets", len(g.plainHeads), len(g.extHeads), len(g.buckets))
	}
	for key, b := range g.buckets {
		if b.key != key || b.g != g {
			return fmt.Errorf("bucket %v: filed under another key or group", key)
		}
		if bucketOf(g, &b.plain) != b || bucketOf(g, &b.ext) != b {
			return fmt.Errorf("bucket %v: its heads do not name it", key)
		}
		s := b.t.home()
		s.lock()
		armed := b.t.armedLocked()
		s.mu.Unlock()
		if s != g.sh || !armed {
			return fmt.Errorf("bucket %v: its timer is not armed in the group's shard", key)
		}
		if b.empty() {
			return fmt.Errorf("bucket %v: empty, with its timer armed", key)
		}
		at := h.dueTick(b.t.deadlineNs())
		if at != b.tick {
			return fmt.Errorf("bucket %v: its timer fires at tick %d, not its tick %d", key, at, b.tick)
		}
		if err := checkList(h, idx, key, at, &b.plain); err != nil {
			return err
		}
		if err := checkList(h, idx, key, at, &b.ext); err != nil {
			return err
		}
	}
	if b := g.spare; b != nil {
		s := b.t.home()
		s.lock()
		armed := b.t.armedLocked()
		s.mu.Unlock()
		if armed || !b.empty() || g.buckets[b.key] == b {
			return fmt.Errorf("the spare bucket is armed, holds conns or is in the map")
		}
	}
	return nil
}

func checkList[X connExtra](h *Hierarchy, idx int, key bucketKey, at int64, head *eventConn[X]) error {
	for c := head.next; c != head; c = c.next {
		if c.next.prev != c || c.prev.next != c {
			return fmt.Errorf("bucket %v: a conn's links do not agree", key)
		}
		if c.home != uint32(idx) {
			return fmt.Errorf("bucket %v: a conn of group %d", key, c.home)
		}
		if c.state.Load()&(idleTimedOut|idleClosed|idleParked) != 0 {
			return fmt.Errorf("bucket %v: holds a closed or parked conn", key)
		}
		if due := h.dueTick(c.nextDue()); at > due {
			return fmt.Errorf("bucket %v: fires at tick %d, after its conn's next event at tick %d", key, at, due)
		}
	}
	return nil
}
