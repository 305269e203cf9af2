// Package guesttest builds the small WebAssembly guests that the sandbox and CLI tests run.
//
// The Go guest is one multi-call program, sandbox/testdata/guest, built with GOOS=wasip1
// GOARCH=wasm: it behaves as the command its argv[0] names, or else its first argument (hello,
// exitcode, state, paths and the rest; its main.go lists them). One program rather than one per
// behaviour, because wazero takes seconds to compile a Go guest, far more under the race
// detector: a test binary compiles this one once. C guests live in sandbox/testdata/cguests/<name>/
// and are built against wasi-libc with clang (Debian: clang, lld, wasi-libc,
// libclang-rt-dev-wasm32), as most non-Go WASI programs are.
//
// Building takes seconds, so outputs are cached under the user cache folder, keyed by the guest's
// source and the toolchain, and each process builds or reads a guest once. Several test packages
// build at once, so cache entries are written to a temporary name and renamed into place.
package guesttest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// GoGuestDir is the multi-call Go guest's folder, relative to the repository's root.
const GoGuestDir = "sandbox/testdata/guest"

// commands are the names the Go guest answers to; TestCommandsMatchTheGuest holds this list to
// the guest's own.
var commands = []string{"append", "escaper", "exitcode", "flip", "grow", "hello", "memhog", "paths", "probe", "sleeper", "spin", "state", "swap"}

// Build returns the wasm bytes of the multi-call Go guest, which the caller runs as the command
// name: as argv[0] (under `mur run`, the artifact's name) or as its first argument. It fails the
// test when name is no command of the guest, or when the guest can't be built.
func Build(t testing.TB, name string) []byte {
	t.Helper()
	if !slices.Contains(commands, name) {
		t.Fatalf("guesttest: the Go guest has no command %q; it has %s", name, strings.Join(commands, ", "))
	}
	return Go(t)
}

// Go returns the wasm bytes of the multi-call Go guest, for a test that runs it as several
// commands. It fails the test when the guest can't be built.
func Go(t testing.TB) []byte {
	t.Helper()
	b, err := goGuest()
	if err != nil {
		t.Fatalf("guesttest: building the Go guest: %v", err)
	}
	return bytes.Clone(b) // callers may damage their copy
}

// goGuest builds or reads the Go guest once per process: tests running in parallel share it.
var goGuest = sync.OnceValues(func() ([]byte, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	out, err := Cached(filepath.Join(root, filepath.FromSlash(GoGuestDir)))
	if err != nil {
		return nil, err
	}
	return os.ReadFile(out)
})

// BuildC returns the wasm bytes of C guest name, building it with clang if the cache has no
// copy. Without clang the test is skipped, except under CI (CI set), where it fails: CI installs
// the toolchain, and a C guest test that quietly skips there would prove nothing.
func BuildC(t testing.TB, name string) []byte {
	t.Helper()
	if _, err := exec.LookPath(clang); err != nil {
		msg := "guesttest: C guests need clang with wasi-libc (Debian: apt-get install clang lld wasi-libc libclang-rt-dev-wasm32)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg + "; CI is set, so this is a failure, not a skip")
		}
		t.Skip(msg)
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("guesttest: %v", err)
	}
	srcDir := filepath.Join(root, "sandbox", "testdata", "cguests", name)
	out, err := cached(srcDir, clangVersion, BuildCDir)
	if err != nil {
		t.Fatalf("guesttest: building C guest %s: %v", name, err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("guesttest: %v", err)
	}
	return b
}

const clang = "clang"

// BuildCDir builds the C sources in srcDir for wasm32-wasi into outPath.
func BuildCDir(srcDir, outPath string) error {
	srcs, err := filepath.Glob(filepath.Join(srcDir, "*.c"))
	if err != nil || len(srcs) == 0 {
		return fmt.Errorf("no C sources in %s", srcDir)
	}
	args := append([]string{"--target=wasm32-wasi", "-O2", "-Wall", "-Werror", "-o", outPath}, srcs...)
	cmd := exec.Command(clang, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", clang, strings.Join(args, " "), err, out.String())
	}
	return nil
}

var clangVersion = sync.OnceValues(func() (string, error) {
	out, err := exec.Command(clang, "--version").Output()
	return strings.TrimSpace(string(out)), err
})

// Cached builds the Go guest in srcDir unless the cache already holds it, and returns the path of
// the cached .wasm file.
func Cached(srcDir string) (string, error) {
	return cached(srcDir, goVersion, BuildDir)
}

func cached(srcDir string, toolchain func() (string, error), build func(srcDir, outPath string) error) (string, error) {
	key, err := cacheKey(srcDir, toolchain)
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "mur-testguests")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	final := filepath.Join(dir, key+".wasm")
	if _, err := os.Stat(final); err == nil {
		return final, nil
	}
	tmp, err := os.CreateTemp(dir, key+".*.tmp")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if err := build(srcDir, tmp.Name()); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", err
	}
	return final, nil
}

// BuildDir builds the Go program in srcDir for wasip1 into outPath.
func BuildDir(srcDir, outPath string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", outPath, ".")
	cmd.Dir = srcDir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build in %s: %v\n%s", srcDir, err, out.String())
	}
	return nil
}

var goVersion = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("go", "env", "GOVERSION", "GOROOT").Output()
	return strings.TrimSpace(string(out)), err
})

func cacheKey(srcDir string, toolchain func() (string, error)) (string, error) {
	v, err := toolchain()
	if err != nil {
		return "", fmt.Errorf("toolchain version: %v", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "toolchain %s\n", v)
	entries, err := os.ReadDir(srcDir)
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "", fmt.Errorf("no source files in %s", srcDir)
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(srcDir, n))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
