//go:build unix

package sandbox

import (
	"fmt"
	"os"
	"path"
	"strings"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"golang.org/x/sys/unix"
)

// The walk: how rootFS (and the plan) go from a held folder to a path's last component, one
// component at a time, without letting the kernel resolve anything on their behalf.

// fileID names a file by device and inode. Every folder whose ID rootFS keeps is held open, so
// its inode can't be freed and handed to another file while the run lasts.
type fileID struct{ dev, ino uint64 }

func statID(st *unix.Stat_t) fileID { return fileID{uint64(st.Dev), st.Ino} }

func fdID(fd int) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileID{}, err
	}
	return statID(&st), nil
}

// tree is one held host folder and what may change below it.
type tree struct {
	dir      *os.File // held; every walk starts here
	fd       int
	id       fileID
	readOnly bool
	// roRoots are the read-only subtrees' own folders: whatever is reached through one is
	// read-only.
	roRoots map[fileID]bool
	// pinned are the read-only subtrees and every folder between them and the root: moving or
	// removing one would move a read-only subtree, or put another folder in its place.
	pinned map[fileID]bool
	held   []*os.File // the read-only subtrees, held so that their IDs stay theirs
	quota  *quota     // the state store's; nil for the workdir
}

// newTree takes ownership of dir and of subtrees, folders the plan opened as read-only
// subtrees. Each one is judged by where it really is, following ".." from its own descriptor:
// one below dir is a read-only subtree, one that is dir or holds it makes the whole tree
// read-only, and one elsewhere is out of reach and dropped.
func newTree(dir *os.File, readOnly bool, subtrees []*os.File) (*tree, error) {
	t := &tree{dir: dir, fd: int(dir.Fd()), readOnly: readOnly, roRoots: map[fileID]bool{}, pinned: map[fileID]bool{}}
	fail := func(i int, err error) (*tree, error) {
		for _, s := range subtrees[i:] {
			s.Close()
		}
		t.close()
		return nil, fmt.Errorf("inspecting %s: %w", dir.Name(), err)
	}
	var err error
	if t.id, err = fdID(t.fd); err != nil {
		return fail(0, err)
	}
	var rootUp []fileID
	for i, sub := range subtrees {
		up, err := ancestors(int(sub.Fd()))
		if err != nil {
			return fail(i, err)
		}
		k := indexOf(up, t.id)
		switch {
		case k == 0:
			t.readOnly = true
			sub.Close()
		case k > 0:
			t.roRoots[up[0]] = true
			for _, id := range up[:k] {
				t.pinned[id] = true
			}
			t.held = append(t.held, sub)
		default:
			if rootUp == nil {
				if rootUp, err = ancestors(t.fd); err != nil {
					return fail(i, err)
				}
			}
			if indexOf(rootUp, up[0]) >= 0 {
				t.readOnly = true
			}
			sub.Close()
		}
	}
	return t, nil
}

func (t *tree) close() {
	t.dir.Close()
	for _, h := range t.held {
		h.Close()
	}
}

func indexOf(ids []fileID, id fileID) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}

