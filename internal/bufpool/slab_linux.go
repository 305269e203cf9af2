package bufpool

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	hugePage = 2 << 20
	// slabSize is what one mmap takes: a few huge pages, carved into buffers as they are asked
	// for.
	slabSize = 8 << 20
)

var slab struct {
	mu   sync.Mutex
	rest []byte // the uncarved part of the current slab
}

// carve cuts a buffer of size bytes (full capacity, no more) from a slab of huge pages, or makes
// it on the heap when no slab can be had or it would not fit one.
func carve(size int) []byte {
	if size > slabSize/2 {
		return make([]byte, size)
	}
	n := (size + 4095) &^ 4095
	slab.mu.Lock()
	defer slab.mu.Unlock()
	if len(slab.rest) < n {
		s, err := newSlab()
		if err != nil {
			return make([]byte, size)
		}
		slab.rest = s
	}
	b := slab.rest[:size:size]
	slab.rest = slab.rest[n:]
	return b
}

// newSlab maps slabSize bytes aligned to a huge page and asks for huge pages. Where the kernel
// gives none (transparent huge pages off), the slab is plain memory and costs what make would.
func newSlab() ([]byte, error) {
	m, err := unix.Mmap(-1, 0, slabSize+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	off := (hugePage - int(uintptr(unsafe.Pointer(&m[0]))%hugePage)) % hugePage
	s := m[off : off+slabSize : off+slabSize]
	_ = unix.Madvise(s, unix.MADV_HUGEPAGE)
	return s, nil
}
