//go:build unix

package cas

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/slowdown"
)

// hangGuard fails the test when fn has not returned long after any sane run would have: the
// hostile cases here block forever when a check is missing, so a wall bound is the only way to
// see them fail. It is generous, and no passing run comes near it.
func hangGuard(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(slowdown.Scale(60 * time.Second)):
		t.Fatalf("%s hung on a planted FIFO", what)
	}
}

// A local writer plants something at cas/ingest/resume-<hex> before a pull of that digest:
// whatever it is, the blob is never written through it, the thing planted is moved aside, and
// the pull still stores the blob.
func TestResumableMovesPlantedThingsAside(t *testing.T) {
	t.Parallel()
	plant := map[string]func(t *testing.T, p, outside string){
		"symlink":  func(t *testing.T, p, outside string) { must(t, os.Symlink(outside, p)) },
		"hardlink": func(t *testing.T, p, outside string) { must(t, os.Link(outside, p)) },
		"fifo":     func(t *testing.T, p, outside string) { must(t, syscall.Mkfifo(p, 0o600)) },
		"folder":   func(t *testing.T, p, outside string) { must(t, os.Mkdir(p, 0o700)) },
		"dangling": func(t *testing.T, p, outside string) { must(t, os.Symlink(outside+".new", p)) },
	}
	for name, plantAt := range plant {
		for _, where := range []string{"bytes", "record"} {
			t.Run(name+"/"+where, func(t *testing.T) {
				s := openStore(t)
				data := patternBytes(41, 200_000)
				info := resumeInfo(data)
				outside := filepath.Join(t.TempDir(), "victim")
				victim := []byte("the user's own file, outside the home\n")
				must(t, os.WriteFile(outside, victim, 0o644))
				p := filepath.Join(s.Root(), "ingest", "resume-"+info.Digest.Encoded())
				if where == "record" {
					p += resumeSuffix
				}
				plantAt(t, p, outside)

				hangGuard(t, "OpenResumable", func() {
					w, err := s.OpenResumable(ctx, info)
					if err != nil {
						t.Errorf("OpenResumable: %v", err)
						return
					}
					defer w.Close()
					w.Write(data)
					if _, err := w.Commit(ctx, info.Size, info.Digest); err != nil {
						t.Errorf("Commit: %v", err)
					}
				})
				if t.Failed() {
					return
				}
				got, err := os.ReadFile(outside)
				fi, serr := os.Stat(outside)
				if err != nil || !bytes.Equal(got, victim) || serr != nil || fi.Mode().Perm() != 0o644 {
					t.Fatalf("the file outside the home was written through: %d bytes, %v, mode %v", len(got), err, fi.Mode())
				}
				if _, err := os.Stat(outside + ".new"); err == nil {
					t.Fatal("a dangling symlink made mur create a file outside the home")
				}
				bi, err := os.Lstat(s.Path(info.Digest))
				if err != nil || !bi.Mode().IsRegular() || bi.Size() != info.Size {
					t.Fatalf("the blob is %v, %v; want a regular file of %d bytes", bi, err, info.Size)
				}
				if b, _ := os.ReadFile(s.Path(info.Digest)); !bytes.Equal(b, data) {
					t.Fatal("the blob does not hold the bytes written")
				}
				if !hasAside(t, s) && where == "bytes" {
					t.Fatalf("quarantine/ holds %v; the planted %s was not moved aside", dirNames(t, filepath.Join(s.Root(), "quarantine")), name)
				}
			})
		}
	}
}

func hasAside(t *testing.T, s *Store) bool {
	for _, n := range dirNames(t, filepath.Join(s.Root(), "quarantine")) {
		if strings.HasPrefix(n, "aside-") {
			return true
		}
	}
	return false
}

