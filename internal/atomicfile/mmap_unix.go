//go:build unix

package atomicfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// Map maps the regular file f read-only, with its pages faulted in by one call where the system
// can (mapPopulate): on a virtual machine copying megabytes into fresh heap costs a page fault per
// 4 KiB, which is most of a warm start's loading. unmap releases the mapping; the bytes must not
// be used after it. An empty file, or one that can't be mapped, is read into memory instead.
func Map(f *os.File, size int64) (data []byte, unmap func() error, err error) {
	if size == 0 {
		return []byte{}, func() error { return nil }, nil
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_PRIVATE|mapPopulate)
	if err == nil {
		return b, func() error { return unix.Munmap(b) }, nil
	}
	return readAll(f, size)
}
