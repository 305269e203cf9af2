//go:build unix

package fetch_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/slowdown"
)

// A FIFO named as the file or the bundle is refused at once: opened for reading, it would wait
// for a writer that never comes.
func TestVerifyFileRefusesAFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]fetch.VerifyFileInput{
		"file":   {File: fifo, Bundle: plain, OwnerID: 1, RepoID: 2},
		"bundle": {File: plain, Bundle: fifo, OwnerID: 1, RepoID: 2},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := fetch.VerifyFile(context.Background(), in)
			errtest.WantToken(t, err, errs.Usage, "is not a regular file (it is a FIFO)")
		})
	}
}

// mur verify FILE never blocks on what it opens: a FIFO named as the file or the bundle, directly
// or through a symlink the user named, is refused at once, and so is a device. Each case has its
// own deadline, since a blocking open would hang until a writer came.
func TestVerifyFileOpensWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	linked := filepath.Join(dir, "linked.sigstore.json")
	if err := os.Symlink(fifo, linked); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		in    fetch.VerifyFileInput
		found string
	}{
		"file":                 {fetch.VerifyFileInput{File: fifo, Bundle: plain, OwnerID: 1, RepoID: 2}, "a FIFO"},
		"bundle":               {fetch.VerifyFileInput{File: plain, Bundle: fifo, OwnerID: 1, RepoID: 2}, "a FIFO"},
		"bundle through link":  {fetch.VerifyFileInput{File: plain, Bundle: linked, OwnerID: 1, RepoID: 2}, "a FIFO"},
		"a device as the file": {fetch.VerifyFileInput{File: "/dev/zero", Bundle: plain, OwnerID: 1, RepoID: 2}, "a device"},
	} {
		t.Run(name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := fetch.VerifyFile(context.Background(), c.in)
				done <- err
			}()
			select {
			case err := <-done:
				errtest.WantToken(t, err, errs.Usage, "is not a regular file (it is "+c.found+")", "name the file itself")
			case <-time.After(slowdown.Scale(30 * time.Second)):
				t.Fatal("mur verify FILE blocked opening what it was given")
			}
		})
	}
}
