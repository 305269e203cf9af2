package sandbox

import (
	"io/fs"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sys/unix"
)

func (t *tree) stat(rel string, dirOnly bool) (sys.Stat_t, experimentalsys.Errno) {
	c, _, st, e := t.node(rel, true)
	if e != 0 {
		return sys.Stat_t{}, e
	}
	c.close()
	if dirOnly && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return sys.Stat_t{}, experimentalsys.ENOTDIR
	}
	return statOf(&st), 0
}

// changeable finds rel (following symlinks) for a change of its metadata, refusing one in a
// read-only tree or subtree or to a folder pinned by one. change acts on the name in the folder
// the walk holds, never following a link there (AT_SYMLINK_NOFOLLOW): a link swapped in after the
// check has its own metadata changed, not its target's. Without O_PATH the file itself is not
// held, so a pinned folder moved into the name in that instant would be changed; only another
// process can move one, and the guest can't (rename refuses it).
func (t *tree) changeable(rel string, change func(dir int, name string) error) experimentalsys.Errno {
	c, last, st, e := t.node(rel, true)
	if e != 0 {
		return e
	}
	defer c.close()
	if c.readOnly() || t.pinned[statID(&st)] {
		return experimentalsys.EROFS
	}
	return errno(change(c.dir(), last))
}

func (t *tree) chmod(rel string, perm fs.FileMode) experimentalsys.Errno {
	return t.changeable(rel, func(dir int, name string) error {
		return unix.Fchmodat(dir, name, uint32(perm.Perm()), unix.AT_SYMLINK_NOFOLLOW)
	})
}

func (t *tree) utimens(rel string, atim, mtim int64) experimentalsys.Errno {
	ts := []unix.Timespec{timespec(atim), timespec(mtim)}
	return t.changeable(rel, func(dir int, name string) error {
		return unix.UtimesNanoAt(dir, name, ts, unix.AT_SYMLINK_NOFOLLOW)
	})
}

// utimeOmit is UTIME_OMIT of macOS's <sys/stat.h>, which x/sys/unix does not define there.
const utimeOmit = -2

func timespec(ns int64) unix.Timespec {
	if ns == experimentalsys.UTIME_OMIT {
		return unix.Timespec{Nsec: utimeOmit}
	}
	return unix.NsecToTimespec(ns)
}