// FIFOs planted as a GC root, a lease and an ingest leftover never hang gc, which every pull
// would then wait behind.
func TestGCSurvivesPlantedFIFOs(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	must(t, os.MkdirAll(filepath.Join(s.Root(), "roots"), 0o700))
	must(t, os.MkdirAll(filepath.Join(s.Root(), "leases"), 0o700))
	root := filepath.Join(s.Root(), "roots", rootName("/nowhere/murmur.lock"))
	lease := filepath.Join(s.Root(), "leases", leasePrefix+"planted")
	ingest := filepath.Join(s.Root(), "ingest", ".mur-tmp-planted")
	for _, p := range []string{root, lease, ingest} {
		must(t, syscall.Mkfifo(p, 0o600))
		old := time.Now().Add(-time.Hour)
		must(t, os.Chtimes(p, old, old))
	}
	hangGuard(t, "gc", func() {
		if _, err := s.Roots(ctx, time.Now(), false); err != nil {
			t.Errorf("Roots: %v", err)
		}
		if _, err := s.GC(ctx, GCOptions{OlderThan: -1}); err != nil {
			t.Errorf("GC: %v", err)
		}
	})
	for _, p := range []string{root, lease, ingest} {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
			t.Errorf("the planted FIFO %s is still there after gc", p)
		}
	}
	must(t, syscall.Mkfifo(root, 0o600))
	hangGuard(t, "registering a root", func() {
		if err := s.RegisterRoot(ctx, "/nowhere/murmur.lock"); err != nil {
			t.Errorf("RegisterRoot: %v", err)
		}
	})
}

// A use marker planted as a dangling symlink is not followed to create a file outside.
func TestTouchNeverCreatesThroughALink(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	d, err := s.Ingest(ctx, bytes.NewReader([]byte("blob")), 4, "")
	must(t, err)
	marker := filepath.Join(s.Root(), "uses", d.Encoded())
	os.Remove(marker)
	outside := filepath.Join(t.TempDir(), "created")
	must(t, os.Symlink(outside, marker))
	s.Touch(d)
	if _, err := os.Lstat(outside); err == nil {
		t.Fatal("Touch created a file through a symlink planted in uses/")
	}
	// One that leads to an existing file does not change that file's times either.
	old := time.Now().Add(-48 * time.Hour).Truncate(time.Second)
	must(t, os.WriteFile(outside, nil, 0o600))
	must(t, os.Chtimes(outside, old, old))
	s.Touch(d)
	if fi, err := os.Stat(outside); err != nil || !fi.ModTime().Equal(old) {
		t.Fatalf("Touch changed the times of a file outside the home through a symlink: %v, %v", fi.ModTime(), err)
	}
}

// A link swapped in at the ingest's name after it was opened is never committed as the blob.
func TestCommitRefusesANameSwappedMidIngest(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(43, 100_000)
	info := resumeInfo(data)
	w, err := s.OpenResumable(ctx, info)
	must(t, err)
	defer w.Close()
	w.Write(data)
	outside := filepath.Join(t.TempDir(), "victim")
	must(t, os.WriteFile(outside, data, 0o644))
	p := filepath.Join(s.Root(), "ingest", "resume-"+info.Digest.Encoded())
	must(t, os.Rename(p, p+".elsewhere"))
	must(t, os.Symlink(outside, p))
	if _, err := w.Commit(ctx, info.Size, info.Digest); err == nil {
		t.Fatal("Commit succeeded with a symlink at the ingest's name")
	}
	if fi, err := os.Lstat(s.Path(info.Digest)); err == nil {
		t.Fatalf("the store holds %v at the blob's name", fi.Mode())
	}
	if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link planted at the ingest's name was moved (%v); Commit renamed it", err)
	}
}

// The same swap, in the instant between Commit's check and its rename (the rename step is the
// seam), leaves nothing at the blob's name either.
func TestCommitRefusesANameSwappedAtTheRename(t *testing.T) {
	t.Parallel()
	for _, link := range []func(string, string) error{os.Symlink, os.Link} {
		commitSwappedAtTheRename(t, link)
	}
}

func commitSwappedAtTheRename(t *testing.T, link func(oldname, newname string) error) {
	s := openStore(t)
	data := patternBytes(44, 100_000)
	info := resumeInfo(data)
	// The same bytes, so that only the link gives the swap away.
	outside := filepath.Join(t.TempDir(), "victim")
	must(t, os.WriteFile(outside, data, 0o644))
	s.durability.Rename = func(oldpath, newpath string) error {
		must(t, os.Rename(oldpath, oldpath+".elsewhere"))
		must(t, link(outside, oldpath))
		return os.Rename(oldpath, newpath)
	}
	w, err := s.OpenResumable(ctx, info)
	must(t, err)
	defer w.Close()
	w.Write(data)
	if _, err := w.Commit(ctx, info.Size, info.Digest); err == nil {
		t.Fatal("Commit succeeded with a link renamed to the blob's name")
	}
	if fi, err := os.Lstat(s.Path(info.Digest)); err == nil {
		t.Fatalf("the store holds %v at the blob's name", fi.Mode())
	}
}
