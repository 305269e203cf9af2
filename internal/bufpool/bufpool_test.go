package bufpool

import "testing"

func TestGetIsTheSizeAsked(t *testing.T) {
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
	big := Get(1 << 16)
	Put(big)
	for i := 0; i < 100; i++ {
		if b := Get(1 << 10); cap(*b) != 1<<10 {
			t.Fatalf("Get(1 KiB) gave a buffer of %d bytes", cap(*b))
		}
	}
	Put(nil) // a no-op, not a panic
}
