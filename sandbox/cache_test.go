//go:build unix

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func versionDirOf(t *testing.T, cacheDir string) string {
	t.Helper()
	ents, err := os.ReadDir(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), versionDirPrefix) {
			found = append(found, filepath.Join(cacheDir, e.Name()))
		}
	}
	if len(found) != 1 {
		t.Fatalf("cache %s holds version folders %v, want exactly one", cacheDir, found)
	}
	return found[0]
}

func entryFiles(t *testing.T, cacheDir string) []string {
	t.Helper()
	vd := versionDirOf(t, cacheDir)
	ents, err := os.ReadDir(vd)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, filepath.Join(vd, e.Name()))
	}
	return out
}

func TestCacheCreatedPrivateAndUsed(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "home", "compiled")
	var w warnings
	r := newRunner(t, Options{CacheDir: dir, Warn: w.add})
	if !r.CacheInUse() || len(w.list) != 0 {
		t.Fatalf("cache in use %v, warnings %v", r.CacheInUse(), w.list)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("cache dir: %v, %v", fi, err)
	}
	if err := r.Precompile(context.Background(), openWriteModule(3, "x", "y")); err != nil {
		t.Fatal(err)
	}
	if n := len(entryFiles(t, dir)); n != 1 {
		t.Errorf("%d entries after Precompile, want 1", n)
	}
	if bad, err := r.CheckCache(false); err != nil || len(bad) != 0 {
		t.Errorf("CheckCache on a fresh entry = %v, %v", bad, err)
	}
}

func TestCacheNotTrusted(t *testing.T) {
	t.Parallel()
	wasm := openWriteModule(3, "out.txt", "ran")
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, base string) (cacheDir string, writable []string)
		why   string
	}{
		{"mode 0755", func(t *testing.T, base string) (string, []string) {
			d := filepath.Join(base, "compiled")
			mustMkdir(t, d, 0o755)
			return d, nil
		}, "mode 0755"},
		{"symlink", func(t *testing.T, base string) (string, []string) {
			target := filepath.Join(base, "elsewhere")
			mustMkdir(t, target, 0o700)
			d := filepath.Join(base, "compiled")
			if err := os.Symlink(target, d); err != nil {
				t.Fatal(err)
			}
			return d, nil
		}, "symlink"},
		{"inside a writable mount", func(t *testing.T, base string) (string, []string) {
			d := filepath.Join(base, "work", "home", "compiled")
			mustMkdir(t, d, 0o700)
			return d, []string{filepath.Join(base, "work")}
		}, "which a guest can write"},
		{"writable mount through a symlink", func(t *testing.T, base string) (string, []string) {
			d := filepath.Join(base, "work", "compiled")
			mustMkdir(t, d, 0o700)
			if err := os.Symlink(filepath.Join(base, "work"), filepath.Join(base, "worklink")); err != nil {
				t.Fatal(err)
			}
			return d, []string{filepath.Join(base, "worklink")}
		}, "which a guest can write"},
		{"owned by another user", func(t *testing.T, base string) (string, []string) {
			d := filepath.Join(base, "compiled")
			mustMkdir(t, d, 0o700)
			if err := os.Chown(d, os.Getuid()+4242, -1); err != nil {
				t.Skipf("can't give a folder away (needs root): %v", err)
			}
			return d, nil
		}, fmt.Sprintf("owned by uid %d", os.Getuid()+4242)},
		// Not there yet: it must not be created first and judged after.
		{"to be made inside a writable mount", func(t *testing.T, base string) (string, []string) {
			mustMkdir(t, filepath.Join(base, "work"), 0o755)
			return filepath.Join(base, "work", "home", "compiled"), []string{filepath.Join(base, "work")}
		}, "which a guest can write"},
		{"to be made through a symlink into a writable mount", func(t *testing.T, base string) (string, []string) {
			mustMkdir(t, filepath.Join(base, "work"), 0o755)
			if err := os.Symlink(filepath.Join(base, "work"), filepath.Join(base, "home")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(base, "home", "compiled"), []string{filepath.Join(base, "work")}
		}, "which a guest can write"},
		{"a file", func(t *testing.T, base string) (string, []string) {
			d := filepath.Join(base, "compiled")
			if err := os.WriteFile(d, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return d, nil
		}, "not a folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			cacheDir, writable := tc.setup(t, base)
			before := snapshot(t, base)
			var w warnings
			r := newRunner(t, Options{CacheDir: cacheDir, GuestWritable: writable, Warn: w.add})
			if r.CacheInUse() {
				t.Fatal("the cache is in use")
			}
			if len(w.list) != 1 || !strings.Contains(w.list[0], tc.why) {
				t.Errorf("warnings %q, want one mentioning %q", w.list, tc.why)
			}
			work := filepath.Join(t.TempDir(), "w")
			mustMkdir(t, work, 0o755)
			res := runFS(t, r, wasm, Config{Args: []string{"x"}}, openFS(t, work, false))
			if res.code != 0 || res.err != nil {
				t.Fatalf("Run = %d, %v", res.code, res.err)
			}
			if b, _ := os.ReadFile(filepath.Join(work, "out.txt")); string(b) != "ran" {
				t.Errorf("the guest did not run: %q", b)
			}
			sameSnapshot(t, "cache folder", before, snapshot(t, base))
		})
	}
}

