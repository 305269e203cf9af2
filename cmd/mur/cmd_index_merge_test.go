//go:build unix

package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/slowdown"
)

// mur index --merge reads only a regular file, and no more than an index can hold: /dev/zero is
// refused before a byte is read (it once grew memory until Go gave up), a FIFO is refused without
// waiting for a writer (each case has its own deadline, for the open that would block), and a file
// over the bound is refused after reading no more than the bound. Nothing is written.
func TestIndexMergeReadsOnlyAnIndexFile(t *testing.T) {
	dir := t.TempDir()
	file := artifacttest.File(t, dir, "grep", "1.3.0", artifacttest.Tagged("new"))
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 32<<20+1); err != nil { // sparse: no disk for its zeros
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		merge    string
		code     int
		token    string
		mentions []string
	}{
		"/dev/zero":   {"/dev/zero", 2, "usage", []string{"/dev/zero is a device, not a regular file"}},
		"a FIFO":      {fifo, 2, "usage", []string{"fifo.json is a FIFO, not a regular file"}},
		"over 32 MiB": {big, 1, "index-mismatch", []string{"big.json is over 33554432 bytes", "murmur-index.json"}},
		"missing":     {filepath.Join(dir, "gone.json"), 1, "not-found", []string{"gone.json does not exist"}},
	} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "murmur-index.json")
			type result struct {
				code   int
				stderr string
			}
			done := make(chan result, 1)
			go func() {
				code, _, stderr := runMur(t, "index", file, "--scope", "acme", "--release", "v1.3.0", "--merge", c.merge, "-o", out)
				done <- result{code, stderr}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(slowdown.Scale(60 * time.Second)):
				t.Fatalf("mur index --merge %s did not return", c.merge)
			}
			if r.code != c.code || !strings.HasPrefix(r.stderr, "mur: "+c.token+": ") {
				t.Errorf("exit %d, stderr %q; want exit %d and %s", r.code, r.stderr, c.code, c.token)
			}
			for _, m := range c.mentions {
				if !strings.Contains(r.stderr, m) {
					t.Errorf("stderr %q does not say %q", r.stderr, m)
				}
			}
			if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a refused merge wrote the index: %v", err)
			}
		})
	}
}
