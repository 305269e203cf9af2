//go:build unix

package sandbox

import (
	"sync"

	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/unix"
)

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
		discard(m.buf[:m.committed])
	}
}
