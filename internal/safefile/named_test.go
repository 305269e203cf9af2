//go:build unix

package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/slowdown"
)

// A file the user names is read through a symlink they chose, but only a regular file is read,
// nothing over the bound, and a FIFO never blocks the read.
func TestReadNamed(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "index.json")
	if err := os.WriteFile(plain, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(plain, link); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.json")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, 101), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{plain, link} {
		if b, err := ReadNamed(p, 100); err != nil || string(b) != "{}" {
			t.Errorf("ReadNamed(%s) = %q, %v", p, b, err)
		}
	}
	for p, found := range map[string]string{"/dev/zero": "a device", zero: "a device", fifo: "a FIFO", dir: "a folder"} {
		type result struct {
			b   []byte
			err error
		}
		done := make(chan result, 1)
		go func() { b, err := ReadNamed(p, 100); done <- result{b, err} }()
		var r result
		select {
		case r = <-done:
		case <-time.After(slowdown.Scale(30 * time.Second)):
			t.Fatalf("ReadNamed(%s) blocked", p)
		}
		var nr *NotRegularError
		if !errors.As(r.err, &nr) || nr.Found != found || !errors.Is(r.err, ErrNotRegular) {
			t.Errorf("ReadNamed(%s) = %d bytes, %v; want it refused as %s", p, len(r.b), r.err, found)
		}
	}
	if b, err := ReadNamed(big, 100); !errors.Is(err, ErrTooLarge) || b != nil {
		t.Errorf("ReadNamed of 101 bytes with a bound of 100 = %d bytes, %v", len(b), err)
	}
	if _, err := ReadNamed(filepath.Join(dir, "gone"), 100); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadNamed of a missing file = %v", err)
	}
}
