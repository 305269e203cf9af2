package cas

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/murmur-nexus/mur/internal/safefile"
)

// Names in ingest/, roots/, leases/ and uses/ are opened with internal/safefile: never through
// a final symlink, never blocking on a FIFO, and only as a regular file with one link. Someone
// who can write those folders could otherwise plant a link at cas/ingest/resume-<hex> and have
// the blob written (and made read-only) through it outside the home, or a FIFO that hangs every
// pull and gc that opens it. What is found there instead of a file is moved aside into
// quarantine/, where gc removes it in time, rather than followed, blocked on or deleted through.

// moveAside renames whatever is at path into quarantine/, so that the name is free again. The
// rename moves the link or FIFO itself, never what a link points at.
func (s *Store) moveAside(path string) error {
	dst := filepath.Join(s.quarantine, fmt.Sprintf("aside-%s.%d", filepath.Base(path), time.Now().UnixNano()))
	if err := os.Rename(path, dst); err != nil && !errors.Is(err, os.ErrNotExist) {
		return pathErr(err, "moving aside what is not a file at", path)
	}
	return nil
}

// notRegular reports whether err is safefile's refusal of something that is not a plain file.
func notRegular(err error) bool { return errors.Is(err, safefile.ErrNotRegular) }

// sameName reports whether path still names the file f holds open, without following a link
// at path.
func sameName(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(path)
	return err == nil && os.SameFile(a, b)
}

// committedBlob reports whether final, just renamed from f's name, holds a blob: f itself, or
// the identical blob another process committed over it in the same instant (a regular file of
// the same size with one link). A link or a file that is also elsewhere (a hard link) is not.
func committedBlob(f *os.File, final string, size int64) bool {
	if sameName(f, final) {
		return true
	}
	fi, err := os.Lstat(final)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != size {
		return false
	}
	n, ok := safefile.Links(fi)
	return ok && n == 1
}
