//go:build unix

package safefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/errs"

	"github.com/murmur-nexus/mur/internal/slowdown"
)

const secret = "AKIA-THE-USERS-OWN-SECRET-KEY"

// readSoon reads path as ReadProject does, failing the test when a planted FIFO blocks it.
func readSoon(t *testing.T, path string, max int64) ([]byte, error) {
	t.Helper()
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() { b, err := ReadProject(path, max, errs.InvalidLock); ch <- res{b, err} }()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-time.After(slowdown.Scale(60 * time.Second)):
		t.Fatalf("reading %s hung", path)
		return nil, nil
	}
}

// A cloned project commits its murmur.lock (or murmur.yaml, or .murmur/config.yaml) as whatever
// it likes. Only a regular file is read, and a refusal never quotes what the file points at.
func TestReadProjectRefusesWhatIsNotAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(outside, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		plant func(p string) error
		token errs.Token
	}{
		"symlink to a secret":  {func(p string) error { return os.Symlink(outside, p) }, errs.Denied},
		"symlink to /dev/zero": {func(p string) error { return os.Symlink("/dev/zero", p) }, errs.Denied},
		"fifo":                 {func(p string) error { return syscall.Mkfifo(p, 0o600) }, errs.Denied},
		"folder":               {func(p string) error { return os.Mkdir(p, 0o700) }, errs.IO},
		"over the cap": {func(p string) error {
			return os.WriteFile(p, []byte(strings.Repeat("a: 1\n", 300)), 0o600)
		}, errs.InvalidLock},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, strings.NewReplacer(" ", "-", "/", "").Replace(name))
			if err := c.plant(p); err != nil {
				t.Fatal(err)
			}
			b, err := readSoon(t, p, 1024)
			if err == nil || !errors.Is(err, c.token) {
				t.Fatalf("read %d bytes, err %v; want a %s: error", len(b), err, c.token)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error quotes the file's target: %v", err)
			}
		})
	}
	p := filepath.Join(dir, "murmur.lock")
	if err := os.WriteFile(p, []byte("lock_version: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := readSoon(t, p, 1024); err != nil || string(b) != "lock_version: 3\n" {
		t.Fatalf("a regular file: %q, %v", b, err)
	}
	if _, err := readSoon(t, filepath.Join(dir, "missing"), 1024); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
}

// A .murmur/ committed as a symlink is refused even when the file it leads to is regular.
func TestReadProjectRefusesALinkedMurmurFolder(t *testing.T) {
	t.Parallel()
	elsewhere := t.TempDir()
	if err := os.WriteFile(filepath.Join(elsewhere, "config.yaml"), []byte("stores: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(project, ".murmur")); err != nil {
		t.Fatal(err)
	}
	if _, err := readSoon(t, filepath.Join(project, ".murmur", "config.yaml"), 1024); !errors.Is(err, errs.Denied) {
		t.Fatalf("got %v, want a denied: error", err)
	}
}
