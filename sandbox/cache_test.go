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
	"runtime"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero/experimental"
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

func TestCorruptGoGuestEntry(t *testing.T) {
	t.Parallel()
	wasm := goGuest(t)
	dir := filepath.Join(t.TempDir(), "compiled")
	// Warm the private cache by copying the shared one, where goGuest compiled the guest,
	// instead of compiling again.
	r := newRunner(t, Options{CacheDir: dir})
	vd := versionDirOf(t, dir)
	for _, p := range entryFiles(t, sharedCacheDir) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(vd, filepath.Base(p)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r.Close(context.Background())
	corruptAll(t, dir, corruptions["truncated"])

	var w warnings
	r2 := newRunner(t, Options{CacheDir: dir, Warn: w.add})
	res := run(t, r2, wasm, Config{Args: []string{"hello"}})
	if res.code != 0 || res.err != nil || !strings.HasPrefix(res.stdout, "hello from hello") {
		t.Fatalf("Run = %d, %v, %q", res.code, res.err, res.stdout)
	}
	if len(w.list) == 0 {
		t.Error("no warning about the repaired cache")
	}
}

// TestEntryNameMatchesWazero pins the cache-key derivation to wazero's: if an upgrade changes
// it, runs would stop checking their entry before loading it.
func TestEntryNameMatchesWazero(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "compiled")
	r := newRunner(t, Options{CacheDir: dir})
	wasm := openWriteModule(3, "key", "check")
	if err := r.Precompile(context.Background(), wasm); err != nil {
		t.Fatal(err)
	}
	files := entryFiles(t, dir)
	if len(files) != 1 || filepath.Base(files[0]) != entryName(wasm, true) {
		t.Fatalf("entries %v, predicted %s", files, entryName(wasm, true))
	}
}

// TestCorruptOffsetIsCaughtBeforeLoading damages what wazero's checksum does not cover.
func TestCorruptOffsetIsCaughtBeforeLoading(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "compiled")
	wasm := openWriteModule(3, "out.txt", "ran")
	r := newRunner(t, Options{CacheDir: dir})
	if err := r.Precompile(context.Background(), wasm); err != nil {
		t.Fatal(err)
	}
	version := wazeroVersion()
	offsetsAt := 6 + 1 + len(version) + 4
	corruptAll(t, dir, func(b []byte) []byte {
		c := append([]byte(nil), b...)
		c[offsetsAt+7] = 0x7f // function 0 now starts far outside the code
		return c
	})
	var w warnings
	r2 := newRunner(t, Options{CacheDir: dir, Warn: w.add})
	work := filepath.Join(t.TempDir(), "w")
	mustMkdir(t, work, 0o755)
	res := runFS(t, r2, wasm, Config{Args: []string{"x"}}, openFS(t, work, false))
	if res.code != 0 || res.err != nil {
		t.Fatalf("Run = %d, %v", res.code, res.err)
	}
	if len(w.list) != 1 || !strings.Contains(w.list[0], "outside the code") {
		t.Errorf("warnings %q, want one about the damaged offset", w.list)
	}
}

// TestRepairAfterWazeroError covers the fallback for damage the pre-check can't see: whatever
// entries the check flags are removed, and with none flagged the version folder is emptied.
func TestRepairAfterWazeroError(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "compiled")
	r := newRunner(t, Options{CacheDir: dir})
	for _, p := range []string{"a", "b"} {
		if err := r.Precompile(context.Background(), openWriteModule(3, p, p)); err != nil {
			t.Fatal(err)
		}
	}
	files := entryFiles(t, dir)
	if err := os.WriteFile(files[0], []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	var w warnings
	r.opt.Warn = w.add
	r.repair(errors.New("compilationcache: simulated"))
	if _, err := os.Stat(files[0]); !errors.Is(err, fs.ErrNotExist) {
		t.Error("the flagged entry is still there")
	}
	if _, err := os.Stat(files[1]); err != nil {
		t.Errorf("a healthy entry went: %v", err)
	}
	r.repair(errors.New("compilationcache: simulated"))
	if len(entryFiles(t, dir)) != 0 {
		t.Error("with nothing flagged, the version folder was not emptied")
	}
	if len(w.list) != 2 || !strings.Contains(w.list[0], "simulated") {
		t.Errorf("warnings %q", w.list)
	}
}

