package cas

import "golang.org/x/sys/unix"

// readOnly reports whether dir is on a file system mounted read-only.
func readOnly(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Flags&unix.ST_RDONLY != 0
}
