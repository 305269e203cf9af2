package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sys/unix"

	"github.com/murmur-nexus/mur/state"
)

// rootFS is the guest's one file system, preopened at "/".
//
// It is made of folders the plan opened and checked once, and it holds them open: no host path
// is ever looked up again. Every guest path is walked one component at a time from a held
// folder, with O_NOFOLLOW; rootFS expands symlinks itself, only while they stay inside their
// tree, and each operation acts relative to the folder the walk holds at its end. So what is
// checked is what is used: the read-only decision is made on the folders really walked through,
// and a name that another guest swaps for a symlink between two steps is either walked (and
// judged) like any symlink or refused, never followed by the kernel behind mur's back.
// (wazero's own DirFS lets the kernel follow symlinks, so a symlink in the folder leads
// anywhere: wazero issue 2321.)
//
// rootFS also routes: a first component named state (state.GuestDir) leads into the state store
// when one is granted. It matches whole components, never string prefixes, so "stateful.txt",
// "stateX.txt" and "state-notes" stay in the workdir. With one preopen, Go guests (which pick
// among several preopens by string prefix) and wasi-libc guests send the same cleaned path, so
// both reach the store by writing state/<file>.
//
// It refuses to create symlinks and hard links (a guest-made link is either an escape or a way
// around a read-only subtree), every change inside a read-only tree or subtree, and every move
// or removal of a read-only subtree or of a folder that holds one.
type rootFS struct {
	experimentalsys.UnimplementedFS
	work  *tree
	state *tree // nil when no state store is granted
}

// newRootFS takes ownership of root (the scope root), the read-only subtrees and store (nil when
// no state store is granted); see newTree for how the subtrees are judged.
func newRootFS(root *os.File, readOnly bool, subtrees []*os.File, store *os.File) (*rootFS, error) {
	work, err := newTree(root, readOnly, subtrees)
	if err != nil {
		if store != nil {
			store.Close()
		}
		return nil, err
	}
	r := &rootFS{work: work}
	if store != nil {
		if r.state, err = newTree(store, false, nil); err != nil {
			work.close()
			return nil, err
		}
	}
	return r, nil
}

// Close releases the held folders. Files the guest opened stay usable until it closes them.
func (r *rootFS) Close() error {
	r.work.close()
	if r.state != nil {
		r.state.close()
	}
	return nil
}

// String names the host folder, for wazero's debug output.
func (r *rootFS) String() string { return r.work.dir.Name() }

// route picks the tree guest path p lives in and the path inside it. wazero hands over cleaned
// paths ("state/x"), or a folder's name joined to one ("/x", "state/."), and keeps a trailing
// slash, which asks for a folder (dirOnly). storeRoot is p naming the state store's own folder,
// which, like a mount point, can't be moved or removed.
func (r *rootFS) route(p string) (t *tree, rel string, dirOnly, storeRoot bool) {
	dirOnly = strings.HasSuffix(p, "/") && strings.Trim(p, "/") != ""
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if r.state != nil {
		if first, rest, _ := strings.Cut(p, "/"); first == state.GuestDir {
			return r.state, rest, dirOnly, rest == ""
		}
	}
	return r.work, p, dirOnly, false
}

// OpenFile implements experimentalsys.FS.
func (r *rootFS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	t, rel, dirOnly, _ := r.route(p)
	return t.open(rel, dirOnly, flag, perm)
}

// Lstat implements experimentalsys.FS.
func (r *rootFS) Lstat(p string) (sys.Stat_t, experimentalsys.Errno) {
	t, rel, dirOnly, _ := r.route(p)
	if dirOnly {
		return t.stat(rel, true)
	}
	return t.lstat(rel)
}

// Stat implements experimentalsys.FS.
func (r *rootFS) Stat(p string) (sys.Stat_t, experimentalsys.Errno) {
	t, rel, dirOnly, _ := r.route(p)
	return t.stat(rel, dirOnly)
}

// Mkdir implements experimentalsys.FS.
func (r *rootFS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	t, rel, _, _ := r.route(p)
	return t.mkdir(rel, perm)
}

