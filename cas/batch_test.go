package cas

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/atomicfile"
)

// A batch makes every blob durable before any becomes visible, and names them all durably with
// one fsync of blobs/: sync, sync, sync, then rename, rename, rename, then one syncdir. A blob
// written to after its sync is synced again before its rename.
func TestBatchSyncsAllThenRenamesThenSyncsTheFolderOnce(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	var mu sync.Mutex
	var steps []string
	visible := func() int {
		n := 0
		for _, c := range []string{"one", "two", "three"} {
			if _, err := os.Stat(s.Path(digest.FromString(c))); err == nil {
				n++
			}
		}
		return n
	}
	step := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		steps = append(steps, strings.TrimSpace(fmt.Sprintln(append([]any{format}, args...)...)))
	}
	s.durability = atomicfile.Durability{
		Sync: func(f *os.File) error {
			step("sync", filepath.Base(filepath.Dir(f.Name())), "visible", visible())
			return f.Sync()
		},
		Rename: func(oldpath, newpath string) error {
			step("rename", filepath.Base(filepath.Dir(oldpath)), "->", filepath.Base(filepath.Dir(newpath)))
			return os.Rename(oldpath, newpath)
		},
		SyncDir: func(dir string) error {
			step("syncdir", filepath.Base(dir), "visible", visible())
			return atomicfile.SyncDir(dir)
		},
	}
	var ws []*Writer
	var commits []Commit
	for _, c := range []string{"one", "two", "thr"} {
		w, err := s.NewWriter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		w.Write([]byte(c))
		ws = append(ws, w)
	}
	for i, err := range SyncAll(ws) {
		if err != nil {
			t.Fatalf("SyncAll[%d]: %v", i, err)
		}
	}
	ws[2].Write([]byte("ee")) // grew after its sync
	for i, c := range []string{"one", "two", "three"} {
		commits = append(commits, Commit{Writer: ws[i], Size: int64(len(c)), Want: digest.FromString(c)})
	}
	for i, err := range s.CommitAll(ctx, commits) {
		if err != nil {
			t.Fatalf("CommitAll[%d]: %v", i, err)
		}
	}
	want := []string{
		"sync ingest visible 0", "sync ingest visible 0", "sync ingest visible 0",
		"sync ingest visible 0", // the one that grew, again
		"rename ingest -> sha256", "rename ingest -> sha256", "rename ingest -> sha256",
		"syncdir sha256 visible 3",
	}
	// The three first syncs run side by side; the fourth comes within CommitAll, before the
	// renames.
	if !reflect.DeepEqual(steps, want) {
		t.Fatalf("the batch took the steps\n  %s\nwant\n  %s", strings.Join(steps, "\n  "), strings.Join(want, "\n  "))
	}
	for _, c := range []string{"one", "two", "three"} {
		if err := s.Verify(ctx, digest.FromString(c)); err != nil {
			t.Fatal(err)
		}
	}
}

// A failed sync is that ingest's error alone; one that does not match its digest is not renamed,
// and the others are committed.
func TestBatchFailuresStayTheirOwn(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	s.durability = atomicfile.Durability{Sync: func(f *os.File) error {
		b, _ := os.ReadFile(f.Name())
		if string(b) == "bad disk" {
			return errors.New("injected fsync failure")
		}
		return f.Sync()
	}}
	var ws []*Writer
	for _, c := range []string{"good", "bad disk", "liar"} {
		w, err := s.NewWriter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		w.Write([]byte(c))
		ws = append(ws, w)
	}
	errs := SyncAll(ws)
	if errs[0] != nil || errs[1] == nil || !strings.Contains(errs[1].Error(), "injected") || errs[2] != nil {
		t.Fatalf("SyncAll = %v", errs)
	}
	errs = s.CommitAll(ctx, []Commit{{ws[0], 4, digest.FromString("good")}, {ws[2], 4, digest.FromString("honest")}})
	if errs[0] != nil || errs[1] == nil {
		t.Fatalf("CommitAll = %v", errs)
	}
	if !s.Has(digest.FromString("good")) || s.Has(digest.FromString("liar")) || s.Has(digest.FromString("bad disk")) {
		t.Fatal("the wrong blobs are visible")
	}
	ws[1].Close()
	names := dirNames(t, filepath.Join(s.Root(), "ingest"))
	sort.Strings(names)
	if len(names) != 0 {
		t.Fatalf("ingest/ holds %v", names)
	}
}
