// Package cas is mur's SHA-256 content-addressed store, shaped like containerd's content store.
//
// Layout under the root ($MURMUR_HOME/cas), every folder 0700:
//
//	blobs/sha256/<hex>  whole, verified blobs, read-only files (0444)
//	ingest/             temporary files of ingests in flight, never mistaken for blobs
//	records/            the pull records, one JSON object a line
//	quarantine/         blobs whose content no longer matched their name, and whatever stood
//	                    where a file was expected (a symlink, a FIFO: aside.go), moved aside
//	uses/<hex>          empty files whose mtime is the blob's last use
//	leases/             one flocked file per process bringing blobs in, naming their digests
//	roots/<hash>        registered GC roots: each names a file (a murmur.lock) whose pins stay
//	gc.lock             held exclusively by GC while it removes blobs, shared by commits
//	roots.lock          held exclusively while GC prunes roots, shared while one is registered
//
// Last use lives beside the blob rather than in it, so that recording a use never rewrites a
// read-only blob and works for blobs that other processes have open.
//
// An ingest in flight holds an flock on its temporary file. GC removes a file in ingest/ only when
// it can take that lock (the writer is gone: killed, crashed) and the file is older than
// IngestGrace, so a slow but live ingest is never removed, however long it stalls, and a killed
// one's leftover goes at the next GC. A resumable ingest (resume.go: ingest/resume-<hex> and its
// record) is kept longer, ResumeGrace, so that the next pull of its digest continues it.
//
// Several processes may share one store. A blob only ever appears at its final name through a
// rename of a complete, fsynced and verified temporary file, so readers never see a torn blob,
// and two processes ingesting the same digest both succeed.
package cas

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/safefile"
)

// Store is a content-addressed store rooted at one folder. It is safe for concurrent use by
// several goroutines and several processes.
type Store struct {
	root       string
	blobs      string // blobs/sha256
	ingest     string
	records    string
	quarantine string
	uses       string
	leases     string
	roots      string
	// durability makes a commit survive a power cut; tests replace it to record the order.
	durability atomicfile.Durability
}

// BlobInfo describes one blob in the store.
type BlobInfo struct {
	Digest  digest.Digest `json:"digest"`
	Size    int64         `json:"size"`
	LastUse time.Time     `json:"last_use"`
}

