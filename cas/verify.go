package cas

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sync/errgroup"

	"github.com/murmur-nexus/mur/internal/bufpool"
	"github.com/murmur-nexus/mur/internal/errs"
)

// VerifyReport is what VerifyAll found.
type VerifyReport struct {
	Checked int      `json:"checked"` // blobs re-hashed
	Bytes   int64    `json:"bytes"`   // bytes re-hashed
	Damaged []Damage `json:"damaged"` // sorted by path
}

// Damage is one problem VerifyAll found.
type Damage struct {
	Digest      digest.Digest `json:"digest"` // the name the blob had; empty for a file that is not named by a digest
	Path        string        `json:"path"`
	Problem     string        `json:"problem"`
	Quarantined string        `json:"quarantined"` // where the file was moved, if it was
}

// damaged quarantines the blob that f was opened from and returns the error to report. Only the
// very file that was read is moved: a good copy that another process committed meanwhile stays.
func (s *Store) damaged(f *os.File, want, got digest.Digest) error {
	path := s.Path(want)
	moved := ""
	if opened, err := f.Stat(); err == nil {
		if now, err := os.Stat(path); err == nil && os.SameFile(opened, now) {
			moved, _ = s.quarantineFile(path, want.Encoded())
		}
	}
	where := "it could not be moved to quarantine; remove it by hand"
	if moved != "" {
		where = "it was moved to " + moved
	}
	return errs.New(errs.Integrity, "blob %s at %s hashes to %s: it was damaged on disk; %s, and the next pull fetches it again", want, path, got, where)
}

// quarantineFile moves path into quarantine/ under a name that never collides, and returns it.
func (s *Store) quarantineFile(path, name string) (string, error) {
	dst := filepath.Join(s.quarantine, fmt.Sprintf("%s.%d", name, time.Now().UnixNano()))
	if err := os.Rename(path, dst); err != nil {
		return "", pathErr(err, "moving a damaged blob to quarantine from", path)
	}
	atomicSyncDirs(s.blobs, s.quarantine)
	return dst, nil
}

// Quarantine moves the blob with digest d aside, whatever its content, and returns where it went:
// for a blob that can't be read (its mode was changed, its disk sector is bad), which the next
// pull can then fetch again. A blob that is not there is an errs.NotFound error.
func (s *Store) Quarantine(d digest.Digest) (string, error) {
	if err := checkDigest(d); err != nil {
		return "", err
	}
	if _, err := os.Lstat(s.Path(d)); errors.Is(err, fs.ErrNotExist) {
		return "", errs.Wrap(err, errs.NotFound, "blob %s is not in the store at %s", d, s.root)
	}
	return s.quarantineFile(s.Path(d), d.Encoded())
}

// Verify re-hashes the blob with digest d. A mismatch is an errs.Integrity error and the blob is
// quarantined.
func (s *Store) Verify(ctx context.Context, d digest.Digest) error {
	buf := bufpool.Get(chunkSize)
	defer bufpool.Put(buf)
	_, err := s.verifyOne(ctx, d, *buf)
	return err
}

// verifyOne hashes one blob with buf and returns the bytes read.
func (s *Store) verifyOne(ctx context.Context, d digest.Digest, buf []byte) (int64, error) {
	f, err := s.open(d)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h := sha256.New()
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		m, err := f.Read(buf)
		h.Write(buf[:m])
		n += int64(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, pathErr(err, "reading", f.Name())
		}
	}
	if got := digest.NewDigest(digest.SHA256, h); got != d {
		return n, s.damaged(f, d, got)
	}
	return n, nil
}

// VerifyAll re-hashes every blob on workers goroutines (runtime.NumCPU() when workers <= 0).
// Damaged blobs, and files in blobs/sha256 whose names are not digests, are quarantined and
// listed. The error is for failures to do the job (a folder that can't be listed, ctx), not for
// what was found.
func (s *Store) VerifyAll(ctx context.Context, workers int) (VerifyReport, error) {
	return s.VerifyAllWith(ctx, workers, nil)
}

