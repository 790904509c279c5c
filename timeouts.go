package timingwheel

import (
	"hash/maphash"
	"sync"
	"time"
	"unsafe"
)

// Timeouts is a set of keys that each expire at their own deadline: the
// shape of per-connection idle timeouts. Add a key when a connection opens
// and again on each heartbeat (which pushes its deadline back), Remove it
// when the connection closes, and the expired function is called with the
// key of every connection that went silent.
//
// A key is in the set from Add until it expires or is removed. expired runs
// once per expiry, on the goroutine that advances the hierarchy, with no
// lock held; by then the key is no longer in the set, and expired may call
// any method of the set, for example Add to re-arm the key. A key that is
// re-armed or removed before expired runs for it is not reported; one added
// again (by an Add racing the expiry) after it left the set is in the set
// again, and expired still runs for the expiry: check [Timeouts.Deadline]
// in expired if a racing Add must win (see the example).
//
// Keys are compared with ==, as a map's are. A key that is not equal to
// itself (a floating-point NaN, or a struct, array or interface holding
// one) could never be found again, so Add panics for it, and Remove and
// Deadline report it absent; a key whose dynamic type is not comparable (a
// slice in an interface) panics in every method, as it would in a map.
// Either panic leaves the set as it was.
//
// Timeouts is safe for concurrent use by multiple goroutines. It keeps its
// timers by value in its own storage, one per key, and reuses the storage
// of keys that expired or were removed: adding a key and re-arming it
// allocate nothing once the set has held as many keys before. That storage
// is kept for reuse, not returned to the heap, when the set shrinks: with
// int keys, about 70 bytes per key at the set's largest, and about 75 once
// keys have come and gone (measured with 10^6 keys added, then removed and
// replaced by 10^6 others: 69 and 74 B per key). A set holds at most about
// 268 million keys (2^24 per each of its 16 shards); Add panics beyond.
// Create one with [NewTimeouts]; the zero value is not usable.
type Timeouts[K comparable] struct {
	h       *Hierarchy
	expired func(K)
	seed    maphash.Seed
	shards  [timeoutShards]timeoutShard[K]
}

// The keys are spread over shards, each with its own lock, so that the
// heartbeats of many connections do not queue on one mutex.
const timeoutShards = 16

// A timeoutShard holds its keys' entries in pages that never move (the
// timers in them are linked into the wheels by address) and finds them
// through an open-addressing table of entry numbers: 4 bytes a slot,
// against a map's 16 or more.
type timeoutShard[K comparable] struct {
	mu    sync.Mutex
	seed  maphash.Seed
	table []uint32 // slotEmpty or (entry number+1)<<8 | tag, linear probing
	n     int      // keys
	pages [][]entry[K]
	free  []uint32   // numbers of unused entries
	bind  []*binding // the timers' bindings, one per hierarchy shard
	_     [64]byte   // keep neighbouring shards' locks off one cache line
}

// An entry is one key and its timer. The entry's timer has no callback of
// its own: its binding's fire, shared by every timer of a pair of a set's
// shard and a hierarchy shard, is told the timer that fired and finds the
// entry from it (see entryOf).
type entry[K comparable] struct {
	t   Timer
	key K
}

const (
	slotEmpty = 0
	pageSize  = 256       // entries per page
	maxEntry  = 1<<24 - 2 // entry numbers+1 fit in 24 bits
)

// NewTimeouts returns an empty set whose keys expire on h, calling expired
// with each key that expires. It panics if h or expired is nil.
func NewTimeouts[K comparable](h *Hierarchy, expired func(K)) *Timeouts[K] {
	if h == nil {
		panic("timingwheel: NewTimeouts called with a nil Hierarchy")
	}
	h.mustBeMade("NewTimeouts")
	if expired == nil {
		panic("timingwheel: NewTimeouts called with a nil expired func")
	}
	s := &Timeouts[K]{h: h, expired: expired, seed: maphash.MakeSeed()}
	for j := range s.shards {
		sh := &s.shards[j]
		sh.seed = s.seed
		fire := func(t *Timer) { s.fire(sh, t) }
		for _, hs := range h.shards {
			sh.bind = append(sh.bind, &binding{s: hs, fire: fire})
		}
	}
	return s
}

func (s *Timeouts[K]) mustBeMade(method string) {
	if s == nil || s.h == nil {
		panic("timingwheel: Timeouts." + method + " called on a set not created by NewTimeouts")
	}
}

// locate returns k's hash and shard, or false for a key that is not equal
// to itself, which is never in the set. It panics, before any lock is
// taken, for a key whose type is not comparable.
func (s *Timeouts[K]) locate(k K) (uint64, *timeoutShard[K], bool) {
	if k != k {
		return 0, nil, false
	}
	hash := maphash.Comparable(s.seed, k)
	return hash, &s.shards[hash%timeoutShards], true
}