// Chmod implements experimentalsys.FS. The store's own folder stays 0700.
func (r *rootFS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	t, rel, _, storeRoot := r.route(p)
	if storeRoot {
		return experimentalsys.EPERM
	}
	return t.chmod(rel, perm)
}

// Rename implements experimentalsys.FS. A rename between the workdir and the state store is
// refused with ENOSYS, as wazero refuses one between two preopens.
func (r *rootFS) Rename(from, to string) experimentalsys.Errno {
	tf, relFrom, _, storeFrom := r.route(from)
	tt, relTo, _, storeTo := r.route(to)
	switch {
	case storeFrom || storeTo:
		return experimentalsys.EPERM
	case tf != tt:
		return experimentalsys.ENOSYS
	}
	return tf.rename(relFrom, relTo)
}

// Rmdir implements experimentalsys.FS.
func (r *rootFS) Rmdir(p string) experimentalsys.Errno {
	t, rel, _, storeRoot := r.route(p)
	if storeRoot {
		return experimentalsys.EPERM
	}
	return t.rmdir(rel)
}

// Unlink implements experimentalsys.FS.
func (r *rootFS) Unlink(p string) experimentalsys.Errno {
	t, rel, _, _ := r.route(p)
	return t.unlink(rel)
}

// Link implements experimentalsys.FS and always refuses: a hard link to a file the guest can
// read but not write would hand it a writable name for that file.
func (r *rootFS) Link(string, string) experimentalsys.Errno { return experimentalsys.EPERM }

// Symlink implements experimentalsys.FS and always refuses: a guest-made symlink is the classic
// way out of a directory sandbox, and nothing a capsule needs depends on making one.
func (r *rootFS) Symlink(string, string) experimentalsys.Errno { return experimentalsys.EPERM }

// Readlink implements experimentalsys.FS. Reading a link's text is harmless: following it is
// what rootFS confines.
func (r *rootFS) Readlink(p string) (string, experimentalsys.Errno) {
	t, rel, _, _ := r.route(p)
	return t.readlink(rel)
}

// Utimens implements experimentalsys.FS.
func (r *rootFS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	t, rel, _, _ := r.route(p)
	return t.utimens(rel, atim, mtim)
}

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

// node opens rel's last component as an O_PATH descriptor, which can name any file without
// reading it, following it while it is a symlink when follow is set. The caller closes the
// cursor and fd.
func (t *tree) node(rel string, follow bool) (*cursor, int, unix.Stat_t, experimentalsys.Errno) {
	var st unix.Stat_t
	c, last, e := t.at(rel)
	if e != 0 {
		return nil, -1, st, e
	}
	for {
		fd, err := unix.Openat(c.dir(), last, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			c.close()
			return nil, -1, st, errno(err)
		}
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			c.close()
			return nil, -1, st, errno(err)
		}
		if !follow || st.Mode&unix.S_IFMT != unix.S_IFLNK {
			return c, fd, st, 0
		}
		unix.Close(fd)
		target, isLink, e := readlinkAt(c.dir(), last)
		if e == 0 && !isLink {
			// Replaced since: look again, within the bound.
			if c.hops++; c.hops > maxHops {
				e = experimentalsys.ELOOP
			}
			if e == 0 {
				continue
			}
		}
		if e == 0 {
			last, e = c.follow(last, target)
		}
		if e != 0 {
			c.close()
			return nil, -1, st, e
		}
	}
}

// procPath names the file an O_PATH descriptor holds, for the calls (chmod, utimensat) that
// take no such descriptor; the kernel resolves it to that very file, not by its path.
func procPath(fd int) string { return fmt.Sprintf("/proc/self/fd/%d", fd) }

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

var openFlags = []struct {
	wasi experimentalsys.Oflag
	os   int
}{
	{experimentalsys.O_APPEND, unix.O_APPEND},
	{experimentalsys.O_CREAT, unix.O_CREAT},
	{experimentalsys.O_EXCL, unix.O_EXCL},
	{experimentalsys.O_TRUNC, unix.O_TRUNC},
	{experimentalsys.O_SYNC, unix.O_SYNC},
	{experimentalsys.O_DIRECTORY, unix.O_DIRECTORY},
}

