//go:build linux

package stage_test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
)

var unstaged = ref.Name{Scope: "acme", Name: "grep"}

// stagedTools makes tools/acme/grep/ with a file in it, and its staging lock, in a new project.
func stagedTools(t *testing.T) stage.Tools {
	t.Helper()
	tools := stage.Tools{Project: t.TempDir()}
	dir := stage.StagedDir(tools, unstaged)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "capsule.wasm"), filepath.Join(filepath.Dir(dir), ".grep.lock")} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return tools
}

// Unstage removes the folder and its staging lock, and says so when it can't: a tool it reports
// removed must be gone, or the user is told what to remove by hand.
func TestUnstageSaysWhatItCouldNotRemove(t *testing.T) {
	t.Run("removed", func(t *testing.T) {
		tools := stagedTools(t)
		if err := stage.Unstage(tools, unstaged); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(tools.Dir(), "acme")); !os.IsNotExist(err) {
			t.Fatalf("tools/acme is still there: %v", err)
		}
	})
	t.Run("a staging lock that is a folder with something in it", func(t *testing.T) {
		tools := stagedTools(t)
		lockDir := filepath.Join(tools.Dir(), "acme", ".grep.lock")
		if err := os.Remove(lockDir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(lockDir, "kept"), 0o755); err != nil {
			t.Fatal(err)
		}
		err := stage.Unstage(tools, unstaged)
		errtest.WantToken(t, err, errs.IO, "can't remove "+lockDir)
	})
	t.Run("a file that can't be removed", func(t *testing.T) {
		tools := stagedTools(t)
		stuck := filepath.Join(stage.StagedDir(tools, unstaged), "capsule.wasm")
		if !immutable(t, stuck, true) {
			t.Skip("this file system can't mark a file immutable, which even root can't remove")
		}
		defer immutable(t, stuck, false)
		err := stage.Unstage(tools, unstaged)
		errtest.WantToken(t, err, errs.IO, "can't remove "+stage.StagedDir(tools, unstaged), "remove it by hand")
	})
}

// fsImmutable is FS_IMMUTABLE_FL of linux/fs.h, the flag chattr +i sets.
const fsImmutable = 0x10

// immutable sets or clears the immutable attribute of path (chattr +i), and reports whether it
// could.
func immutable(t *testing.T, path string, on bool) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return false
	}
	if on {
		flags |= fsImmutable
	} else {
		flags &^= fsImmutable
	}
	return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags)) == nil
}
