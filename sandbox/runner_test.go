//go:build unix

package sandbox

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/internal/slowdown/deadline"
	"github.com/murmur-nexus/mur/state"
)

func TestHelloArgsAndEnv(t *testing.T) {
	t.Setenv("MUR_HOST_ONLY", "must-not-leak")
	r := sharedRunner(t)
	res := runFS(t, r, goGuest(t), Config{
		Args: []string{"hello", "one two", "three"},
		Env:  []string{"PWD=/", "GREETING=hi"},
	}, openFS(t, workdir(t), false))
	if res.err != nil || res.code != 0 {
		t.Fatalf("Run = %d, %v; stderr %s", res.code, res.err, res.stderr)
	}
	want := "hello from hello\narg one two\narg three\nenv PWD=/\nenv GREETING=hi\n"
	if res.stdout != want {
		t.Errorf("stdout = %q, want %q", res.stdout, want)
	}
}

func TestStatePersistsAcrossRuns(t *testing.T) {
	t.Parallel()
	r := sharedRunner(t)
	guest := goGuest(t)
	store, err := state.Ensure(filepath.Join(t.TempDir(), "state"), "notes")
	if err != nil {
		t.Fatal(err)
	}
	work := workdir(t)
	fsys := openFSWithStore(t, work, store, false)

	res := runFS(t, r, guest, Config{Args: []string{"state", "write", "greeting", "persisted"}, Env: []string{"PWD=/"}}, fsys)
	if res.err != nil || res.code != 0 {
		t.Fatalf("write: %d, %v; stderr %s", res.code, res.err, res.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(store, "greeting")); err != nil || string(b) != "persisted" {
		t.Fatalf("store file = %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(work, "state")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the write reached the workdir too (%v)", err)
	}

	if _, err := state.Ensure(filepath.Dir(store), "notes"); err != nil {
		t.Fatal(err)
	}
	res = runFS(t, r, guest, Config{Args: []string{"state", "read", "greeting"}, Env: []string{"PWD=/"}}, fsys)
	if res.err != nil || res.code != 0 || res.stdout != "persisted\n" {
		t.Fatalf("read = %d, %v, %q; stderr %s", res.code, res.err, res.stdout, res.stderr)
	}
	if err := os.WriteFile(filepath.Join(store, "second"), []byte("22"), 0o600); err != nil {
		t.Fatal(err)
	}
	res = runFS(t, r, guest, Config{Args: []string{"state", "list", "."}, Env: []string{"PWD=/"}}, fsys)
	if res.err != nil || res.code != 0 || res.stdout != "greeting 9\nsecond 2\n" {
		t.Fatalf("list = %d, %v, %q; stderr %s", res.code, res.err, res.stdout, res.stderr)
	}
}

func TestStateWithoutMountMissesTheStore(t *testing.T) {
	t.Parallel()
	r := sharedRunner(t)
	guest := goGuest(t)
	store, err := state.Ensure(filepath.Join(t.TempDir(), "state"), "notes")
	if err != nil {
		t.Fatal(err)
	}
	work := workdir(t)
	res := runFS(t, r, guest, Config{Args: []string{"state", "write", "k", "v"}, Env: []string{"PWD=/"}}, openFS(t, work, false))
	if res.code == 0 {
		t.Errorf("write without a state mount and without workdir/state succeeded: %q", res.stdout)
	}
	// With a state/ folder in the workdir, the write lands there: it is the workdir, not the store.
	if err := os.Mkdir(filepath.Join(work, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	res = runFS(t, r, guest, Config{Args: []string{"state", "write", "k", "v"}, Env: []string{"PWD=/"}}, openFS(t, work, false))
	if res.code != 0 {
		t.Fatalf("write into workdir/state = %d, %v, %s", res.code, res.err, res.stderr)
	}
	if _, err := os.Stat(filepath.Join(work, "state", "k")); err != nil {
		t.Errorf("workdir/state/k: %v", err)
	}
	if entries, _ := os.ReadDir(store); len(entries) != 0 {
		t.Errorf("the store got %v without being mounted", entries)
	}
}

// TestRawGuestReachesStateThroughTheRoot: a guest that calls path_open itself, on the one
// preopen (fd 3), reaches the store by the path state/..., with or without a leading "./", and
// a name that merely starts with "state" stays in the workdir.
func TestRawGuestReachesStateThroughTheRoot(t *testing.T) {
	t.Parallel()
	r := sharedRunner(t)
	store, err := state.Ensure(filepath.Join(t.TempDir(), "state"), "notes")
	if err != nil {
		t.Fatal(err)
	}
	work := workdir(t)
	fsys := openFSWithStore(t, work, store, false)
	for _, p := range []string{"state/x.txt", "./state/y.txt", "state//z.txt", "stateful.txt"} {
		res := runFS(t, r, openWriteModule(3, p, p), Config{Args: []string{"raw"}}, fsys)
		if res.err != nil || res.code != 0 {
			t.Fatalf("path_open(3, %q) = %d, %v", p, res.code, res.err)
		}
	}
	for _, c := range []struct{ dir, file, content string }{
		{store, "x.txt", "state/x.txt"}, {store, "y.txt", "./state/y.txt"}, {store, "z.txt", "state//z.txt"},
		{work, "stateful.txt", "stateful.txt"},
	} {
		if b, err := os.ReadFile(filepath.Join(c.dir, c.file)); err != nil || string(b) != c.content {
			t.Errorf("%s = %q, %v; want %q", filepath.Join(c.dir, c.file), b, err, c.content)
		}
	}
	if entries, _ := os.ReadDir(work); len(entries) != 1 {
		t.Errorf("the workdir holds %v, want stateful.txt only", entries)
	}
}

// escapeFixture lays out a workdir with a read-only subtree and symlinks to a folder outside.
type escapeFixture struct {
	base, work, outside, secret, store string
}

func newEscapeFixture(t *testing.T) escapeFixture {
	base := t.TempDir()
	f := escapeFixture{base: base, work: filepath.Join(base, "work"), outside: filepath.Join(base, "outside")}
	f.secret = filepath.Join(f.outside, "secret.txt")
	for _, d := range []string{f.work, f.outside, filepath.Join(f.work, "ro")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(f.secret, "secret")
	write(filepath.Join(f.work, "inside.txt"), "inside")
	write(filepath.Join(f.work, "victim.txt"), "victim")
	write(filepath.Join(f.work, "ro", "existing.txt"), "read only")
	if err := os.Symlink(f.outside, filepath.Join(f.work, "prelink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../outside", filepath.Join(f.work, "prelink-rel")); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.store, err = state.Ensure(filepath.Join(base, "home", "state"), "notes"); err != nil {
		t.Fatal(err)
	}
	return f
}

// fs is the fixture's workdir as a guest root, with ro/ read-only.
func (f escapeFixture) fs(t *testing.T) *rootFS { return openFS(t, f.work, false, "ro") }

// snapshot records every path under dir with its content (files), target (symlinks) and mode.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		v := fi.Mode().String()
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			v += " -> " + target
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			v += " " + string(b)
		}
		out[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSnapshot(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: %s changed from %q to %q", what, k, v, after[k])
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s: %s appeared (%q)", what, k, v)
		}
	}
}

func TestEveryEscapeIsDenied(t *testing.T) {
	t.Parallel()
	r := sharedRunner(t)
	f := newEscapeFixture(t)
	before := snapshot(t, f.base)

	res := runFS(t, r, goGuest(t), Config{Args: []string{"escaper", f.secret}, Env: []string{"PWD=/"}}, f.fs(t))
	if res.err != nil || res.code != 0 {
		t.Fatalf("Run = %d, %v; stderr %s", res.code, res.err, res.stderr)
	}
	attempts := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(res.stdout))
	for sc.Scan() {
		name, verdict, _ := strings.Cut(sc.Text(), " ")
		attempts[name] = verdict
	}
	want := []string{
		"symlink-create-abs", "symlink-create-rel", "read-made-abs", "read-made-rel",
		"read-prelink", "read-prelink-rel", "list-prelink", "chdir-prelink", "read-dotdot",
		"read-abs-host", "read-etc-passwd", "hardlink-outside", "hardlink-inside",
		"rename-out-symlink", "rename-ro-out", "write-ro-new", "write-ro-existing", "remove-ro",
		"mkdir-ro", "write-state",
	}
	if len(attempts) != len(want) {
		t.Errorf("got %d attempts, want %d:\n%s", len(attempts), len(want), res.stdout)
	}
	for _, name := range want {
		v, ok := attempts[name]
		if !ok {
			t.Errorf("%s: no report", name)
		} else if !strings.HasPrefix(v, "DENIED") {
			t.Errorf("%s: %s", name, v)
		}
	}
	t.Logf("escaper:\n%s", res.stdout)
	sameSnapshot(t, "host", before, snapshot(t, f.base))
}

func TestReadOnlySubtreeThroughWritableParentFD(t *testing.T) {
	t.Parallel()
	r := sharedRunner(t)
	f := newEscapeFixture(t)
	if err := os.Symlink("ro", filepath.Join(f.work, "to-ro")); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, f.base)
	// A raw guest can ignore preopen names and open ro/... relative to the workdir's descriptor.
	for _, p := range []string{"ro/new.txt", "ro/existing.txt", "to-ro/new.txt", "to-ro/existing.txt"} {
		res := runFS(t, r, openWriteModule(3, p, "overwritten"), Config{Args: []string{"raw"}}, f.fs(t))
		if res.code != 100+69 { // EROFS
			t.Errorf("path_open(3, %q) for writing exited %d (%v), want 169 (EROFS)", p, res.code, res.err)
		}
	}
	for _, p := range []string{"../outside/secret.txt", "prelink/secret.txt", "/etc/passwd"} {
		res := runFS(t, r, openWriteModule(3, p, "overwritten"), Config{Args: []string{"raw"}}, f.fs(t))
		if res.code < 100 {
			t.Errorf("path_open(3, %q) exited %d (%v), want a path_open failure", p, res.code, res.err)
		}
	}
	sameSnapshot(t, "host", before, snapshot(t, f.base))

	res := runFS(t, r, openWriteModule(3, "fine.txt", "ok"), Config{Args: []string{"raw"}}, f.fs(t))
	if res.code != 0 {
		t.Fatalf("a plain write in the workdir exited %d (%v)", res.code, res.err)
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	r := sharedRunner(t)
	guest := goGuest(t)
	run(t, r, guest, Config{Args: []string{"sleeper", "0"}}) // compile outside the timed run
	start := time.Now()
	res := run(t, r, guest, Config{Args: []string{"sleeper", "60"}, Timeout: time.Second})
	elapsed := time.Since(start)
	if !errors.Is(res.err, ErrTimeout) || res.code != 124 || ExitStatus(res.code, res.err) != 124 {
		t.Fatalf("Run = %d, %v; want 124 and ErrTimeout", res.code, res.err)
	}
	if errs.TokenOf(res.err) != "timeout" {
		t.Errorf("token = %s", errs.TokenOf(res.err))
	}
	if elapsed > slowdown.Scale(20*time.Second) {
		t.Errorf("the run took %s, far past its 1s limit", elapsed)
	}
	if strings.Contains(res.stdout, "woke up") {
		t.Errorf("the guest finished its sleep: %q", res.stdout)
	}
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	r := sharedRunner(t)
	guest := goGuest(t)
	for _, code := range []int{0, 3, 42} {
		res := run(t, r, guest, Config{Args: []string{"exitcode", strconv.Itoa(code)}})
		if res.err != nil || res.code != code || ExitStatus(res.code, res.err) != code {
			t.Errorf("exitcode %d: Run = %d, %v", code, res.code, res.err)
		}
	}
}

func TestMemoryCap(t *testing.T) {
	t.Parallel()
	r := sharedRunner(t)
	res := run(t, r, goGuest(t), Config{Args: []string{"memhog"}, MemoryMiB: 32})
	if res.code == 0 || strings.Contains(res.stdout, "did not hold") {
		t.Fatalf("memhog under a 32 MiB cap: %d, %v, %q", res.code, res.err, res.stdout)
	}
	if s := ExitStatus(res.code, res.err); s == 124 || s == 125 || s == 126 {
		t.Errorf("memhog's status %d is a runner class, want the guest's own failure", s)
	}
	if strings.Contains(res.stdout, "allocated 64 MiB") {
		t.Errorf("memhog allocated past the cap: %q", res.stdout)
	}
	// Go's runtime says "out of memory" and exits 2, which names nothing of mur's; mur adds the
	// limit the guest ran into, and keeps the guest's status.
	if !errors.Is(res.err, ErrMemoryLimit) || errs.TokenOf(res.err) != errs.GuestCrashed || ExitStatus(res.code, res.err) != res.code ||
		!strings.Contains(errs.Message(res.err), "the guest used its whole memory limit of 32 MiB (limits.memory_mib)") {
		t.Errorf("memhog's error %v (status %d), want guest-crashed naming limits.memory_mib", res.err, ExitStatus(res.code, res.err))
	}
	t.Logf("memhog: %d %v %q %q", res.code, res.err, res.stdout, lastLine(res.stderr))
	// A guest that fails far below its cap gets no such note.
	if res := run(t, r, goGuest(t), Config{Args: []string{"exitcode", "3"}, MemoryMiB: 512}); res.err != nil || res.code != 3 {
		t.Errorf("exitcode 3 under a 512 MiB cap: %d, %v", res.code, res.err)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[0]
}

func TestNotExecutable(t *testing.T) {
	t.Parallel()
	r := sharedRunner(t)
	for _, tc := range []struct {
		name   string
		wasm   []byte
		memMiB int
		want   string
	}{
		{"component", []byte("\x00asm\x0d\x00\x01\x00\x07\x10\x01\x41"), 0, "is a WebAssembly component; mur runs WASI preview 1 core modules only"},
		{"garbage", []byte("#!/bin/sh\necho not wasm\n"), 0, "not a WebAssembly module"},
		{"empty", nil, 0, "not a WebAssembly module"},
		{"truncated", openWriteModule(3, "x", "y")[:40], 0, "not a valid WebAssembly module"},
		{"other import", emptyModule(1, "env", "now"), 0, "imports env.now"},
		{"memory over cap", emptyModule(100, "", ""), 1, "raise limits.memory_mib"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, r, tc.wasm, Config{Args: []string{"x"}, MemoryMiB: tc.memMiB})
			if res.code != 126 || ExitStatus(res.code, res.err) != 126 || !errors.Is(res.err, ErrNotExecutable) {
				t.Fatalf("Run = %d, %v; want 126", res.code, res.err)
			}
			if !errors.Is(res.err, errs.InvalidArtifact) || !strings.Contains(res.err.Error(), tc.want) {
				t.Errorf("error %q, want invalid-artifact mentioning %q", res.err, tc.want)
			}
		})
	}
	// The same module under a cap it fits in runs.
	if res := run(t, r, emptyModule(100, "", ""), Config{Args: []string{"x"}, MemoryMiB: 16}); res.code != 0 || res.err != nil {
		t.Errorf("module within the cap: %d, %v", res.code, res.err)
	}
}

func TestTrap(t *testing.T) {
	t.Parallel()
	r := sharedRunner(t)
	res := run(t, r, trapModule(), Config{Args: []string{"trap"}})
	if !errors.Is(res.err, ErrTrap) || ExitStatus(res.code, res.err) != StatusTrap {
		t.Fatalf("Run = %d, %v; want a trap", res.code, res.err)
	}
	// The artifact passed every check: the run crashed, not the artifact.
	if errs.TokenOf(res.err) != errs.GuestCrashed {
		t.Errorf("a trap's token is %s, want guest-crashed", errs.TokenOf(res.err))
	}
}

// A caller that cancels the run (mur does on Ctrl-C and SIGTERM) stops a spinning guest; that
// is neither mur's failure nor the guest's: token interrupted, status 130.
func TestCancelStopsASpinningGuest(t *testing.T) {
	t.Parallel()
	r := sharedRunner(t)
	guest := goGuest(t)
	ctx, cancel := context.WithCancel(deadline.Context(t))
	started := &signalWriter{line: "spinning", seen: make(chan struct{})}
	done := make(chan struct{})
	var code int
	var err error
	go func() {
		defer close(done)
		code, err = r.Run(ctx, guest, Config{Args: []string{"spin"}, Stderr: started})
	}()
	deadline.Recv(t, started.seen, `the guest's "spinning"`)
	cancel()
	deadline.Recv(t, done, "the canceled run's end")
	if code != StatusInterrupted || !errors.Is(err, ErrInterrupted) || errs.TokenOf(err) != errs.Interrupted || ExitStatus(code, err) != 130 {
		t.Fatalf("Run = %d, %v (token %s); want 130, ErrInterrupted, interrupted", code, err, errs.TokenOf(err))
	}
}

// signalWriter closes seen the first time line is written.
type signalWriter struct {
	line string
	seen chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.line) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}
