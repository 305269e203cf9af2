package stage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
)

var grep = ref.Name{Scope: "acme", Name: "grep"}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestStageWritesPlainCopies(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 30)
	d := w.Ingest(p)
	dir, err := stage.Stage(w.Proj.Tools(), w.CAS, grep, d)
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(w.Proj.Dir, "tools", "acme", "grep") {
		t.Fatalf("staged at %s", dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
		if !e.Type().IsRegular() {
			t.Errorf("%s is %s, not a plain file", e.Name(), e.Type())
		}
	}
	if strings.Join(names, ",") != ".mur-staged.json"+",capsule.wasm,murmur.yaml" {
		t.Fatalf("staged files %v", names)
	}
	var m struct {
		Digest string
		Files  map[string]string
	}
	b, _ := os.ReadFile(filepath.Join(dir, ".mur-staged.json"))
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	// The checksum format is the stager's business; the marker must name the blob and each file.
	if m.Digest != d.String() || len(m.Files) != 2 || m.Files["capsule.wasm"] == "" || m.Files["murmur.yaml"] == "" {
		t.Fatalf("marker %s", b)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "capsule.wasm")); !bytes.Equal(got, p.Wasm) {
		t.Fatal("the staged payload differs from the packed one")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "murmur.yaml")); string(got) != p.YAML {
		t.Fatal("the staged murmur.yaml differs from the packed one")
	}
	// A copy, not a link: editing it leaves the blob whole.
	os.WriteFile(filepath.Join(dir, "capsule.wasm"), []byte("edited"), 0o644)
	if err := w.CAS.Verify(context.Background(), d); err != nil {
		t.Fatalf("editing the staged payload damaged the blob: %v", err)
	}
}

func TestCheckStaged(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 31)
	d := w.Ingest(p)
	other := w.Ingest(pulltest.Pack(t, "grep", "1.0.1", 32))

	err := stage.CheckStaged(w.Proj.Tools(), grep, d)
	errtest.WantToken(t, err, errs.Integrity, filepath.Join("tools", "acme", "grep"), "mur verify --repair")

	dir, err := stage.Stage(w.Proj.Tools(), w.CAS, grep, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := stage.CheckStaged(w.Proj.Tools(), grep, d); err != nil {
		t.Fatal(err)
	}
	errtest.WantToken(t, stage.CheckStaged(w.Proj.Tools(), grep, other), errs.Integrity, d.String(), other.String())

	for _, c := range []struct {
		file   string
		damage func(path string) error
	}{
		{"murmur.yaml", func(p string) error { return os.WriteFile(p, []byte("name: evil\nversion: 1.0.0\n"), 0o644) }},
		{"capsule.wasm", func(p string) error {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			f.Write([]byte{0})
			return f.Close()
		}},
		{"capsule.wasm", os.Remove},
		// Same size, the old mtime put back: only the change time (which no one can set back)
		// tells, so the fast path must not trust size and mtime.
		{"capsule.wasm", func(p string) error {
			fi, err := os.Stat(p)
			if err != nil {
				return err
			}
			b, _ := os.ReadFile(p)
			b[len(b)-1] ^= 0xff
			if err := os.WriteFile(p, b, 0o644); err != nil {
				return err
			}
			return os.Chtimes(p, fi.ModTime(), fi.ModTime())
		}},
	} {
		if _, err := stage.Stage(w.Proj.Tools(), w.CAS, grep, d); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, c.file)
		if err := c.damage(path); err != nil {
			t.Fatal(err)
		}
		errtest.WantToken(t, stage.CheckStaged(w.Proj.Tools(), grep, d), errs.Integrity, path)
		// Stage trusts a marker whose files are all present, so the next case starts afresh.
		os.RemoveAll(dir)
	}
}

