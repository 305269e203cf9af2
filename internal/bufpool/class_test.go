package bufpool

import "testing"

// A stream's buffer is the power of two from 4 KiB up that holds it, never more than asked for
// at most, and the most when its size is not known.
func TestClass(t *testing.T) {
	const most = 1 << 20
	for _, c := range []struct {
		n    int64
		want int
	}{
		{-1, most}, {0, 4 << 10}, {1, 4 << 10}, {2000, 4 << 10}, {4 << 10, 4 << 10}, {4<<10 + 1, 8 << 10},
		{300 << 10, 512 << 10}, {most - 1, most}, {most, most}, {10 * most, most},
	} {
		if got := Class(c.n, most); got != c.want {
			t.Errorf("Class(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	if got := Class(100<<10, 96<<10); got != 96<<10 {
		t.Errorf("Class above a most that is no power of two = %d, want that most", got)
	}
}

// LentBytes counts the large buffers out, by size, until they are given back.
func TestLentBytes(t *testing.T) {
	base := LentBytes()
	a, b := Get(hugeMin), Get(1<<20)
	small := Get(1 << 10)
	if got := LentBytes() - base; got != hugeMin+1<<20 {
		t.Errorf("lent %d bytes, want %d", got, hugeMin+1<<20)
	}
	Put(a)
	Put(b)
	Put(small)
	if got := LentBytes() - base; got != 0 {
		t.Errorf("%d bytes still lent after every buffer came back", got)
	}
}
