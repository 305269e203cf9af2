//go:build unix

package sandbox

import (
	"io/fs"
	"sync/atomic"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// A guest's state store is on the home's disk, so what it may keep there is bounded
// (limits.state_mib): every write that would grow the store's files past the quota fails with
// EIO, as a full disk does, before a byte is written. Files are charged by their size, so a
// sparse file costs what it claims, and a file under several names (hard links) costs its size
// once, as the disk holds it once. Shrinking and removing files gives the bytes back; dropping
// one name of a file that has another gives nothing back, as the data stays. The count starts
// from what the store holds when the run begins.
// errQuota is what a write past the quota gets. WASI's errno list (as wazero carries it) has no
// ENOSPC, and a full disk reaches a guest as EIO too.
const errQuota = experimentalsys.EIO

type quota struct {
	limit int64
	used  atomic.Int64
}

// grow charges n more bytes, refusing when they would pass the limit.
func (q *quota) grow(n int64) bool {
	if q == nil || n <= 0 {
		return true
	}
	for {
		used := q.used.Load()
		if used+n > q.limit {
			return false
		}
		if q.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// shrink gives n bytes back.
func (q *quota) shrink(n int64) {
	if q != nil && n > 0 {
		q.used.Add(-n)
	}
}

// charge readies a write of n bytes at off (off < 0: at the file's offset, or its end when
// appending) to f: it charges what the file grows by and returns what to refund when fewer bytes
// are written.
func (f *osFile[Off]) charge(n int, off int64) (int64, experimentalsys.Errno) {
	if f.quota == nil {
		return 0, 0
	}
	fi, err := f.file.Stat()
	if err != nil {
		return 0, errno(err)
	}
	if off < 0 {
		off = fi.Size()
		if !f.append {
			if off, err = f.file.Seek(0, 1); err != nil {
				return 0, errno(err)
			}
		}
	}
	growth := off + int64(n) - fi.Size()
	if !f.quota.grow(growth) {
		return 0, errQuota
	}
	return max(growth, 0), 0
}

// refund gives back what a short write did not use of what charge took.
func (f *osFile[Off]) refund(charged int64, want, wrote int) {
	if charged > 0 && wrote < want {
		f.quota.shrink(min(charged, int64(want-wrote)))
	}
}

// freedBy is what removing or replacing the file at rel gives back to t's quota: its size when
// it is a regular file with one link, else 0. It is 0 outside the state store.
func (t *tree) freedBy(rel string) int64 {
	if t.quota == nil {
		return 0
	}
	st, e := t.lstat(rel)
	if e != 0 || st.Mode&fs.ModeType != 0 || st.Nlink != 1 {
		return 0
	}
	return st.Size
}
