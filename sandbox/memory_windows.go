package sandbox

import "github.com/tetratelabs/wazero/experimental"

// Allocate implements experimental.MemoryAllocator as wazero's default does, with a slice grown
// on the heap: reserving the cap and committing pages as the guest grows is mmap and mprotect in
// memory_unix.go, and Windows would need VirtualAlloc for it, which mur does not do yet. A guest
// that grows large then copies its memory on each grow, as under wazero alone.
func (a *reservingAllocator) Allocate(capacity, maxBytes uint64) experimental.LinearMemory {
	return &heapMemory{max: max(maxBytes, capacity, wasmPage), grew: a.grew}
}

// release has nothing to unmap.
func (a *reservingAllocator) release() {}
