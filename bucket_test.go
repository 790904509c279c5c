package timingwheel

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// bucketOrder returns the timers of the list with sentinel l, in order,
// checking each link both ways.
func bucketOrder(t *testing.T, l *Timer) []*Timer {
	t.Helper()
	var got []*Timer
	for x := l.next; x != l; x = x.next {
		assert.Same(t, x, x.next.prev, "a broken back link")
		got = append(got, x)
	}
	return got
}

// TestBucket_LinksInOrderAndUnlinksInPlace: pushBack appends; unlink takes a
// timer out wherever it is, leaves it linked to nothing and names the
// sentinel only when that emptied the list; moveAllTo appends a whole list
// in order and leaves it empty.
func TestBucket_LinksInOrderAndUnlinksInPlace(t *testing.T) {
	var a, b Timer
	a.initList()
	b.initList()
	x := make([]Timer, 5)
	for i := range 3 {
		a.pushBack(&x[i])
	}
	b.pushBack(&x[3])
	b.pushBack(&x[4])
	assert.Equal(t, []*Timer{&x[0], &x[1], &x[2]}, bucketOrder(t, &a))
	assert.Nil(t, x[1].unlink(), "the list is not empty yet")
	assert.Nil(t, x[1].next)
	assert.Nil(t, x[1].prev)
	a.moveAllTo(&b)
	assert.True(t, a.empty())
	assert.Equal(t, []*Timer{&x[3], &x[4], &x[0], &x[2]}, bucketOrder(t, &b))
	a.moveAllTo(&b) // an empty list moves nothing
	assert.Len(t, bucketOrder(t, &b), 4)
	for _, i := range []int{3, 4, 0} {
		assert.Nil(t, x[i].unlink())
	}
	assert.Same(t, &b, x[2].unlink(), "the last timer out names the sentinel")
	assert.True(t, b.empty())
}
