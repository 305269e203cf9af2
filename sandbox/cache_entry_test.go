//go:build unix

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero/experimental"
)

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