// Add arms k to expire d from now, adding it to the set, or, if k is in the
// set, re-arms it with the new deadline (later or earlier). Re-arming a key
// allocates nothing, and neither does adding one once the set has held as
// many keys. A d <= 0 expires k on the first [Hierarchy.Advance] whose
// clock has reached now+d rounded up to a tick, as for [Hierarchy.AfterFunc].
func (s *Timeouts[K]) Add(k K, d time.Duration) {
	s.mustBeMade("Add")
	s.add(k, d)
}

// add is Add; it reports whether k was newly added (not re-armed).
func (s *Timeouts[K]) add(k K, d time.Duration) bool {
	hash, sh, ok := s.locate(k)
	if !ok {
		panic("timingwheel: Timeouts key is not equal to itself (a NaN?): it could never be found again")
	}
	// The clock is read under the key's lock, so that of two Adds of one
	// key, the one that takes effect later measures d from a later
	// reading: the latest activity wins. A live key moved later takes no
	// other lock (see Timer.rearm).
	a := arming{v: int64(d), rel: true}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if i, ok := sh.find(k, hash); ok {
		sh.entry(i).t.rearm(a) // a later deadline takes no other lock
		return false
	}
	i := sh.alloc()
	e := sh.entry(i)
	e.key = k
	e.t.bindTo(sh.bind[s.h.pickShard().idx], nil)
	sh.insert(hash, i)
	e.t.resetTo(a)
	return true
}

// fire is called with the timer t of an entry of sh when t fires.
func (s *Timeouts[K]) fire(sh *timeoutShard[K], t *Timer) {
	e := entryOf[K](t)
	sh.mu.Lock()
	// Between t firing and this lock, Add may have re-armed t (report
	// nothing: the key is live again), or Remove may have taken the key out
	// (and Add may have reused the entry for another key).
	k := e.key
	hash := maphash.Comparable(s.seed, k)
	i, ok := sh.find(k, hash)
	if !ok || sh.entry(i) != e || t.isFiled() {
		sh.mu.Unlock()
		return
	}
	sh.remove(k, hash, i)
	sh.mu.Unlock()
	s.expired(k)
}