// Open opens the store at root, creating its folders at 0700 and tightening them back to 0700
// when someone loosened them. A store on a read-only file system opens for reading as long as
// its folders already exist with the right modes.
func Open(root string) (*Store, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, errs.Wrap(err, errs.Usage, "the CAS root %q can't be made absolute: %v", root, err)
	}
	s := &Store{
		root:       abs,
		blobs:      filepath.Join(abs, "blobs", "sha256"),
		ingest:     filepath.Join(abs, "ingest"),
		records:    filepath.Join(abs, "records"),
		quarantine: filepath.Join(abs, "quarantine"),
		uses:       filepath.Join(abs, "uses"),
		leases:     filepath.Join(abs, "leases"),
		roots:      filepath.Join(abs, "roots"),
	}
	// leases/ and roots/ are made when first used, so that a home an older mur made still opens
	// for reading where it can't be written.
	for _, dir := range []string{abs, filepath.Join(abs, "blobs"), s.blobs, s.ingest, s.records, s.quarantine, s.uses} {
		if err := atomicfile.MkdirPrivate(dir); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Root is the folder the store lives in.
func (s *Store) Root() string { return s.root }

// TempDir is a folder on the store's own disk for files that live no longer than a command and
// that no one else must see (a payload decompressed to be mapped: artifact.MapPayload). Files
// there have no name, or carry atomicfile's temporary prefix, so gc takes them for what they are.
func (s *Store) TempDir() string { return s.ingest }

// Path is where the blob with digest d lives, whether or not it is there. It is "" for a digest
// that is malformed or not sha256, so that no hostile digest can name a path outside the store.
// It is for diagnostics and tests: read blobs through ReaderAt or VerifiedReaderAt.
func (s *Store) Path(d digest.Digest) string {
	if checkDigest(d) != nil {
		return ""
	}
	return filepath.Join(s.blobs, d.Encoded())
}

// Has reports whether the blob with digest d is in the store.
func (s *Store) Has(d digest.Digest) bool {
	p := s.Path(d)
	if p == "" {
		return false
	}
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// Stat describes the blob with digest d. A blob that is not there is an errs.NotFound error.
func (s *Store) Stat(d digest.Digest) (BlobInfo, error) {
	if err := checkDigest(d); err != nil {
		return BlobInfo{}, err
	}
	fi, err := os.Stat(s.Path(d))
	if errors.Is(err, fs.ErrNotExist) {
		return BlobInfo{}, errs.Wrap(err, errs.NotFound, "blob %s is not in the store at %s; pull the artifact that holds it", d, s.root)
	}
	if err != nil {
		return BlobInfo{}, pathErr(err, "reading", s.Path(d))
	}
	return BlobInfo{Digest: d, Size: fi.Size(), LastUse: s.lastUse(d.Encoded(), fi)}, nil
}

// Touch records that the blob with digest d was used now, for GC. It does not rewrite the blob.
// It fails on a read-only home; callers that only read may ignore that.
func (s *Store) Touch(d digest.Digest) error {
	if err := checkDigest(d); err != nil {
		return err
	}
	return s.touchHex(d.Encoded(), time.Now())
}

func (s *Store) touchHex(hex string, now time.Time) error {
	p := filepath.Join(s.uses, hex)
	err := touchNoFollow(p, now)
	if errors.Is(err, fs.ErrNotExist) {
		var f *os.File
		f, err = safefile.Open(p, os.O_WRONLY|os.O_CREATE, 0o600)
		if err == nil {
			f.Close()
			err = touchNoFollow(p, now)
		}
	}
	if err != nil {
		return pathErr(err, "recording the last use in", p)
	}
	return nil
}

// lastUse is the mtime of the use marker, or the blob's own mtime when it was never touched.
func (s *Store) lastUse(hex string, blob fs.FileInfo) time.Time {
	if fi, err := os.Stat(filepath.Join(s.uses, hex)); err == nil && fi.ModTime().After(blob.ModTime()) {
		return fi.ModTime()
	}
	return blob.ModTime()
}

// List describes every blob in the store, sorted by digest. Files in blobs/sha256 whose names are
// not digests are left out; VerifyAll reports them.
func (s *Store) List(ctx context.Context) ([]BlobInfo, error) {
	entries, err := os.ReadDir(s.blobs)
	if err != nil {
		return nil, pathErr(err, "listing", s.blobs)
	}
	out := make([]BlobInfo, 0, len(entries))
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d, ok := hexDigest(e.Name())
		if !ok {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by a concurrent gc or quarantine
		}
		if err != nil {
			return nil, pathErr(err, "reading", filepath.Join(s.blobs, e.Name()))
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		out = append(out, BlobInfo{Digest: d, Size: fi.Size(), LastUse: s.lastUse(e.Name(), fi)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Digest < out[j].Digest })
	return out, nil
}

// checkDigest refuses anything but sha256:<64 lowercase hex> with a usage error.
func checkDigest(d digest.Digest) error {
	if _, err := ref.ParseDigest(string(d)); err != nil {
		return err
	}
	return nil
}

// hexDigest turns a file name under blobs/sha256 back into a digest.
func hexDigest(name string) (digest.Digest, bool) {
	if len(name) != 64 || strings.ToLower(name) != name {
		return "", false
	}
	d := digest.NewDigestFromEncoded(digest.SHA256, name)
	if d.Validate() != nil {
		return "", false
	}
	return d, true
}

// pathErr turns an OS error into an errs.IO error that names the path and says what to do.
func pathErr(err error, doing, path string) error {
	var hint string
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		hint = "the disk is full; free some space (mur cache gc helps) and try again"
	case errors.Is(err, syscall.EROFS):
		hint = "mur can't write there; point MURMUR_HOME or --home at a writable folder"
	case errors.Is(err, fs.ErrPermission):
		hint = "check the folder's owner and permissions"
	default:
		hint = "check the disk and the folder's permissions"
	}
	return errs.Wrap(err, errs.IO, "%s %s failed: %v; %s", doing, path, errs.OSCause(err), hint)
}