// A module without functions compiles to an entry with no code but still a checksum; the
// checker once took that checksum for trailing garbage.
func TestEntryWithoutCodeIsSound(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "compiled")
	r := newRunner(t, Options{CacheDir: dir})
	if err := r.Precompile(context.Background(), []byte("\x00asm\x01\x00\x00\x00")); err != nil {
		t.Fatal(err)
	}
	if n := len(entryFiles(t, dir)); n != 1 {
		t.Fatalf("%d entries after Precompile, want 1", n)
	}
	if bad, err := r.CheckCache(false); err != nil || len(bad) != 0 {
		t.Fatalf("CheckCache on an entry without code = %v, %v", bad, err)
	}
}

// TestPrecompileSkipsWhatIsCompiled damages the code of a compiled entry, where only wazero's
// checksum would notice: a second Precompile of the module must not load (and so repair) it,
// because it must not decode the module or load the entry at all once the cache holds it.
func TestPrecompileSkipsWhatIsCompiled(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "compiled")
	wasm := openWriteModule(3, "skip", "me")
	if err := newRunner(t, Options{CacheDir: dir}).Precompile(context.Background(), wasm); err != nil {
		t.Fatal(err)
	}
	files := entryFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("entries %v", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-12] ^= 0xff // in the code, behind the offsets the header check reads
	if err := os.WriteFile(files[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	var w warnings
	r := newRunner(t, Options{CacheDir: dir, Warn: w.add})
	if err := r.Precompile(context.Background(), wasm); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(files[0])
	if err != nil || !bytes.Equal(after, b) || len(w.list) != 0 {
		t.Fatalf("the entry was loaded again (err %v, changed %v, warnings %v)", err, !bytes.Equal(after, b), w.list)
	}
	// A run does load it, finds the damage, and compiles afresh.
	res := run(t, r, wasm, Config{Args: []string{"skip"}})
	if res.err != nil || len(w.list) == 0 {
		t.Fatalf("run: %v, warnings %v", res.err, w.list)
	}
}

// TestHasCompiled asks for a module by the key streamed over its bytes in pieces.
func TestHasCompiled(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "compiled")
	wasm := openWriteModule(3, "has", "compiled")
	r := newRunner(t, Options{CacheDir: dir})
	key := func() []byte {
		h := r.ModuleKey()
		h.Write(wasm[:5])
		h.Write(wasm[5:])
		first := h.Sum(nil)
		if again := h.Sum(nil); !bytes.Equal(first, again) {
			t.Fatalf("Sum changed the key: %x then %x", first, again)
		}
		return first
	}()
	if r.HasCompiled(key) {
		t.Fatal("HasCompiled before anything was compiled")
	}
	if err := r.Precompile(context.Background(), wasm); err != nil {
		t.Fatal(err)
	}
	r = newRunner(t, Options{CacheDir: dir})
	if !r.HasCompiled(key) {
		t.Fatal("HasCompiled is false for a module just compiled")
	}
	other := r.ModuleKey()
	other.Write(wasm[1:])
	if r.HasCompiled(other.Sum(nil)) {
		t.Error("HasCompiled is true for other bytes")
	}
	files := entryFiles(t, dir)
	if err := os.Truncate(files[0], 20); err != nil {
		t.Fatal(err)
	}
	if r.HasCompiled(key) {
		t.Error("HasCompiled is true for a truncated entry")
	}
}

func TestCompileWorkers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want := min(runtime.GOMAXPROCS(0), MaxCompileWorkers)
	if got := experimental.GetCompilationWorkers((&Runner{}).compileContext(ctx)); got != want {
		t.Errorf("default workers %d, want %d", got, want)
	}
	if got := experimental.GetCompilationWorkers((&Runner{opt: Options{CompileWorkers: 1}}).compileContext(ctx)); got != 1 {
		t.Errorf("CompileWorkers 1 gave %d", got)
	}
}
