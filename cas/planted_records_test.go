//go:build unix

package cas

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/errs"
)

// A FIFO or a symlink planted at the records file neither hangs an append nor has it written
// through: the thing is moved aside and the records start afresh. Reading records through one
// fails clearly instead of hanging or reading the link's target.
func TestRecordsRefusePlantedThings(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"fifo", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			s := openStore(t)
			d := digest.FromString("x")
			outside := filepath.Join(t.TempDir(), "victim")
			must(t, os.WriteFile(outside, []byte("{\"ref\":\"planted/x\"}\n"), 0o644))
			p := s.recordsFile()
			must(t, os.MkdirAll(filepath.Dir(p), 0o700))
			plant := func() {
				if kind == "fifo" {
					must(t, syscall.Mkfifo(p, 0o600))
				} else {
					must(t, os.Symlink(outside, p))
				}
			}
			plant()
			hangGuard(t, "Records", func() {
				_, err := s.Records("")
				if errs.TokenOf(err) != errs.Integrity || !strings.Contains(err.Error(), p) {
					t.Errorf("Records through a planted %s: %v, want integrity naming %s", kind, err, p)
				}
			})
			hangGuard(t, "AppendRecord", func() {
				if err := s.AppendRecord(Record{Ref: "acme/x", Digest: d}); err != nil {
					t.Errorf("AppendRecord with a planted %s: %v", kind, err)
				}
			})
			if b, _ := os.ReadFile(outside); string(b) != "{\"ref\":\"planted/x\"}\n" {
				t.Fatalf("the append wrote through the link: %q", b)
			}
			if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("records file after the append: %v %v", fi, err)
			}
			if !hasAside(t, s) {
				t.Fatal("the planted thing was not moved aside")
			}
			recs, err := s.Records("")
			if err != nil || len(recs) != 1 || recs[0].Ref != "acme/x" {
				t.Fatalf("records after: %v, %v", recs, err)
			}
		})
	}
}

// A FIFO or a symlink where a blob should be is never read through: every read of the blob
// fails with io naming it, without hanging.
func TestBlobReadsRefusePlantedThings(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"fifo", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			s := openStore(t)
			data := []byte("the user's own file, outside the home\n")
			d := digest.FromBytes(data)
			outside := filepath.Join(t.TempDir(), "victim")
			must(t, os.WriteFile(outside, data, 0o644))
			p := s.Path(d)
			must(t, os.MkdirAll(filepath.Dir(p), 0o755))
			if kind == "fifo" {
				must(t, syscall.Mkfifo(p, 0o600))
			} else {
				must(t, os.Symlink(outside, p))
			}
			reads := map[string]func() error{
				"ReaderAt": func() error {
					r, err := s.ReaderAt(ctx, d)
					if err == nil {
						r.Close()
					}
					return err
				},
				"VerifiedReaderAt": func() error {
					r, err := s.VerifiedReaderAt(ctx, d)
					if err == nil {
						r.Close()
					}
					return err
				},
				"Verify": func() error { return s.Verify(ctx, d) },
			}
			for name, read := range reads {
				hangGuard(t, name, func() {
					err := read()
					if errs.TokenOf(err) != errs.IO || errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), d.Encoded()) {
						t.Errorf("%s of a planted %s: %v, want io naming the blob", name, kind, err)
					}
				})
			}
		})
	}
}
