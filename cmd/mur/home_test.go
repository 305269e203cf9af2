package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
)

func TestResolveOrder(t *testing.T) {
	t.Setenv("MURMUR_HOME", "/m")
	t.Setenv("HOME", "/h")
	if h, _ := resolveHome("/f"); h.Root != "/f" {
		t.Fatalf("flag: %s", h.Root)
	}
	if h, _ := resolveHome(""); h.Root != "/m" {
		t.Fatalf("env: %s", h.Root)
	}
	t.Setenv("MURMUR_HOME", "")
	if h, _ := resolveHome(""); h.Root != "/h/.murmur" {
		t.Fatalf("HOME: %s", h.Root)
	}
	t.Setenv("HOME", "relative")
	if _, err := resolveHome(""); !errors.Is(err, errs.Usage) {
		t.Fatalf("relative HOME: %v", err)
	}
	t.Setenv("HOME", "")
	if _, err := resolveHome(""); !errors.Is(err, errs.Usage) {
		t.Fatalf("empty HOME: %v", err)
	}
}

func TestEnsurePrivateDirReasserts(t *testing.T) {
	t.Parallel()
	d := filepath.Join(t.TempDir(), "a", "b")
	if err := atomicfile.MkdirPrivate(d); err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	if err := atomicfile.MkdirPrivate(d); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(d)
	if st.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
}
