package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// recorder is a Durability that performs the real calls and writes down each one, with what the
// final name held at that moment, so that a test can hold Commit to the order that survives a
// power cut.
type recorder struct {
	final string
	steps []string
	fail  string // the step to fail instead of performing
}

func (r *recorder) seen() string {
	if _, err := os.Stat(r.final); err == nil {
		return "final present"
	}
	return "final absent"
}

func (r *recorder) durability() Durability {
	return Durability{
		Sync: func(f *os.File) error {
			r.steps = append(r.steps, "sync "+filepath.Base(f.Name())+" ("+r.seen()+")")
			if r.fail == "sync" {
				return errors.New("injected fsync failure")
			}
			return f.Sync()
		},
		Rename: func(oldpath, newpath string) error {
			r.steps = append(r.steps, fmt.Sprintf("rename %s %s", filepath.Base(oldpath), filepath.Base(newpath)))
			if r.fail == "rename" {
				return errors.New("injected rename failure")
			}
			return os.Rename(oldpath, newpath)
		},
		SyncDir: func(dir string) error {
			r.steps = append(r.steps, "syncdir "+dir+" ("+r.seen()+")")
			return SyncDir(dir)
		},
	}
}

func TestCommitSyncsFileThenRenamesThenSyncsFolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tmpDir := filepath.Join(dir, "ingest")
	os.Mkdir(tmpDir, 0o700)
	final := filepath.Join(dir, "blob")
	f, err := Create(tmpDir, final, 0o444)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{final: final}
	f.ops = rec.durability()
	tmp := filepath.Base(f.Name())
	f.Write([]byte("whole"))
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"sync " + tmp + " (final absent)",
		"rename " + tmp + " blob",
		"syncdir " + dir + " (final present)",
	}
	if !reflect.DeepEqual(rec.steps, want) {
		t.Fatalf("Commit took the steps\n  %s\nwant\n  %s", strings.Join(rec.steps, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestFailedStepLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, step := range []string{"sync", "rename"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			final := filepath.Join(dir, "murmur.lock")
			f, err := Create("", final, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{final: final, fail: step}
			f.ops = rec.durability()
			f.Write([]byte("whole"))
			if err := f.Commit(); err == nil {
				t.Fatalf("Commit succeeded although %s failed", step)
			}
			if _, err := os.Stat(final); !os.IsNotExist(err) {
				t.Fatalf("the final name exists after a failed %s: %v", step, err)
			}
			if step == "sync" && len(rec.steps) != 1 {
				t.Fatalf("Commit went on after the failed fsync: %v", rec.steps)
			}
			assertNoTemps(t, dir)
		})
	}
}

func TestPublishOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	final := filepath.Join(dir, "sub", "blob")
	os.Mkdir(filepath.Dir(final), 0o700)
	f, err := os.CreateTemp(dir, TempPrefix)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec := &recorder{final: final}
	tmp := filepath.Base(f.Name())
	if err := rec.durability().Publish(f, final); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"sync " + tmp + " (final absent)",
		"rename " + tmp + " blob",
		"syncdir " + filepath.Dir(final) + " (final present)",
	}
	if !reflect.DeepEqual(rec.steps, want) {
		t.Fatalf("Publish took the steps %q, want %q", rec.steps, want)
	}
	rec = &recorder{final: filepath.Join(dir, "other"), fail: "sync"}
	if err := rec.durability().Publish(f, rec.final); err == nil || len(rec.steps) != 1 {
		t.Fatalf("Publish after a failed fsync: %v, steps %v", err, rec.steps)
	}
}
