package cas

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/murmur-nexus/mur/internal/lockedfile"
)

// IngestGrace is how old a temporary file in ingest/ must be before GC considers it. A live
// ingest holds an flock on its temporary file, and GC never removes a file that is locked; the
// grace covers the two instants when a live ingest's file is not locked (between its creation and
// the flock, and between the close at commit and the rename). Both last microseconds, so a few
// seconds are ample, and a leftover of a killed pull goes at the next gc after them.
const IngestGrace = 3 * time.Second

// GCOptions says what GC may remove.
type GCOptions struct {
	Keep      map[digest.Digest]bool // blobs never removed, e.g. every digest a lock pins
	OlderThan time.Duration          // remove other blobs unused for at least this long
	DryRun    bool                   // report what would go, remove nothing
	Now       time.Time              // the present; zero means time.Now()
}

// GCReport says what GC removed, or would remove on a dry run.
type GCReport struct {
	Blobs      []BlobInfo `json:"blobs"`       // blobs removed
	Ingest     []string   `json:"ingest"`      // leftover temporary files removed
	Quarantine []string   `json:"quarantine"`  // quarantined files removed
	Freed      int64      `json:"freed_bytes"` // bytes of all of the above
	Kept       int        `json:"kept"`        // blobs that stay
	DryRun     bool       `json:"dry_run"`
}

// gcLock is held exclusively while GC removes blobs, and shared by commits, so that a blob a
// commit found already present (or just renamed) is marked used before GC can judge it.
func (s *Store) gcLock() string { return filepath.Join(s.root, "gc.lock") }

// GC removes leftovers of ingests that died (files in ingest/ that no process holds locked and
// that are older than IngestGrace), quarantined files older than OlderThan, and blobs not in Keep
// whose last use is at least OlderThan ago. A blob used between the listing and its removal is
// spared, because its last use is read again just before.
func (s *Store) GC(ctx context.Context, opt GCOptions) (GCReport, error) {
	now := opt.Now
	if now.IsZero() {
		now = time.Now()
	}
	rep := GCReport{Blobs: []BlobInfo{}, Ingest: []string{}, Quarantine: []string{}, DryRun: opt.DryRun}

	if err := s.gcIngest(ctx, now, opt.DryRun, &rep); err != nil {
		return rep, err
	}

	if !opt.DryRun {
		unlock, err := lockedfile.Lock(ctx, s.gcLock())
		if err != nil {
			return rep, pathErr(err, "locking", s.gcLock())
		}
		defer unlock()
	}
	blobs, err := s.List(ctx)
	if err != nil {
		return rep, err
	}
	cutoff := now.Add(-opt.OlderThan)
	for _, b := range blobs {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if opt.Keep[b.Digest] || b.LastUse.After(cutoff) {
			rep.Kept++
			continue
		}
		if !opt.DryRun {
			// Read the last use again: a process may have used the blob since List.
			if cur, err := s.Stat(b.Digest); err != nil || cur.LastUse.After(cutoff) {
				rep.Kept++
				continue
			}
			p := s.Path(b.Digest)
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return rep, pathErr(err, "removing", p)
			}
			os.Remove(filepath.Join(s.uses, b.Digest.Encoded()))
		}
		rep.Blobs = append(rep.Blobs, b)
		rep.Freed += b.Size
	}
	if !opt.DryRun && len(rep.Blobs) > 0 {
		atomicSyncDirs(s.blobs)
	}

	if err := s.gcQuarantine(cutoff, opt.DryRun, &rep); err != nil {
		return rep, err
	}
	return rep, nil
}

func (s *Store) gcIngest(ctx context.Context, now time.Time, dryRun bool, rep *GCReport) error {
	entries, err := os.ReadDir(s.ingest)
	if err != nil {
		return pathErr(err, "listing", s.ingest)
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := filepath.Join(s.ingest, e.Name())
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || now.Sub(fi.ModTime()) < IngestGrace {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		// A lock we can take means no live ingest holds the file; keep it while removing, so
		// that the check and the removal are one step for any ingest that would look.
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			f.Close()
			continue
		}
		if !dryRun {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				f.Close()
				return pathErr(err, "removing the leftover", p)
			}
		}
		f.Close()
		rep.Ingest = append(rep.Ingest, p)
		rep.Freed += fi.Size()
	}
	sort.Strings(rep.Ingest)
	return nil
}

func (s *Store) gcQuarantine(cutoff time.Time, dryRun bool, rep *GCReport) error {
	entries, err := os.ReadDir(s.quarantine)
	if err != nil {
		return pathErr(err, "listing", s.quarantine)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || quarantinedAt(e.Name(), fi).After(cutoff) {
			continue
		}
		p := filepath.Join(s.quarantine, e.Name())
		if !dryRun {
			if err := os.RemoveAll(p); err != nil {
				return pathErr(err, "removing", p)
			}
		}
		rep.Quarantine = append(rep.Quarantine, p)
		if fi.Mode().IsRegular() {
			rep.Freed += fi.Size()
		}
	}
	return nil
}

// quarantinedAt reads the time of quarantine from the name's suffix, since a rename keeps the
// blob's old mtime.
func quarantinedAt(name string, fi fs.FileInfo) time.Time {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		if ns, err := strconv.ParseInt(name[i+1:], 10, 64); err == nil {
			return time.Unix(0, ns)
		}
	}
	return fi.ModTime()
}