func mustMkdir(t *testing.T, d string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, mode); err != nil {
		t.Fatal(err)
	}
}

func TestCachePrunesOldVersions(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "compiled")
	mustMkdir(t, filepath.Join(dir, "wazero-v1.0.0-old-amd64-linux"), 0o700)
	if err := os.WriteFile(filepath.Join(dir, "wazero-v1.0.0-old-amd64-linux", "entry"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustMkdir(t, filepath.Join(dir, "unrelated"), 0o700)
	r := newRunner(t, Options{CacheDir: dir})
	if !r.CacheInUse() {
		t.Fatal("cache not in use")
	}
	if _, err := os.Stat(filepath.Join(dir, "wazero-v1.0.0-old-amd64-linux")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("old version folder still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "unrelated")); err != nil {
		t.Errorf("a folder mur does not own was pruned: %v", err)
	}
	versionDirOf(t, dir)
}

// corruptions damage an entry the ways a crash, a full disk or bit rot would.
var corruptions = map[string]func([]byte) []byte{
	"empty":        func(b []byte) []byte { return nil },
	"truncated":    func(b []byte) []byte { return b[:len(b)/2] },
	"short header": func(b []byte) []byte { return b[:5] },
	"garbage":      func(b []byte) []byte { return bytes.Repeat([]byte{0xA5}, len(b)) },
	"code flipped": func(b []byte) []byte {
		c := append([]byte(nil), b...)
		c[len(c)/2] ^= 0xff
		return c
	},
	"bad magic": func(b []byte) []byte {
		c := append([]byte(nil), b...)
		c[0] = 'X'
		return c
	},
}

func corruptAll(t *testing.T, cacheDir string, damage func([]byte) []byte) int {
	t.Helper()
	n := 0
	for _, p := range entryFiles(t, cacheDir) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, damage(b), 0o600); err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

func TestCorruptEntryDoesNotFailTheRun(t *testing.T) {
	t.Parallel()
	wasm := openWriteModule(3, "out.txt", "ran")
	for name, damage := range corruptions {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "compiled")
			r := newRunner(t, Options{CacheDir: dir})
			if err := r.Precompile(context.Background(), wasm); err != nil {
				t.Fatal(err)
			}
			if n := corruptAll(t, dir, damage); n == 0 {
				t.Fatal("no entry to corrupt")
			}
			var w warnings
			r2 := newRunner(t, Options{CacheDir: dir, Warn: w.add})
			if bad, err := r2.CheckCache(false); err != nil || len(bad) != 1 {
				t.Errorf("CheckCache before the run = %v, %v; want the damaged entry", bad, err)
			}
			work := filepath.Join(t.TempDir(), "w")
			mustMkdir(t, work, 0o755)
			res := runFS(t, r2, wasm, Config{Args: []string{"x"}}, openFS(t, work, false))
			if res.code != 0 || res.err != nil {
				t.Fatalf("Run with a corrupt entry = %d, %v", res.code, res.err)
			}
			if b, _ := os.ReadFile(filepath.Join(work, "out.txt")); string(b) != "ran" {
				t.Errorf("the guest did not run: %q", b)
			}
			t.Logf("warnings: %q", w.list)
			if bad, err := r2.CheckCache(false); err != nil || len(bad) != 0 {
				t.Errorf("CheckCache after the run = %v, %v; want a clean cache", bad, err)
			}
		})
	}
}

func TestCheckCacheRepairs(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "compiled")
	r := newRunner(t, Options{CacheDir: dir})
	if err := r.Precompile(context.Background(), openWriteModule(3, "a", "b")); err != nil {
		t.Fatal(err)
	}
	if err := r.Precompile(context.Background(), openWriteModule(3, "c", "d")); err != nil {
		t.Fatal(err)
	}
	files := entryFiles(t, dir)
	if len(files) != 2 {
		t.Fatalf("entries %v", files)
	}
	if err := os.Truncate(files[0], 10); err != nil {
		t.Fatal(err)
	}
	bad, err := r.CheckCache(true)
	if err != nil || len(bad) != 1 || !strings.Contains(bad[0], filepath.Base(files[0])) || !strings.Contains(bad[0], "removed") {
		t.Fatalf("CheckCache(repair) = %v, %v", bad, err)
	}
	if _, err := os.Stat(files[0]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("damaged entry still there")
	}
	if _, err := os.Stat(files[1]); err != nil {
		t.Errorf("healthy entry removed: %v", err)
	}
}
