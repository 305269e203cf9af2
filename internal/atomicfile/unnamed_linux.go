package atomicfile

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// OpenUnnamed opens a new file in the folder dir that has no name (O_TMPFILE): nobody sees it,
// and the kernel frees it if the process dies before LinkUnnamed names it. It fails where the
// file system can't make one; the caller then writes a named file as usual.
func OpenUnnamed(dir string, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(dir, os.O_RDWR|unix.O_TMPFILE|unix.O_CLOEXEC, perm)
}

// LinkUnnamed names f, from OpenUnnamed, name in the folder dir holds open. linkat through
// /proc needs no privilege, unlike AT_EMPTY_PATH; a dir on another file system than f fails.
func LinkUnnamed(f, dir *os.File, name string) error {
	return unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", f.Fd()), int(dir.Fd()), name, unix.AT_SYMLINK_FOLLOW)
}