// Remove takes k out of the set. It reports whether k was in the set; if
// so, expired will not be called for it.
func (s *Timeouts[K]) Remove(k K) bool {
	s.mustBeMade("Remove")
	hash, sh, ok := s.locate(k)
	if !ok {
		return false
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, ok := sh.find(k, hash)
	if !ok {
		return false
	}
	sh.entry(i).t.Stop()
	sh.remove(k, hash, i)
	return true
}

// Deadline returns the deadline k was last armed with, and whether k is in
// the set.
func (s *Timeouts[K]) Deadline(k K) (time.Time, bool) {
	s.mustBeMade("Deadline")
	hash, sh, ok := s.locate(k)
	if !ok {
		return time.Time{}, false
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, ok := sh.find(k, hash)
	if !ok {
		return time.Time{}, false
	}
	return sh.entry(i).t.Deadline(), true
}

// Len returns the number of keys in the set, at one instant: it holds the
// locks of all the set's shards while it counts, so a key moved between
// two of them, or a set that always holds one key or two, is never seen
// with a count it did not have.
func (s *Timeouts[K]) Len() int {
	s.mustBeMade("Len")
	// No other holder takes more than one of these locks, so taking them
	// all in index order cannot deadlock.
	for i := range s.shards {
		s.shards[i].mu.Lock()
	}
	n := 0
	for i := range s.shards {
		n += s.shards[i].n
	}
	for i := range s.shards {
		s.shards[i].mu.Unlock()
	}
	return n
}

// entry returns entry number i.
func (sh *timeoutShard[K]) entry(i uint32) *entry[K] {
	return &sh.pages[i/pageSize][i%pageSize]
}

// tag is the part of a key's hash kept in its slot, to skip most entries
// of other keys without reading them.
func tag(hash uint64) uint32 { return uint32(hash >> 56) }

// start is the slot where probing for hash begins: the hash's bits 8 to
// 39 scaled to the table's size, which need not be a power of two.
func (sh *timeoutShard[K]) start(hash uint64) int {
	return int((hash >> 8 & (1<<32 - 1)) * uint64(len(sh.table)) >> 32)
}

// after returns the slot after j, wrapping.
func (sh *timeoutShard[K]) after(j int) int {
	if j++; j == len(sh.table) {
		return 0
	}
	return j
}

// find returns the number of k's entry. sh.mu must be held.
func (sh *timeoutShard[K]) find(k K, hash uint64) (uint32, bool) {
	if sh.n == 0 {
		return 0, false
	}
	tg := tag(hash)
	for j := sh.start(hash); ; j = sh.after(j) {
		v := sh.table[j]
		if v == slotEmpty {
			return 0, false
		}
		if v&0xff == tg {
			if i := v>>8 - 1; sh.entry(i).key == k {
				return i, true
			}
		}
	}
}

// insert files entry number i under hash; its key is not in the table.
// sh.mu must be held.
func (sh *timeoutShard[K]) insert(hash uint64, i uint32) {
	if (sh.n+1)*8 > len(sh.table)*7 {
		sh.grow()
	}
	j := sh.start(hash)
	for sh.table[j] != slotEmpty {
		j = sh.after(j)
	}
	sh.table[j] = (i+1)<<8 | tag(hash)
	sh.n++
}

// remove takes k, in entry number i, out of the table and frees the entry.
// The slots after it in its run move back where their probing would find
// them, so no tombstone is left and the table never needs cleaning.
// sh.mu must be held.
func (sh *timeoutShard[K]) remove(k K, hash uint64, i uint32) {
	size := len(sh.table)
	want := (i+1)<<8 | tag(hash)
	hole := sh.start(hash)
	for sh.table[hole] != want {
		hole = sh.after(hole)
	}
	for j := sh.after(hole); sh.table[j] != slotEmpty; j = sh.after(j) {
		home := sh.start(sh.hash(sh.table[j]))
		// The slot stays if its home lies cyclically in (hole, j].
		if (j-home+size)%size < (j-hole+size)%size {
			continue
		}
		sh.table[hole] = sh.table[j]
		hole = j
	}
	sh.table[hole] = slotEmpty
	sh.n--
	e := sh.entry(i)
	var zero K
	e.key = zero // hold no reference to the key; the timer's callback is the shard's, shared
	sh.free = append(sh.free, i)
}

// grow makes the table half as large again, so that between growths it
// is 58% to 88% full. sh.mu must be held.
func (sh *timeoutShard[K]) grow() {
	old := sh.table
	sh.table = make([]uint32, max(16, len(old)+len(old)/2))
	for _, v := range old {
		if v == slotEmpty {
			continue
		}
		j := sh.start(sh.hash(v))
		for sh.table[j] != slotEmpty {
			j = sh.after(j)
		}
		sh.table[j] = v
	}
}

// hash returns the hash of the key of the entry that slot value v names.
func (sh *timeoutShard[K]) hash(v uint32) uint64 {
	return maphash.Comparable(sh.seed, sh.entry(v>>8-1).key)
}

// alloc returns the number of an unused entry. sh.mu must be held.
func (sh *timeoutShard[K]) alloc() uint32 {
	if n := len(sh.free); n > 0 {
		i := sh.free[n-1]
		sh.free = sh.free[:n-1]
		return i
	}
	i := len(sh.pages) * pageSize
	if i+pageSize-1 > maxEntry {
		panic("timingwheel: Timeouts shard holds too many keys")
	}
	sh.pages = append(sh.pages, make([]entry[K], pageSize))
	for j := pageSize - 1; j > 0; j-- {
		sh.free = append(sh.free, uint32(i+j))
	}
	return uint32(i)
}

// entryOf returns the entry whose timer t is. It is package unsafe's
// pattern (3), pointer arithmetic within one allocated object: t is the
// field t of an entry in a page (a []entry[K]), and subtracting the
// field's offset leads to that entry's start, in the same page.
//
// Why t is always such a field: entryOf is called only by fire, which only
// the bindings in sh.bind call, and only for a timer bound to one of them.
// Only Add binds a timer to them, and only the timer of an entry in one of
// sh's pages (pages never move, and are never freed while the set lives);
// no other code can reach those bindings, and a timer keeps a fixed
// binding until it is bound again (see binding.fixed), which nothing does
// to an entry's timer but Add.
//
// What it saves: each entry would otherwise need a callback of its own, a
// closure over its entry, shard and set (48 B: a generic closure carries
// its dictionary), made once per entry and kept in the timer as the entry
// is reused: measured with TestTimeouts_HeapPerKey (HeapAlloc after a GC,
// 10^6 int keys), 117.4 B per key instead of 69.4 B, and one more
// allocation per entry; a set would then take more than half the heap of a
// map of time.AfterFunc timers (184 B per key), which that test forbids.
func entryOf[K comparable](t *Timer) *entry[K] {
	var e entry[K]
	return (*entry[K])(unsafe.Pointer(uintptr(unsafe.Pointer(t)) - unsafe.Offsetof(e.t)))
}
