package sandbox

import (
	"fmt"
	"os"
	"path/filepath"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"golang.org/x/sys/unix"
)

// node opens rel's last component as an O_PATH descriptor, which can name any file without
// reading it, following it while it is a symlink when follow is set. The caller closes the
// cursor and fd.
func (t *tree) node(rel string, follow bool) (*cursor, int, unix.Stat_t, experimentalsys.Errno) {
	var st unix.Stat_t
	c, last, e := t.at(rel)
	if e != 0 {
		return nil, -1, st, e
	}
	for {
		fd, err := unix.Openat(c.dir(), last, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			c.close()
			return nil, -1, st, errno(err)
		}
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			c.close()
			return nil, -1, st, errno(err)
		}
		if !follow || st.Mode&unix.S_IFMT != unix.S_IFLNK {
			return c, fd, st, 0
		}
		unix.Close(fd)
		target, isLink, e := readlinkAt(c.dir(), last)
		if e == 0 && !isLink {
			// Replaced since: look again, within the bound.
			if c.hops++; c.hops > maxHops {
				e = experimentalsys.ELOOP
			}
			if e == 0 {
				continue
			}
		}
		if e == 0 {
			last, e = c.follow(last, target)
		}
		if e != 0 {
			c.close()
			return nil, -1, st, e
		}
	}
}

// procPath names the file an O_PATH descriptor holds, for the calls (chmod, utimensat) that
// take no such descriptor; the kernel resolves it to that very file, not by its path.
func procPath(fd int) string { return fmt.Sprintf("/proc/self/fd/%d", fd) }

// heldPath is where an open folder really is now, as the kernel names it.
func heldPath(f *os.File) string {
	if p, err := os.Readlink(procPath(int(f.Fd()))); err == nil && filepath.IsAbs(p) {
		return p
	}
	return realPath(f.Name())
}