func (t *tree) open(rel string, dirOnly bool, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	writes := flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR) != 0 || flag&(experimentalsys.O_CREAT|experimentalsys.O_TRUNC) != 0
	var osFlag int
	switch {
	case flag&experimentalsys.O_RDWR != 0:
		osFlag = unix.O_RDWR
	case flag&experimentalsys.O_WRONLY != 0:
		osFlag = unix.O_WRONLY
	default:
		osFlag = unix.O_RDONLY
	}
	for _, m := range openFlags {
		if flag&m.wasi != 0 {
			osFlag |= m.os
		}
	}
	if dirOnly {
		osFlag |= unix.O_DIRECTORY
	}
	if osFlag&unix.O_DIRECTORY != 0 && writes {
		return nil, experimentalsys.EISDIR
	}
	// The kernel never follows the last component: a symlink there is expanded below, so that
	// it is judged like any other step.
	osFlag |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	follow := flag&experimentalsys.O_NOFOLLOW == 0
	notFound := func(e experimentalsys.Errno) experimentalsys.Errno {
		if e == experimentalsys.ENOTDIR && flag&experimentalsys.O_DIRECTORY == 0 {
			return experimentalsys.ENOENT
		}
		return e
	}

	c, last, e := t.at(rel)
	if e != 0 {
		return nil, notFound(e)
	}
	defer c.close()
	for {
		ro := c.readOnly()
		if ro && writes {
			return nil, experimentalsys.EROFS
		}
		fd, err := unix.Openat(c.dir(), last, osFlag, uint32(perm.Perm()))
		if err == nil {
			if !ro && len(t.roRoots) > 0 {
				// A read-only subtree's own folder, opened for reading.
				if id, err := fdID(fd); err == nil && t.roRoots[id] {
					ro = true
				}
			}
			return &rootFile{file: os.NewFile(uintptr(fd), rel), append: flag&experimentalsys.O_APPEND != 0, readOnly: ro}, 0
		}
		maybeLink := err == unix.ELOOP || err == unix.ENOTDIR && osFlag&unix.O_DIRECTORY != 0
		if !follow || !maybeLink {
			return nil, notFound(errno(err))
		}
		target, isLink, e := readlinkAt(c.dir(), last)
		switch {
		case e != 0:
			return nil, e
		case isLink:
			if last, e = c.follow(last, target); e != 0 {
				return nil, notFound(e)
			}
		case replaced(c.dir(), last, err):
			// It was a symlink a moment ago: look again, within the bound.
			if c.hops++; c.hops > maxHops {
				return nil, experimentalsys.ELOOP
			}
		default:
			return nil, notFound(errno(err))
		}
	}
}

