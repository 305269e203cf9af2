// Package bufpool lends the large buffers that ingests, pulls and verifies stream through, so a
// process reuses them instead of making fresh ones. On a virtual machine the page faults of a
// fresh megabyte cost more than the bytes that pass through it (about 15 µs for each 4 KiB page
// on the 2-core VM of BENCHMARKS.md), and a project pull would make several per artifact.
//
// Buffers of hugeMin bytes or more come from slabs backed by transparent huge pages where the
// system offers them (slab_linux.go): one fault brings in 2 MiB instead of 4 KiB. They are never
// given back to the system, only to the pool, and the collector never reclaims one: a buffer
// dropped instead of given back is lost for the process's life, so every path that takes one
// gives it back (Lent lets tests check). A process holds, for each size, the most it had out at
// once.
package bufpool

import (
	"sync"
	"sync/atomic"
)

// hugeMin is the size from which a buffer is carved from a slab.
const hugeMin = 64 << 10

var pools sync.Map // buffer size → *sync.Pool of *[]byte, for buffers under hugeMin

func pool(size int) *sync.Pool {
	if p, ok := pools.Load(size); ok {
		return p.(*sync.Pool)
	}
	p, _ := pools.LoadOrStore(size, &sync.Pool{New: func() any {
		b := make([]byte, size)
		return &b
	}})
	return p.(*sync.Pool)
}

// lent counts the slab buffers out on loan: a path that drops one instead of giving it back
// loses its memory for the process's life, which tests find with Lent.
var lent, lentBytes atomic.Int64

// Lent is how many buffers of hugeMin bytes or more are lent and not yet given back.
func Lent() int64 { return lent.Load() }

// LentBytes is the size of those buffers, in all: memory a pull holds outside the Go heap.
func LentBytes() int64 { return lentBytes.Load() }

// slabbed are the free buffers carved from slabs, by size. Unlike a sync.Pool's, they are not
// dropped at a garbage collection: nothing else would reuse their memory.
var slabbed struct {
	mu   sync.Mutex
	free map[int][]*[]byte
}

// Get returns a buffer of size bytes, whose content is whatever its last user left.
func Get(size int) *[]byte {
	if size < hugeMin {
		b := pool(size).Get().(*[]byte)
		*b = (*b)[:size]
		return b
	}
	lent.Add(1)
	lentBytes.Add(int64(size))
	slabbed.mu.Lock()
	if l := slabbed.free[size]; len(l) > 0 {
		b := l[len(l)-1]
		slabbed.free[size] = l[:len(l)-1]
		slabbed.mu.Unlock()
		*b = (*b)[:size]
		return b
	}
	slabbed.mu.Unlock()
	b := carve(size)
	return &b
}

// minClass is the smallest buffer Class gives.
const minClass = 4 << 10

// Class is the size of buffer to stream about n bytes through, at most most bytes: the power of
// two from 4 KiB up that holds n, or most when n is not known (<0) or is more. A pull of many
// small blobs then takes a few KiB for each one in flight instead of a megabyte, and the few
// sizes keep the pool's buffers reusable.
func Class(n int64, most int) int {
	if n < 0 || n >= int64(most) {
		return most
	}
	c := minClass
	for int64(c) < n {
		c <<= 1
	}
	return min(c, most)
}

// Put gives b back; nothing may use it afterwards.
func Put(b *[]byte) {
	if b == nil || cap(*b) == 0 {
		return
	}
	size := cap(*b)
	if size < hugeMin {
		pool(size).Put(b)
		return
	}
	lent.Add(-1)
	lentBytes.Add(-int64(size))
	slabbed.mu.Lock()
	if slabbed.free == nil {
		slabbed.free = map[int][]*[]byte{}
	}
	slabbed.free[size] = append(slabbed.free[size], b)
	slabbed.mu.Unlock()
}
