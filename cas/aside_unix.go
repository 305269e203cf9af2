//go:build unix

package cas

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// touchNoFollow sets path's times to now without following a symlink at path.
func touchNoFollow(path string, now time.Time) error {
	ts := []unix.Timespec{unix.NsecToTimespec(now.UnixNano()), unix.NsecToTimespec(now.UnixNano())}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, path, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "utimensat", Path: path, Err: err}
	}
	return nil
}