func (t *tree) lstat(rel string) (sys.Stat_t, experimentalsys.Errno) {
	c, last, e := t.at(rel)
	if e != 0 {
		return sys.Stat_t{}, e
	}
	defer c.close()
	var st unix.Stat_t
	if err := unix.Fstatat(c.dir(), last, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return statOf(&st), 0
}

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

func (t *tree) mkdir(rel string, perm fs.FileMode) experimentalsys.Errno {
	c, last, e := t.at(rel)
	if e == 0 {
		defer c.close()
		switch {
		case last == ".":
			e = experimentalsys.EEXIST
		case c.readOnly():
			e = experimentalsys.EROFS
		default:
			e = errno(unix.Mkdirat(c.dir(), last, uint32(perm.Perm())))
		}
	}
	if e == experimentalsys.ENOTDIR {
		e = experimentalsys.ENOENT
	}
	return e
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

func (t *tree) rename(from, to string) experimentalsys.Errno {
	cf, lf, e := t.at(from)
	if e != 0 {
		return e
	}
	defer cf.close()
	ct, lt, e := t.at(to)
	if e != 0 {
		return e
	}
	defer ct.close()
	if cf.readOnly() || ct.readOnly() {
		return experimentalsys.EROFS
	}
	if e := cf.pinnedAt(lf); e != 0 {
		return e
	}
	if e := ct.pinnedAt(lt); e != 0 {
		return e
	}
	return errno(unix.Renameat(cf.dir(), lf, ct.dir(), lt))
}

func (t *tree) rmdir(rel string) experimentalsys.Errno {
	c, last, e := t.at(rel)
	if e != 0 {
		return e
	}
	defer c.close()
	if c.readOnly() {
		return experimentalsys.EROFS
	}
	if e := c.pinnedAt(last); e != 0 {
		return e
	}
	var st unix.Stat_t
	if err := unix.Fstatat(c.dir(), last, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return errno(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return experimentalsys.ENOTDIR
	}
	return errno(unix.Unlinkat(c.dir(), last, unix.AT_REMOVEDIR))
}

func (t *tree) unlink(rel string) experimentalsys.Errno {
	c, last, e := t.at(rel)
	if e != 0 {
		return e
	}
	defer c.close()
	if c.readOnly() {
		return experimentalsys.EROFS
	}
	return errno(unix.Unlinkat(c.dir(), last, 0))
}

func (t *tree) readlink(rel string) (string, experimentalsys.Errno) {
	c, last, e := t.at(rel)
	if e != 0 {
		return "", e
	}
	defer c.close()
	target, isLink, e := readlinkAt(c.dir(), last)
	switch {
	case e != 0:
		return "", e
	case !isLink:
		var st unix.Stat_t
		if err := unix.Fstatat(c.dir(), last, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return "", errno(err)
		}
		return "", experimentalsys.EINVAL
	}
	return target, 0
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

// statOf is a stat result as wazero wants it, with Go's file mode bits.
func statOf(st *unix.Stat_t) sys.Stat_t {
	mode := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	}
	if st.Mode&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if st.Mode&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if st.Mode&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return sys.Stat_t{
		Dev: uint64(st.Dev), Ino: st.Ino, Mode: mode, Nlink: uint64(st.Nlink), Size: st.Size,
		Atim: st.Atim.Nano(), Mtim: st.Mtim.Nano(), Ctim: st.Ctim.Nano(),
	}
}

// errno turns an error into a WASI errno. A path that would leave the root is EPERM, as for
// any refused path.
func errno(err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	var se syscall.Errno
	if errors.As(err, &se) && se == syscall.EXDEV {
		return experimentalsys.EPERM
	}
	return experimentalsys.UnwrapOSError(err)
}

// rootFile is an open file of a rootFS.
type rootFile = osFile[int64]

// osFile is generic only over its offset type: WASI's Seek returns an Errno where io.Seeker
// returns an error, and vet's stdmethods check flags any Seek(int64, int) that differs from
// io.Seeker. Declaring the offset as a type parameter keeps that check quiet without a vet flag.
type osFile[Off ~int64] struct {
	experimentalsys.UnimplementedFile
	file     *os.File
	append   bool
	readOnly bool
	closed   bool
	statDone bool
	dev      uint64
	ino      sys.Inode
	isDir    bool
}

func (f *osFile[Off]) cached() experimentalsys.Errno {
	if f.statDone {
		return 0
	}
	_, e := f.Stat()
	return e
}

func (f *osFile[Off]) Dev() (uint64, experimentalsys.Errno) {
	e := f.cached()
	return f.dev, e
}

func (f *osFile[Off]) Ino() (sys.Inode, experimentalsys.Errno) {
	e := f.cached()
	return f.ino, e
}

func (f *osFile[Off]) IsDir() (bool, experimentalsys.Errno) {
	e := f.cached()
	return f.isDir, e
}

func (f *osFile[Off]) IsAppend() bool { return f.append }

func (f *osFile[Off]) SetAppend(enable bool) experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	if enable && f.readOnly {
		return experimentalsys.EROFS
	}
	rc, err := f.file.SyscallConn()
	if err != nil {
		return errno(err)
	}
	var opErr error
	err = rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if err != nil {
			opErr = err
			return
		}
		if enable {
			fl |= unix.O_APPEND
		} else {
			fl &^= unix.O_APPEND
		}
		_, opErr = unix.FcntlInt(fd, unix.F_SETFL, fl)
	})
	if err == nil {
		err = opErr
	}
	if err != nil {
		return errno(err)
	}
	f.append = enable
	return 0
}

