package sandbox

import (
	"io/fs"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sys/unix"
)

func (t *tree) stat(rel string, dirOnly bool) (sys.Stat_t, experimentalsys.Errno) {
	c, fd, st, e := t.node(rel, true)
	if e != 0 {
		return sys.Stat_t{}, e
	}
	unix.Close(fd)
	c.close()
	if dirOnly && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return sys.Stat_t{}, experimentalsys.ENOTDIR
	}
	return statOf(&st), 0
}

// changeable opens rel (following symlinks) for a change of its metadata, refusing one in a
// read-only tree or subtree or to a folder pinned by one.
func (t *tree) changeable(rel string, change func(proc string) error) experimentalsys.Errno {
	c, fd, st, e := t.node(rel, true)
	if e != 0 {
		return e
	}
	defer c.close()
	defer unix.Close(fd)
	if c.readOnly() || t.pinned[statID(&st)] {
		return experimentalsys.EROFS
	}
	return errno(change(procPath(fd)))
}

func (t *tree) chmod(rel string, perm fs.FileMode) experimentalsys.Errno {
	return t.changeable(rel, func(p string) error { return unix.Fchmodat(unix.AT_FDCWD, p, uint32(perm.Perm()), 0) })
}

func (t *tree) utimens(rel string, atim, mtim int64) experimentalsys.Errno {
	ts := []unix.Timespec{timespec(atim), timespec(mtim)}
	return t.changeable(rel, func(p string) error { return unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, 0) })
}

func timespec(ns int64) unix.Timespec {
	if ns == experimentalsys.UTIME_OMIT {
		return unix.Timespec{Nsec: unix.UTIME_OMIT}
	}
	return unix.NsecToTimespec(ns)
}
