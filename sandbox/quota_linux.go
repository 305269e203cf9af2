package sandbox

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// newQuota measures the store held open as dir.
func newQuota(dir *os.File, limit int64) (*quota, error) {
	q := &quota{limit: limit}
	var total int64
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{} // the files with more than one name counted so far
	// The trailing /. makes the walk start inside the held folder, not at the fd's link.
	root := "/proc/self/fd/" + strconv.Itoa(int(dir.Fd())) + "/."
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
					id := inode{uint64(st.Dev), st.Ino}
					if seen[id] {
						return nil
					}
					seen[id] = true
				}
				total += fi.Size()
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	q.used.Store(total)
	return q, nil
}
