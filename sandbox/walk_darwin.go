package sandbox

import (
	"os"
	"path/filepath"
	"unsafe"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"golang.org/x/sys/unix"
)

// macOS has neither O_PATH, which holds a file without opening it, nor /proc/self/fd, which
// names what a descriptor holds. So node leaves the last component named in the folder the walk
// holds, and every change made through it acts on that name without following a link there
// (rootfs_darwin.go); and a held folder's path comes from fcntl F_GETPATH.

// node walks to rel's last component, following it while it is a symlink when follow is set, and
// returns the cursor holding its folder, its name there and what it is. The caller closes the
// cursor.
func (t *tree) node(rel string, follow bool) (*cursor, string, unix.Stat_t, experimentalsys.Errno) {
	var st unix.Stat_t
	c, last, e := t.at(rel)
	if e != 0 {
		return nil, "", st, e
	}
	for {
		if err := unix.Fstatat(c.dir(), last, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			c.close()
			return nil, "", st, errno(err)
		}
		if !follow || st.Mode&unix.S_IFMT != unix.S_IFLNK {
			return c, last, st, 0
		}
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
			return nil, "", st, e
		}
	}
}

// heldPath is where an open folder really is now, as the kernel names it.
func heldPath(f *os.File) string {
	if p, err := fdPath(f); err == nil && filepath.IsAbs(p) && leadsTo(p, f) {
		return p
	}
	return realPath(f.Name())
}

// fdPath asks the kernel for the path of what f holds (F_GETPATH). x/sys/unix has no call for
// it, and fcntl takes its buffer through the pointer argument x/sys passes for a lock; the
// buffer is uint64s so that the pointer is as aligned as a lock's, and MAXPATHLEN bytes long.
func fdPath(f *os.File) (string, error) {
	var buf [unix.PathMax / 8]uint64
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETPATH, (*unix.Flock_t)(unsafe.Pointer(&buf))); err != nil {
		return "", err
	}
	return unix.ByteSliceToString(unsafe.Slice((*byte)(unsafe.Pointer(&buf)), unix.PathMax)), nil
}

// leadsTo reports whether path p names the folder f holds.
func leadsTo(p string, f *os.File) bool {
	a, err := os.Stat(p)
	if err != nil {
		return false
	}
	b, err := f.Stat()
	return err == nil && os.SameFile(a, b)
}