// ancestors lists folder fd and each of its parents up to the file system's root. It follows
// ".." from the descriptor, so the answer is where the folder really is, however it was reached.
func ancestors(fd int) ([]fileID, error) {
	id, err := fdID(fd)
	if err != nil {
		return nil, err
	}
	out := []fileID{id}
	at := fd
	defer func() {
		if at != fd {
			unix.Close(at)
		}
	}()
	for len(out) < 4096 {
		next, err := unix.Openat(at, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		if at != fd {
			unix.Close(at)
		}
		at = next
		nid, err := fdID(next)
		if err != nil {
			return nil, err
		}
		if nid == out[len(out)-1] {
			return out, nil
		}
		out = append(out, nid)
	}
	return nil, unix.ELOOP
}

// maxHops bounds the symlinks one walk follows, as the kernel's 40 does.
const maxHops = 40

// dirFlags open a folder on the way down without following a symlink.
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// cursor is a walk in progress: the folders walked through, the tree's root first, each held.
type cursor struct {
	t     *tree
	fds   []int // fds[0] is the tree's, borrowed; the others are the cursor's own
	ids   []fileID
	names []string // the name each folder was opened by; names[0] is ""
	hops  int
	// link is the last symlink the walk expanded, and escape is set to it when that symlink led
	// out of the tree; the plan names both in its refusal.
	link, escape *symlinkHop
	// rest is what was left to walk when a folder was missing.
	rest []string
}

type symlinkHop struct{ path, target string }

func (t *tree) begin() *cursor {
	return &cursor{t: t, fds: []int{t.fd}, ids: []fileID{t.id}, names: []string{""}}
}

func (c *cursor) dir() int { return c.fds[len(c.fds)-1] }

func (c *cursor) close() {
	for _, fd := range c.fds[1:] {
		unix.Close(fd)
	}
	c.fds, c.ids, c.names = c.fds[:1], c.ids[:1], c.names[:1]
}

func (c *cursor) push(fd int, name string) experimentalsys.Errno {
	id, err := fdID(fd)
	if err != nil {
		unix.Close(fd)
		return errno(err)
	}
	c.fds, c.ids, c.names = append(c.fds, fd), append(c.ids, id), append(c.names, name)
	return 0
}

func (c *cursor) pop() {
	n := len(c.fds) - 1
	unix.Close(c.fds[n])
	c.fds, c.ids, c.names = c.fds[:n], c.ids[:n], c.names[:n]
}

// path is name inside the cursor's folder, relative to the tree's root.
func (c *cursor) path(name string) string {
	return path.Join(append(append([]string{}, c.names[1:]...), name)...)
}

// readOnly reports whether the cursor's folder is in a read-only tree or subtree: whether any
// folder really walked through is a read-only subtree's.
func (c *cursor) readOnly() bool {
	if c.t.readOnly {
		return true
	}
	for _, id := range c.ids {
		if c.t.roRoots[id] {
			return true
		}
	}
	return false
}

// split turns a slash path into the components a walk takes; "" and "." are no steps.
func split(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// walk descends through every component of todo but the last, which it returns unwalked ("."
// when todo ends on a folder); with all set it descends through the last one too. create makes
// missing folders on the way: the plan uses it, a guest never does.
func (c *cursor) walk(todo []string, all, create bool) (string, experimentalsys.Errno) {
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		if name == ".." {
			if len(c.fds) == 1 {
				// Only a symlink's text can climb here: wazero cleans what the guest sends.
				c.escape = c.link
				return "", experimentalsys.EPERM
			}
			c.pop()
			continue
		}
		if len(todo) == 0 && !all {
			return name, 0
		}
		fd, err := unix.Openat(c.dir(), name, dirFlags, 0)
		// A folder made here can be removed again before it is opened; try a few times.
		for tries := 0; err == unix.ENOENT && create && tries < maxHops; tries++ {
			if err = unix.Mkdirat(c.dir(), name, 0o755); err == nil || err == unix.EEXIST {
				fd, err = unix.Openat(c.dir(), name, dirFlags, 0)
			}
		}
		if err == nil {
			if e := c.push(fd, name); e != 0 {
				return "", e
			}
			continue
		}
		if err == unix.ENOENT {
			c.rest = append([]string{name}, todo...)
		}
		if err != unix.ENOTDIR && err != unix.ELOOP {
			return "", errno(err)
		}
		target, isLink, e := readlinkAt(c.dir(), name)
		if e != 0 {
			return "", e
		}
		if !isLink {
			if !replaced(c.dir(), name, err) {
				return "", experimentalsys.ENOTDIR
			}
			// It was a symlink a moment ago: look again, within the bound.
			if c.hops++; c.hops > maxHops {
				return "", experimentalsys.ELOOP
			}
			todo = append([]string{name}, todo...)
			continue
		}
		more, e := c.expand(name, target)
		if e != 0 {
			return "", e
		}
		todo = append(more, todo...)
	}
	return ".", 0
}

// expand is one symlink hop: the components of target, which resolve from the link's folder.
func (c *cursor) expand(name, target string) ([]string, experimentalsys.Errno) {
	c.link = &symlinkHop{path: c.path(name), target: target}
	if c.hops++; c.hops > maxHops {
		return nil, experimentalsys.ELOOP
	}
	if path.IsAbs(target) {
		c.escape = c.link
		return nil, experimentalsys.EPERM
	}
	return split(target), 0
}

// follow expands name, a symlink in the cursor's folder whose text is target, and walks to the
// folder holding the last component of where it leads.
func (c *cursor) follow(name, target string) (string, experimentalsys.Errno) {
	more, e := c.expand(name, target)
	if e != 0 {
		return "", e
	}
	return c.walk(more, false, false)
}

// readlinkAt reads the symlink name in folder dir. A name that is not a symlink (or is
// missing) gives isLink false and no error.
func readlinkAt(dir int, name string) (target string, isLink bool, e experimentalsys.Errno) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dir, name, buf)
	switch {
	case err == unix.EINVAL || err == unix.ENOENT:
		return "", false, 0
	case err != nil:
		return "", false, errno(err)
	case n >= len(buf):
		return "", false, experimentalsys.ENAMETOOLONG
	}
	return string(buf[:n]), true, 0
}

