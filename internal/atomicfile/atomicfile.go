// Package atomicfile is the one way mur writes a file that matters: blobs, the lock, murmur.yaml,
// layouts, GC roots and kept payloads. A file appears at its final name whole or not at all. Two
// writers go another way on purpose: the pull records are appended (cas/records.go), and tools/
// is a derived view, written without fsync and swapped in a folder at a time (fetch/stage.go).
//
// The sequence is the classic one (temporary file, fsync, rename, fsync of the folder), with one
// twist taken from containerd's content store: the temporary file may live in another folder of
// the same file system, so that in-flight ingests sit in cas/ingest/ and are never mistaken for
// blobs, and so that `mur cache gc` can find leftovers of killed processes in one place.
package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// TempPrefix starts the name of every temporary file, so that leftovers are recognisable.
const TempPrefix = ".mur-tmp-"

// Durability is the three steps that make a write survive a power cut, in the order Commit
// takes them: fsync the temporary file, rename it to its final name, fsync the folder. A rename
// before the file's fsync can leave an empty file at the final name after a crash; no folder fsync
// can lose the rename. Its zero value is the real system calls. It exists as a seam: a test
// replaces a step to record the order, or to make it fail, which no real file system lets it do
// on demand.
type Durability struct {
	Sync    func(f *os.File) error
	Rename  func(oldpath, newpath string) error
	SyncDir func(dir string) error
}

func (d Durability) sync(f *os.File) error {
	if d.Sync != nil {
		return d.Sync(f)
	}
	return f.Sync()
}

func (d Durability) rename(oldpath, newpath string) error {
	if d.Rename != nil {
		return d.Rename(oldpath, newpath)
	}
	return os.Rename(oldpath, newpath)
}

func (d Durability) syncDir(dir string) error {
	if d.SyncDir != nil {
		return d.SyncDir(dir)
	}
	return SyncDir(dir)
}

// SyncFile, RenameFile and SyncFolder are the three steps one at a time, for a caller that
// batches them (the CAS syncs many files in parallel, renames them, then syncs their folder once).
func (d Durability) SyncFile(f *os.File) error                { return d.sync(f) }
func (d Durability) RenameFile(oldpath, newpath string) error { return d.rename(oldpath, newpath) }
func (d Durability) SyncFolder(dir string) error              { return d.syncDir(dir) }

// Publish makes the temporary file f, already written and closed or not, durable and visible at
// final: fsync, rename, fsync of final's folder, in that order. It is Commit's sequence for a
// caller that manages the temporary file itself (the CAS, whose final name is known only once the
// bytes are hashed). f is not closed; on failure the temporary file is left to the caller.
func (d Durability) Publish(f *os.File, final string) error {
	if err := d.sync(f); err != nil {
		return err
	}
	if err := d.rename(f.Name(), final); err != nil {
		return err
	}
	return d.syncDir(filepath.Dir(final))
}

// File is a temporary file that becomes Final on Commit.
type File struct {
	*os.File
	final string
	perm  os.FileMode
	done  bool
	ops   Durability
}

// Create opens a temporary file in tmpDir that Commit will rename to final. tmpDir must be on the
// same file system as final; an empty tmpDir means final's own folder.
func Create(tmpDir, final string, perm os.FileMode) (*File, error) {
	if tmpDir == "" {
		tmpDir = filepath.Dir(final)
	}
	f, err := os.CreateTemp(tmpDir, TempPrefix+filepath.Base(final)+"-*")
	if err != nil {
		return nil, err
	}
	return &File{File: f, final: final, perm: perm}, nil
}

// Commit makes the written bytes durable and visible at the final name. On any failure the
// temporary file is removed and the final name is untouched.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("atomicfile: %s already committed or aborted", f.final)
	}
	f.done = true
	tmp := f.Name()
	fail := func(err error) error {
		f.File.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.ops.sync(f.File); err != nil {
		return fail(err)
	}
	if err := f.Chmod(f.perm); err != nil {
		return fail(err)
	}
	if err := f.File.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := f.ops.rename(tmp, f.final); err != nil {
		os.Remove(tmp)
		return err
	}
	return f.ops.syncDir(filepath.Dir(f.final))
}

// Abort removes the temporary file. It is safe to call after Commit, so callers can defer it.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.File.Close()
	os.Remove(f.Name())
}

// WriteFile writes data to path atomically, with the temporary file beside it.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := Create("", path, perm)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Commit()
}

// WriteCache writes data to path whole or not at all, without making it durable: for a file
// derived from verified bytes that its reader checks again (a kept payload, checked against its
// zip's CRC-32), which a power cut may lose or leave short but never half-replaced by another.
// Two fsyncs would cost a cold run more than writing the file does.
func WriteCache(path string, data []byte, perm os.FileMode) error {
	return WriteCacheFrom(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteCacheFrom is WriteCache of what write writes, for content too large to hold in memory
// first; an error from write leaves nothing behind.
func WriteCacheFrom(path string, perm os.FileMode, write func(w io.Writer) error) error {
	f, err := Create("", path, perm)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := write(f); err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if err := f.File.Close(); err != nil {
		return err
	}
	f.done = true
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// SyncDir fsyncs a folder, so that a rename into it survives a power cut.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
