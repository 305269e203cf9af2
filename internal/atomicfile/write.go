package atomicfile

import "os"

// WriteChunk is the most one write call hands the kernel. The page cache takes a write's new
// pages as one folio sized to the write (Linux 6.x file systems with large folios). Folios of up
// to 32 KiB come from per-CPU lists of pages freed moments ago; larger ones come from the buddy
// allocator, whose free memory a virtual machine may have given back to its host (free page
// reporting), so that every 4 KiB page of them faults in the host when the copy first touches
// it. On the 2-core VM of BENCHMARKS.md, 1 MiB writes cost 5–10 times the CPU per byte of 32 KiB
// ones (the kernel's copy into the page cache took more than SHA-256 of the same bytes); a
// syscall per 32 KiB costs under 1% of that.
const WriteChunk = 32 << 10

// Write writes b to f in calls of at most WriteChunk bytes (see there).
func Write(f *os.File, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := f.Write(b[n:min(len(b), n+WriteChunk)])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// WriteAt writes b to f at off in calls of at most WriteChunk bytes (see there).
func WriteAt(f *os.File, b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		m, err := f.WriteAt(b[n:min(len(b), n+WriteChunk)], off+int64(n))
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Write is the temporary file's Write in calls of at most WriteChunk bytes.
func (f *File) Write(b []byte) (int, error) { return Write(f.File, b) }
