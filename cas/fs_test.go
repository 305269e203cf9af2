//go:build linux

package cas

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/murmur-nexus/mur/internal/errs"
)

// mountTmpfs mounts a tmpfs of the given size on a fresh folder and unmounts it at cleanup. It
// needs root with mount rights; without them the test is skipped, or fails under CI=true.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		skipOrFail(t, "mounting a tmpfs needs root, and this runs as uid %d", os.Geteuid())
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		skipOrFail(t, "can't mount a tmpfs on %s (%v): this process has no mount rights, e.g. a container without CAP_SYS_ADMIN", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

func TestReadOnlyHome(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, "4m")
	root := filepath.Join(mnt, "cas")
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Ingest(ctx, strings.NewReader("before"), 6, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		skipOrFail(t, "can't remount %s read-only: %v", mnt, err)
	}

	// A read-only home still serves what it holds.
	s, err = Open(root)
	if err != nil {
		t.Fatalf("Open of a read-only store: %v", err)
	}
	if !s.Has(d) {
		t.Fatal("Has = false on a read-only store")
	}
	if err := s.Verify(ctx, d); err != nil {
		t.Fatalf("Verify on a read-only store: %v", err)
	}

	// Writes fail with errors that name the path.
	_, err = s.Ingest(ctx, strings.NewReader("after"), 5, "")
	assertPathError(t, "Ingest", err, filepath.Join(root, "ingest"), "read-only")
	err = s.AppendRecord(Record{Ref: "acme/x", Outcome: OutcomePulled})
	assertPathError(t, "AppendRecord", err, filepath.Join(root, "records"), "read-only")
	err = s.Touch(d)
	assertPathError(t, "Touch", err, filepath.Join(root, "uses"), "read-only")
	// No lease can be taken (a pull goes on without one: no gc can run here either), and
	// registering a root is quietly nothing.
	if _, err := s.NewLease(ctx); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("NewLease on a read-only store: %v, want EROFS", err)
	}
	if err := s.RegisterRoot(ctx, "/project/murmur.lock"); err != nil {
		t.Fatalf("RegisterRoot on a read-only store: %v", err)
	}
	_, err = Open(filepath.Join(mnt, "other"))
	assertPathError(t, "Open of a new store", err, filepath.Join(mnt, "other"), "")
}

func TestFullHome(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, "1m")
	s, err := Open(filepath.Join(mnt, "cas"))
	if err != nil {
		t.Fatal(err)
	}
	data := patternBytes(30, 2<<20)
	_, err = s.Ingest(ctx, bytes.NewReader(data), int64(len(data)), "")
	assertPathError(t, "Ingest", err, filepath.Join(s.Root(), "ingest"), "full")
	if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 0 {
		t.Fatalf("ingest/ holds %v after a failed ingest", names)
	}
	if names := dirNames(t, filepath.Join(s.Root(), "blobs", "sha256")); len(names) != 0 {
		t.Fatalf("blobs/sha256 holds %v after a failed ingest", names)
	}
	// The space comes back, and a small blob fits.
	if _, err := s.Ingest(ctx, strings.NewReader("small"), 5, ""); err != nil {
		t.Fatalf("ingest after a full disk: %v", err)
	}
}

func assertPathError(t *testing.T, op string, err error, path, hint string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded", op)
	}
	t.Logf("%s: %v", op, err)
	if !errors.Is(err, errs.IO) {
		t.Errorf("%s: err = %v, want an io error", op, err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("%s: error %q does not name %s", op, err, path)
	}
	if !strings.Contains(err.Error(), hint) {
		t.Errorf("%s: error %q does not say %q", op, err, hint)
	}
}
