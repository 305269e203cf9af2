package bufpool

import (
	"runtime"
	"testing"
)

func TestGetIsTheSizeAsked(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1, 4096, 1 << 20} {
		b := Get(size)
		if len(*b) != size || cap(*b) != size {
			t.Fatalf("Get(%d) gave len %d cap %d", size, len(*b), cap(*b))
		}
		*b = (*b)[:1] // a user that resliced it
		Put(b)
		if b := Get(size); len(*b) != size {
			t.Fatalf("Get(%d) after a resliced Put gave len %d", size, len(*b))
		}
	}
}

// A buffer comes back to the pool of its own size, never to a smaller one's.
func TestPutGoesToItsOwnSize(t *testing.T) {
	t.Parallel()
	big := Get(1 << 16)
	Put(big)
	for i := 0; i < 100; i++ {
		if b := Get(1 << 10); cap(*b) != 1<<10 {
			t.Fatalf("Get(1 KiB) gave a buffer of %d bytes", cap(*b))
		}
	}
	Put(nil) // a no-op, not a panic
}

// Large buffers are carved side by side from slabs: each is its own memory, of exactly the size
// asked, and one given back is the next one lent, even after a garbage collection (a sync.Pool
// would drop it, and nothing else would reuse slab memory).
func TestSlabBuffersAreDistinctAndReused(t *testing.T) {
	sizes := []int{hugeMin, 1 << 20, 1 << 20, 128 << 10, 1<<20 + 1, 3 << 20}
	var bufs []*[]byte
	for i, size := range sizes {
		b := Get(size)
		if len(*b) != size || cap(*b) != size {
			t.Fatalf("Get(%d) gave len %d cap %d", size, len(*b), cap(*b))
		}
		for j := range *b {
			(*b)[j] = byte(i)
		}
		bufs = append(bufs, b)
	}
	for i, b := range bufs {
		for j, c := range *b {
			if c != byte(i) {
				t.Fatalf("buffer %d byte %d is %d: another buffer overlaps it", i, j, c)
			}
		}
	}
	big := bufs[1]
	Put(big)
	runtime.GC()
	runtime.GC()
	if again := Get(1 << 20); &(*again)[0] != &(*big)[0] {
		t.Fatal("a 1 MiB buffer given back was not lent again after a GC")
	}
	for _, b := range bufs {
		Put(b)
	}
}

// A buffer larger than half a slab is made on its own, and still comes back to its size.
func TestOutsizedBufferIsPooled(t *testing.T) {
	t.Parallel()
	b := Get(6 << 20)
	if len(*b) != 6<<20 {
		t.Fatalf("len %d", len(*b))
	}
	Put(b)
	if again := Get(6 << 20); &(*again)[0] != &(*b)[0] {
		t.Fatal("an outsized buffer given back was not lent again")
	}
}
