//go:build unix

package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// notYours says why fi (at path p) is not owned by this user, and is "" when it is.
func notYours(p string, fi fs.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Sprintf("%s is owned by uid %d, not by you (uid %d); remove it so mur can create its own", p, st.Uid, os.Getuid())
	}
	return ""
}
