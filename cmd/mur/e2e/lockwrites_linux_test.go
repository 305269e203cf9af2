//go:build linux

package e2e

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/lock"
)

// lockWatch counts the writes of murmur.lock in one project folder while commands run, exactly,
// through inotify: the kernel queues an event as each rename onto the name (how the lock is
// replaced, atomically) or each close of it opened for writing (a write in place) happens, before
// the call returns, and never merges two renames (each carries its own cookie). Read once the
// command has exited, the queue holds every write it made; a queue that overflowed fails the
// benchmark rather than undercount.
type lockWatch struct {
	tb testing.TB
	fd int
}

// watchLock starts counting the writes of project's murmur.lock.
func watchLock(tb testing.TB, project string) *lockWatch {
	tb.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		tb.Fatalf("inotify: %v", err)
	}
	if _, err := syscall.InotifyAddWatch(fd, project, syscall.IN_MOVED_TO|syscall.IN_CLOSE_WRITE); err != nil {
		syscall.Close(fd)
		tb.Fatalf("watching %s: %v", project, err)
	}
	return &lockWatch{tb: tb, fd: fd}
}

// writes stops the watch and returns how many times murmur.lock was written since it began.
func (w *lockWatch) writes() int {
	defer syscall.Close(w.fd)
	buf := make([]byte, 64<<10)
	n := 0
	for {
		k, err := syscall.Read(w.fd, buf)
		if errors.Is(err, syscall.EAGAIN) {
			return n
		}
		if err != nil {
			w.tb.Fatalf("reading inotify events: %v", err)
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= k; {
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			size := int(binary.NativeEndian.Uint32(buf[off+12:]))
			name := bytes.TrimRight(buf[off+syscall.SizeofInotifyEvent:off+syscall.SizeofInotifyEvent+size], "\x00")
			if mask&syscall.IN_Q_OVERFLOW != 0 {
				w.tb.Fatal("the inotify queue overflowed: murmur.lock's writes can't be counted")
			}
			if string(name) == lock.FileName {
				n++
			}
			off += syscall.SizeofInotifyEvent + size
		}
	}
}

// TestLockWatchCountsWrites: the lock-write column of the bench counts every write of murmur.lock,
// atomic (rename onto it) or in place, and nothing else: not a read of it, not the temporary file
// an atomic write goes through, not another file in the folder.
func TestLockWatchCountsWrites(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, lock.FileName)
	lw := watchLock(t, dir)
	for i := 0; i < 3; i++ {
		if err := atomicfile.WriteFile(p, []byte(fmt.Sprintf("lock_version: 3 # %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(p, []byte("lock_version: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(p); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte("name: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "murmur.lock.bak"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := lw.writes(); n != 4 {
		t.Errorf("counted %d writes of murmur.lock, want 4 (3 atomic, 1 in place)", n)
	}
}
