//go:build unix

package fetch_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
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