// VerifyAllWith is VerifyAll that also lets inspect look at each blob as it is re-hashed, in the
// same read (VerifyRead): a blob that hashes right but that inspect refuses is quarantined and
// listed too, with inspect's words. nil inspects nothing.
func (s *Store) VerifyAllWith(ctx context.Context, workers int, inspect func(blob ReaderAt, stream io.Reader) error) (VerifyReport, error) {
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	entries, err := os.ReadDir(s.blobs)
	if err != nil {
		return VerifyReport{}, pathErr(err, "listing", s.blobs)
	}
	var (
		mu  sync.Mutex
		rep = VerifyReport{Damaged: []Damage{}}
	)
	names := make(chan string)
	g, gctx := errgroup.WithContext(ctx)
	for i := 0; i < workers; i++ {
		g.Go(func() error {
			buf := bufpool.Get(chunkSize)
			defer bufpool.Put(buf)
			for name := range names {
				n, checked, dms, err := s.verifyEntry(gctx, name, *buf, inspect)
				mu.Lock()
				if checked {
					rep.Checked++
					rep.Bytes += n
				}
				rep.Damaged = append(rep.Damaged, dms...)
				mu.Unlock()
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(names)
		for _, e := range entries {
			select {
			case names <- e.Name():
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return rep, err
	}
	sort.Slice(rep.Damaged, func(i, j int) bool { return rep.Damaged[i].Path < rep.Damaged[j].Path })
	return rep, nil
}

// verifyEntry checks the file name of blobs/sha256 for VerifyAllWith: whether it was a blob to
// check and the bytes read, what was found wrong, and an error that ends the whole job (ctx).
func (s *Store) verifyEntry(ctx context.Context, name string, buf []byte, inspect func(blob ReaderAt, stream io.Reader) error) (int64, bool, []Damage, error) {
	path := filepath.Join(s.blobs, name)
	d, ok := hexDigest(name)
	if !ok {
		dm := Damage{Path: path, Problem: "not named by a sha256 digest"}
		if moved, err := s.quarantineFile(path, "stray-"+name); err == nil {
			dm.Quarantined = moved
		}
		return 0, false, []Damage{dm}, nil
	}
	var (
		n          int64
		found, err error
	)
	if inspect != nil {
		n, found, err = s.verifyRead(ctx, d, inspect)
	} else {
		n, err = s.verifyOne(ctx, d, buf)
	}
	switch {
	case err == nil && found != nil:
		return n, true, []Damage{s.refused(d, path, found)}, nil
	case err == nil, errors.Is(err, errs.NotFound):
		// gone meanwhile: removed by gc or quarantined by another verifier
		return n, true, nil, nil
	case errors.Is(err, errs.Integrity):
		dm := Damage{Digest: d, Path: path, Problem: errs.Message(err)}
		if q, qerr := s.latestQuarantine(name); qerr == nil {
			dm.Quarantined = q
		}
		return n, true, []Damage{dm}, nil
	case ctx.Err() != nil:
		return n, true, nil, ctx.Err()
	}
	return n, true, []Damage{{Digest: d, Path: path, Problem: errs.Message(err)}}, nil
}

// refused quarantines the blob d at path, which hashes right but holds what inspect refused,
// and is the damage to report.
func (s *Store) refused(d digest.Digest, path string, found error) Damage {
	dm := Damage{Digest: d, Path: path, Problem: errs.Message(found)}
	moved, err := s.Quarantine(d)
	switch {
	case err == nil:
		dm.Quarantined = moved
		dm.Problem += "; it was moved to " + moved
	case !errors.Is(err, errs.NotFound):
		dm.Problem += "; it could not be moved to quarantine (" + errs.Message(err) + "); remove it by hand"
	}
	return dm
}

// latestQuarantine finds where a blob named hex was just moved.
func (s *Store) latestQuarantine(hex string) (string, error) {
	matches, err := filepath.Glob(filepath.Join(s.quarantine, hex+".*"))
	if err != nil || len(matches) == 0 {
		return "", fs.ErrNotExist
	}
	sort.Strings(matches)
	return matches[len(matches)-1], nil
}

// atomicSyncDirs makes renames between folders durable; failures only weaken durability.
func atomicSyncDirs(dirs ...string) {
	for _, d := range dirs {
		if f, err := os.Open(d); err == nil {
			f.Sync()
			f.Close()
		}
	}
}