func (f *osFile[Off]) Stat() (sys.Stat_t, experimentalsys.Errno) {
	if f.closed {
		return sys.Stat_t{}, experimentalsys.EBADF
	}
	fi, err := f.file.Stat()
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	st := sys.NewStat_t(fi)
	f.dev, f.ino, f.isDir, f.statDone = st.Dev, st.Ino, fi.IsDir(), true
	return st, 0
}

func (f *osFile[Off]) Read(buf []byte) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.file.Read(buf)
	if err == io.EOF {
		err = nil
	}
	return n, f.fileErrno(err)
}

func (f *osFile[Off]) Pread(buf []byte, off int64) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.file.ReadAt(buf, off)
	if err == io.EOF {
		err = nil
	}
	return n, f.fileErrno(err)
}

func (f *osFile[Off]) Seek(offset Off, whence int) (int64, experimentalsys.Errno) {
	n, err := f.file.Seek(int64(offset), whence)
	return n, f.fileErrno(err)
}

func (f *osFile[Off]) Readdir(n int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	if f.closed {
		return nil, experimentalsys.EBADF
	}
	fis, err := f.file.Readdir(n)
	if err == io.EOF {
		err = nil
	}
	if err != nil {
		return nil, f.fileErrno(err)
	}
	out := make([]experimentalsys.Dirent, 0, len(fis))
	for _, fi := range fis {
		out = append(out, experimentalsys.Dirent{Name: fi.Name(), Ino: sys.NewStat_t(fi).Ino, Type: fi.Mode().Type()})
	}
	return out, 0
}

func (f *osFile[Off]) Write(buf []byte) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.file.Write(buf)
	return n, f.fileErrno(err)
}

func (f *osFile[Off]) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.file.WriteAt(buf, off)
	return n, f.fileErrno(err)
}

func (f *osFile[Off]) Truncate(size int64) experimentalsys.Errno {
	if size < 0 {
		return experimentalsys.EINVAL
	}
	if f.readOnly {
		return experimentalsys.EROFS
	}
	return f.fileErrno(f.file.Truncate(size))
}

func (f *osFile[Off]) Sync() experimentalsys.Errno { return f.fileErrno(f.file.Sync()) }

func (f *osFile[Off]) Datasync() experimentalsys.Errno { return f.fileErrno(f.file.Sync()) }

// Utimens sets times through the descriptor. A file opened for reading inside a read-only
// subtree must not have them changed either.
func (f *osFile[Off]) Utimens(atim, mtim int64) experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	if f.readOnly {
		return experimentalsys.EROFS
	}
	if atim == experimentalsys.UTIME_OMIT && mtim == experimentalsys.UTIME_OMIT {
		return 0
	}
	if atim == experimentalsys.UTIME_OMIT || mtim == experimentalsys.UTIME_OMIT {
		st, e := f.Stat()
		if e != 0 {
			return e
		}
		if atim == experimentalsys.UTIME_OMIT {
			atim = st.Atim
		}
		if mtim == experimentalsys.UTIME_OMIT {
			mtim = st.Mtim
		}
	}
	rc, err := f.file.SyscallConn()
	if err != nil {
		return errno(err)
	}
	var opErr error
	err = rc.Control(func(fd uintptr) {
		tv := []unix.Timeval{unix.NsecToTimeval(atim), unix.NsecToTimeval(mtim)}
		opErr = unix.Futimes(int(fd), tv)
	})
	if err == nil {
		err = opErr
	}
	return errno(err)
}

func (f *osFile[Off]) Close() experimentalsys.Errno {
	if f.closed {
		return 0
	}
	f.closed = true
	return errno(f.file.Close())
}

func (f *osFile[Off]) fileErrno(err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	if f.closed || errors.Is(err, os.ErrClosed) {
		return experimentalsys.EBADF
	}
	return errno(err)
}