func TestStageReplacesStaleFolder(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	v1 := pulltest.Pack(t, "grep", "1.0.0", 33)
	v2 := pulltest.PackAs(t, "grep", "2.0.0", "grep.wasm", 34)
	d1, d2 := w.Ingest(v1), w.Ingest(v2)
	dir, err := stage.Stage(w.Proj.Tools(), w.CAS, grep, d1)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("left by someone"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := stage.Stage(w.Proj.Tools(), w.CAS, grep, d2); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != ".mur-staged.json"+",grep.wasm,murmur.yaml" {
		t.Fatalf("after restaging, %s holds %v; the old set must be gone", dir, names)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "grep.wasm")); !bytes.Equal(b, v2.Wasm) {
		t.Fatal("grep.wasm is not 2.0.0's payload")
	}
	if err := stage.CheckStaged(w.Proj.Tools(), grep, d2); err != nil {
		t.Fatal(err)
	}
	// Nothing but the staged folder and the stager's lock is left beside it.
	side, _ := os.ReadDir(filepath.Dir(dir))
	for _, e := range side {
		if e.Name() != "grep" && e.Name() != ".grep.lock" {
			t.Errorf("leftover %s beside the staged folder", e.Name())
		}
	}

	// A marker that names another digest is stale too, whatever the files hold.
	raw, _ := os.ReadFile(filepath.Join(dir, ".mur-staged.json"))
	os.WriteFile(filepath.Join(dir, ".mur-staged.json"), bytes.Replace(raw, []byte(d2.Encoded()), []byte(d1.Encoded()), 1), 0o644)
	if _, err := stage.Stage(w.Proj.Tools(), w.CAS, grep, d2); err != nil {
		t.Fatal(err)
	}
	if err := stage.CheckStaged(w.Proj.Tools(), grep, d2); err != nil {
		t.Fatalf("a stale marker was kept: %v", err)
	}

	// A staged file that is missing makes the folder stale.
	os.Remove(filepath.Join(dir, "grep.wasm"))
	if _, err := stage.Stage(w.Proj.Tools(), w.CAS, grep, d2); err != nil {
		t.Fatal(err)
	}
	if err := stage.CheckStaged(w.Proj.Tools(), grep, d2); err != nil {
		t.Fatalf("a missing file was not restored: %v", err)
	}
}

func TestStageIsIdempotent(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	d := w.Ingest(pulltest.Pack(t, "grep", "1.0.0", 35))
	dir, err := stage.Stage(w.Proj.Tools(), w.CAS, grep, d)
	if err != nil {
		t.Fatal(err)
	}
	first, err := os.Stat(filepath.Join(dir, "capsule.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stage.Stage(w.Proj.Tools(), w.CAS, grep, d); err != nil {
		t.Fatal(err)
	}
	second, err := os.Stat(filepath.Join(dir, "capsule.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(first, second) {
		t.Error("staging the same digest again rewrote the folder")
	}
}

func TestStageMissingBlobLeavesNothing(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 36)
	_, err := stage.Stage(w.Proj.Tools(), w.CAS, grep, p.Digest())
	if err == nil {
		t.Fatal("staged a blob the CAS does not hold")
	}
	if _, err := os.Stat(stage.StagedDir(w.Proj.Tools(), grep)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("tools/acme/grep exists after a failed stage: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(w.Proj.ToolsDir(), "acme"))
	for _, e := range ents {
		if e.Name() != ".grep.lock" {
			t.Errorf("leftover %s", e.Name())
		}
	}
}

// TestStageNeverThroughASymlink: a cloned project can commit tools/, tools/<scope>,
// tools/<scope>/<name> or the stage lock as a symlink to a folder elsewhere. Staging renames
// and removes what it finds, so it refuses, names the symlink and its target, and leaves the
// target as it was.
func TestStageNeverThroughASymlink(t *testing.T) {
	t.Parallel()
	for _, rel := range []string{"tools", "tools/acme", "tools/acme/grep", "tools/acme/.grep.lock"} {
		t.Run(rel, func(t *testing.T) {
			w := pulltest.NewWorld(t)
			d := w.Ingest(pulltest.Pack(t, "grep", "1.0.0", 37))
			outside := t.TempDir()
			// What staging through each link would rename aside and remove.
			for _, f := range []string{"keep.txt", "grep/keep.txt", "acme/grep/keep.txt"} {
				if err := os.MkdirAll(filepath.Join(outside, filepath.Dir(f)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(outside, f), []byte("keep"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			link := filepath.Join(w.Proj.Dir, filepath.FromSlash(rel))
			target := outside
			if strings.HasSuffix(rel, ".lock") {
				target = filepath.Join(outside, "made-by-mur")
			}
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			before := pulltest.TreeDigest(t, outside)
			_, err := stage.Stage(w.Proj.Tools(), w.CAS, grep, d)
			errtest.WantToken(t, err, errs.Denied, link, target)
			errtest.WantToken(t, stage.CheckStaged(w.Proj.Tools(), grep, d), errs.Denied, link)
			if after := pulltest.TreeDigest(t, outside); after != before {
				t.Errorf("the symlink's target changed:\n--- before\n%s\n--- after\n%s", before, after)
			}
		})
	}
}

// TestStageRefusesAFileForAFolder: tools/<scope> that is a file is named as such, not reported
// as a failure to create folders.
func TestStageRefusesAFileForAFolder(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	d := w.Ingest(pulltest.Pack(t, "grep", "1.0.0", 39))
	scopeDir := filepath.Join(w.Proj.ToolsDir(), "acme")
	if err := os.MkdirAll(w.Proj.ToolsDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(scopeDir, []byte("not a folder"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := stage.Stage(w.Proj.Tools(), w.CAS, grep, d)
	errtest.WantToken(t, err, errs.Denied, scopeDir+" is not a folder")
}