// replaced reports whether name, which an O_NOFOLLOW open refused with err as if it were a
// symlink, and which readlink then found not to be one, was swapped meanwhile: ELOOP only comes
// from a symlink, and ENOTDIR only from a symlink or a file that is not a folder.
func replaced(dir int, name string, err error) bool {
	if err == unix.ELOOP {
		return true
	}
	var st unix.Stat_t
	if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return true // gone: look again, and report what is there then
	}
	return st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// at walks to the folder holding rel's last component and returns that component unwalked.
func (t *tree) at(rel string) (*cursor, string, experimentalsys.Errno) {
	c := t.begin()
	last, e := c.walk(split(rel), false, false)
	if e != 0 {
		c.close()
		return nil, "", e
	}
	return c, last, 0
}

// pinnedAt refuses to move or remove name, in the cursor's folder, when it is a read-only
// subtree or holds one. A missing name is left for the operation itself to report.
func (c *cursor) pinnedAt(name string) experimentalsys.Errno {
	if len(c.t.pinned) == 0 {
		return 0
	}
	var st unix.Stat_t
	if unix.Fstatat(c.dir(), name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return 0
	}
	if c.t.pinned[statID(&st)] {
		return experimentalsys.EROFS
	}
	return 0
}

// openDir opens folder rel below the tree's root, following symlinks only while they stay in
// the tree, and returns it held. With create, missing folders are made on the way; without,
// a missing folder gives the deepest one that exists and the components still to walk. A
// refusal because a symlink leads out of the tree comes with that symlink.
func (t *tree) openDir(rel string, create bool) (dir *os.File, missing []string, escape *symlinkHop, err error) {
	c := t.begin()
	defer c.close()
	if _, e := c.walk(split(rel), true, create); e != 0 {
		if e != experimentalsys.ENOENT || create || c.rest == nil {
			return nil, nil, c.escape, e
		}
		missing = c.rest
	}
	n := len(c.fds) - 1
	fd := c.fds[n]
	if n == 0 {
		if fd, err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0); err != nil {
			return nil, nil, nil, err
		}
	} else {
		c.fds = c.fds[:n] // the caller's now
		c.ids, c.names = c.ids[:n], c.names[:n]
	}
	return os.NewFile(uintptr(fd), path.Join(t.dir.Name(), rel)), missing, nil, nil
}
