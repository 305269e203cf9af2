package sandbox

import (
	"sync"

	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/unix"
)

// reservingAllocator backs each guest memory with one reservation of its whole cap, made
// inaccessible (PROT_NONE, MAP_NORESERVE: no RAM and no overcommit charge), and commits pages
// only as the guest grows into them. wazero's default grows a Go slice by appending, which copies
// the whole memory on every memory.grow and keeps the old copies until the collector runs: a
// guest that climbs to 1 GiB drove a run to about 4 GiB of RSS. Here the memory never moves, so
// nothing is copied, and host memory follows the pages the guest really touched.
//
// Use one per run and call release after the runtime is closed: wazero calls Free when the
// module closes (proc_exit, a timeout), but it keeps a slice of the memory after that, so Free
// only gives the pages back and the mapping goes with release.
type reservingAllocator struct {
	mu   sync.Mutex
	maps [][]byte
	peak uint64 // the most any memory of the run grew to, in bytes
}

// grew notes that a memory of the run now holds size bytes.
func (a *reservingAllocator) grew(size uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.peak = max(a.peak, size)
}

// Peak is the most any memory of the run grew to, in bytes: how close the guest came to its cap.
func (a *reservingAllocator) Peak() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.peak
}

// wasmPage is WebAssembly's page size; a reservation is never smaller.
const wasmPage = 1 << 16

// Allocate implements experimental.MemoryAllocator. maxBytes is the guest's declared maximum or
// the run's cap, whichever is lower, so the reservation is the most the guest can ever grow to.
func (a *reservingAllocator) Allocate(capacity, maxBytes uint64) experimental.LinearMemory {
	reserve := max(maxBytes, capacity, wasmPage)
	b, err := unix.Mmap(-1, 0, int(reserve), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		// No address space for the reservation: grow on the Go heap as wazero would. Returning
		// nil here would make wazero panic, not fail.
		return &heapMemory{max: reserve, grew: a.grew}
	}
	a.mu.Lock()
	a.maps = append(a.maps, b)
	a.mu.Unlock()
	return &reservedMemory{buf: b, grew: a.grew}
}

// release unmaps every reservation. Call it only once the runtime is closed.
func (a *reservingAllocator) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range a.maps {
		_ = unix.Munmap(b)
	}
	a.maps = nil
}

type reservedMemory struct {
	mu        sync.Mutex // Free may come from wazero's timeout goroutine while the guest grows
	buf       []byte     // the whole reservation
	committed uint64     // the accessible prefix
	grew      func(uint64)
}

// Reallocate implements experimental.LinearMemory: it makes the first size bytes accessible and
// returns them, always at the same address. nil makes the guest's memory.grow fail.
func (m *reservedMemory) Reallocate(size uint64) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if size > uint64(len(m.buf)) {
		return nil
	}
	if size > m.committed {
		if unix.Mprotect(m.buf[m.committed:size], unix.PROT_READ|unix.PROT_WRITE) != nil {
			return nil
		}
		m.committed = size
		m.grew(size)
	}
	// cap == len: nothing may append into the inaccessible rest.
	return m.buf[:size:size]
}

// Free implements experimental.LinearMemory: the pages go back to the system at once, and a
// late read of them sees zeros instead of a fault.
func (m *reservedMemory) Free() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.committed > 0 {
		_ = unix.Madvise(m.buf[:m.committed], unix.MADV_DONTNEED)
	}
}

// heapMemory is the fallback: a Go slice grown by appending, like wazero's own.
type heapMemory struct {
	buf  []byte
	max  uint64
	grew func(uint64)
}

func (h *heapMemory) Reallocate(size uint64) []byte {
	if size > h.max {
		return nil
	}
	if size > uint64(len(h.buf)) {
		h.buf = append(h.buf, make([]byte, size-uint64(len(h.buf)))...)
		h.grew(size)
	}
	return h.buf[:size]
}

func (h *heapMemory) Free() { h.buf = nil }
