// Package bufpool lends the large buffers that ingests, pulls and verifies stream through, so a
// process reuses them instead of making fresh ones. On a virtual machine the page faults of a
// fresh megabyte cost more than the bytes that pass through it, and a project pull would make
// several per artifact.
package bufpool

import "sync"

var pools sync.Map // buffer size → *sync.Pool of *[]byte

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

// Get returns a buffer of size bytes, whose content is whatever its last user left.
func Get(size int) *[]byte {
	b := pool(size).Get().(*[]byte)
	*b = (*b)[:size]
	return b
}

// Put gives b back; nothing may use it afterwards.
func Put(b *[]byte) {
	if b == nil || cap(*b) == 0 {
		return
	}
	pool(cap(*b)).Put(b)
}
