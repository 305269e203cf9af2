package safefile

import (
	"fmt"
	"io/fs"
	"syscall"
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
