package safefile

import (
	"fmt"
	"io/fs"
	"syscall"
	"time"
)

// Stamp is fi's inode, size and change time, "" when fi does not carry them. Writing a file
// changes its change time, and no user can set one back, so an unchanged stamp shows unchanged
// content.
func Stamp(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d:%d:%d.%09d", st.Ino, st.Size, st.Ctim.Sec, st.Ctim.Nsec)
}

// ChangeTime is when fi's file last changed, content or metadata: the later of its modification
// and change times, since anyone may set the first back and nobody the second.
func ChangeTime(fi fs.FileInfo) time.Time {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fi.ModTime()
	}
	if c := time.Unix(st.Ctim.Sec, st.Ctim.Nsec); c.After(fi.ModTime()) {
		return c
	}
	return fi.ModTime()
}
