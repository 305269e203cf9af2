package sandbox

import (
	"os"

	"golang.org/x/sys/unix"
)

// newQuota measures the store held open as dir. With no /proc/self/fd to walk it by path, it
// walks it through descriptors from the held folder, never following a link.
func newQuota(dir *os.File, limit int64) (*quota, error) {
	fd, err := unix.Openat(int(dir.Fd()), ".", dirFlags, 0)
	if err != nil {
		return nil, err
	}
	total, err := sizeBelow(fd, map[[2]uint64]bool{})
	if err != nil {
		return nil, err
	}
	q := &quota{limit: limit}
	q.used.Store(total)
	return q, nil
}

// sizeBelow adds up the sizes of the regular files in the folder fd and below it, each file with
// more than one name once (seen holds their device and inode), and closes fd.
func sizeBelow(fd int, seen map[[2]uint64]bool) (int64, error) {
	d := os.NewFile(uintptr(fd), ".")
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, e := range entries {
		switch {
		case e.Type().IsRegular():
			var st unix.Stat_t
			if unix.Fstatat(fd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
				id := [2]uint64{uint64(st.Dev), uint64(st.Ino)}
				if st.Nlink > 1 && seen[id] {
					continue
				}
				seen[id] = true
				total += st.Size
			}
		case e.IsDir():
			sub, err := unix.Openat(fd, e.Name(), dirFlags, 0)
			if err != nil {
				return 0, err
			}
			n, err := sizeBelow(sub, seen)
			if err != nil {
				return 0, err
			}
			total += n
		}
	}
	return total, nil
}
