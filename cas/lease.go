package cas

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/safefile"
)

// A lease keeps blobs from GC while a process brings them in, the way containerd's leases do:
// between the moment a pull learns a digest and the moment a lock pins it, nothing else names the
// blob, and a GC with --older-than 0s would take it. A lease is a file in leases/ that its process
// holds flocked and appends digests to. GC keeps every digest of a lease whose flock is held, and
// removes a lease file whose flock it can take: its process is gone, and the kernel released the
// flock when it died, however it died.

const (
	leasePrefix     = "lease-"
	leaseTempPrefix = ".tmp-"
)

// Lease names the blobs one process is bringing in. It is safe for concurrent use.
type Lease struct {
	s    *Store
	mu   sync.Mutex
	f    *os.File
	path string
	seen map[digest.Digest]bool
}

// NewLease starts a lease. Release it when the blobs it names are pinned, or no longer wanted.
func (s *Store) NewLease(ctx context.Context) (*Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := atomicfile.MkdirPrivate(s.leases); err != nil {
		return nil, err
	}
	var b [12]byte
	rand.Read(b[:])
	name := hex.EncodeToString(b[:])
	// The file is locked under a name GC ignores and only then renamed into view, so that GC
	// never sees an unlocked lease of a live process and takes it for a dead one's.
	tmp := filepath.Join(s.leases, leaseTempPrefix+name)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, pathErr(err, "creating a lease in", s.leases)
	}
	if err := lockedfile.TryLock(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, pathErr(&fs.PathError{Op: "flock", Path: tmp, Err: err}, "locking", tmp)
	}
	final := filepath.Join(s.leases, leasePrefix+name)
	if err := os.Rename(tmp, final); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, pathErr(err, "creating the lease", final)
	}
	return &Lease{s: s, f: f, path: final, seen: map[digest.Digest]bool{}}, nil
}

// Add names d in the lease. Once Add returns, d is safe from every GC: a GC that started earlier
// has finished (Add waits for it), and a later one reads the lease. So a caller that adds d and
// then finds the blob in the store may rely on it staying there while the lease is held. A nil
// Lease (a read-only home, where no GC can run either) adds nothing.
func (l *Lease) Add(ctx context.Context, d digest.Digest) error {
	if err := checkDigest(d); err != nil || l == nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return pathErr(fs.ErrClosed, "adding to the lease", l.path)
	}
	if !l.seen[d] {
		// One write of a whole line: GC reads the file without a lock and skips a torn line, which
		// can only be one whose Add has not returned yet.
		if _, err := l.f.Write([]byte(d.String() + "\n")); err != nil {
			return pathErr(err, "writing the lease", l.path)
		}
		l.seen[d] = true
	}
	unlock, err := lockedfile.RLock(ctx, l.s.gcLock())
	if err != nil {
		return pathErr(err, "locking", l.s.gcLock())
	}
	unlock()
	return nil
}

// Release ends the lease. It is safe to call more than once.
func (l *Lease) Release() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := os.Remove(l.path)
	l.f.Close()
	l.f = nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return pathErr(err, "removing the lease", l.path)
	}
	return nil
}

// leased reads every live lease and returns the digests they name, removing the leases of
// processes that are gone (and, with dryRun, only counting them).
func (s *Store) leased(ctx context.Context, now time.Time, dryRun bool) (map[digest.Digest]bool, int, error) {
	out := map[digest.Digest]bool{}
	entries, err := os.ReadDir(s.leases)
	if errors.Is(err, fs.ErrNotExist) {
		return out, 0, nil
	}
	if err != nil {
		return nil, 0, pathErr(err, "listing", s.leases)
	}
	live := 0
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		name := e.Name()
		p := filepath.Join(s.leases, name)
		isLease := strings.HasPrefix(name, leasePrefix)
		if !isLease {
			// A lease being created, or one whose process died in NewLease: the latter goes once
			// it is older than the grace and unlocked.
			if fi, err := e.Info(); err != nil || now.Sub(fi.ModTime()) < IngestGrace {
				continue
			}
		}
		f, err := safefile.Open(p, os.O_RDONLY, 0)
		if notRegular(err) {
			// Never a lease mur made, which is a plain file: a FIFO here would hang every gc.
			if !dryRun {
				s.moveAside(p)
			}
			continue
		}
		if err != nil {
			continue // released meanwhile
		}
		if lockedfile.TryRLock(f) == nil {
			// Nobody holds it: its process is gone.
			if !dryRun {
				os.Remove(p)
			}
			f.Close()
			continue
		}
		if isLease {
			live++
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if d, err := digest.Parse(sc.Text()); err == nil && checkDigest(d) == nil {
					out[d] = true
				}
			}
		}
		f.Close()
	}
	return out, live, nil
}
