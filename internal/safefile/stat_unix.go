//go:build unix

package safefile

import (
	"io/fs"
	"syscall"
)

// Links is how many names the file fi describes has, from its stat; ok is false when fi does not
// carry it.
func Links(fi fs.FileInfo) (n uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true
}
