package cas

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/safefile"
)

// IngestGrace is how old a temporary file in ingest/ must be before GC considers it. A live
// ingest holds an flock on its temporary file, and GC never removes a file that is locked; the
// grace covers the two instants when a live ingest's file is not locked (between its creation and
// the flock, and between the close at commit and the rename). Both last microseconds, so a few
// seconds are ample, and a leftover of a killed pull goes at the next gc after them.
const IngestGrace = 3 * time.Second

// ResumeGrace is how long GC keeps the bytes of a download that was killed or lost its
// connection, so that a later pull of the same blob continues it instead of starting over. A
// --older-than shorter than that applies to them too (never shorter than IngestGrace), so that
// `mur cache gc --older-than 0s` clears everything no process holds.
const ResumeGrace = 24 * time.Hour

// resumeGrace is how old a resumable ingest no process holds must be before GC removes it.
func resumeGrace(olderThan time.Duration) time.Duration {
	if olderThan >= 0 && olderThan < ResumeGrace {
		return max(olderThan, IngestGrace)
	}
	return ResumeGrace
}

// GCOptions says what GC may remove.
type GCOptions struct {
	Keep map[digest.Digest]bool // blobs never removed, e.g. every digest a lock pins
	// Pinned, when set, names more blobs never to remove. GC calls it after it has taken its
	// exclusive lock and read the leases, so that a pin written by a process whose lease GC did
	// not see (it ended before) is in what Pinned reads: the caller reads the locks of the
	// registered roots there.
	Pinned func(ctx context.Context) (map[digest.Digest]bool, error)
	// OlderThan removes unpinned blobs unused for at least this long; a negative value removes
	// none by age (a trim to MaxSize alone).
	OlderThan time.Duration
	// MaxSize, when positive, then removes unpinned blobs, least recently used first, until the
	// blobs left hold at most MaxSize bytes.
	MaxSize int64
	DryRun  bool      // report what would go, remove nothing
	Now     time.Time // the present; zero means time.Now()
	// Evict, when set, is called for each blob just before it is removed (on a dry run, instead),
	// while it can still be read, so that what derives from it (kept payloads, compiled modules)
	// goes with it. It returns the paths it removed, or would remove. What it can't remove is
	// only a cache that costs a recompile; it never stops GC.
	Evict func(ctx context.Context, d digest.Digest, dryRun bool) []string
}

// GC rules, as reported for each removed blob.
const (
	RuleOlderThan = "older-than"
	RuleMaxSize   = "max-size"
)

// RemovedBlob is a blob GC removed, or would remove, and why.
type RemovedBlob struct {
	BlobInfo
	Rule   string `json:"rule"`   // RuleOlderThan or RuleMaxSize
	Reason string `json:"reason"` // the rule applied to this blob, in words
}

// GCReport says what GC removed, or would remove on a dry run.
type GCReport struct {
	Blobs      []RemovedBlob `json:"blobs"`       // blobs removed
	Derived    []string      `json:"derived"`     // what Evict removed with them
	Ingest     []string      `json:"ingest"`      // leftover temporary files removed
	Quarantine []string      `json:"quarantine"`  // quarantined files removed
	Freed      int64         `json:"freed_bytes"` // bytes of blobs, leftovers and quarantined files
	Kept       int           `json:"kept"`        // blobs that stay
	Pinned     int           `json:"pinned"`      // of those, blobs a lock or a lease keeps
	InUse      int           `json:"in_use"`      // of the pinned, blobs only a pull in flight keeps
	Recent     int           `json:"recent"`      // kept unpinned: used within OlderThan, and under MaxSize
	Leases     int           `json:"leases"`      // live leases: pulls in flight
	Size       int64         `json:"size_bytes"`  // bytes of the blobs that stay
	// OverMaxSize is set when the blobs that stay still exceed MaxSize: what is pinned alone
	// is larger than the cap.
	OverMaxSize bool `json:"over_max_size"`
	DryRun      bool `json:"dry_run"`
}

// gcLock is held exclusively while GC removes blobs, and shared by commits and by Lease.Add, so
// that a blob a commit found already present (or just renamed) is marked used before GC can judge
// it, and a digest added to a lease is seen by every GC that has not finished yet.
func (s *Store) gcLock() string { return filepath.Join(s.root, "gc.lock") }

// GC removes leftovers of ingests that died (files in ingest/ that no process holds locked and
// that are older than IngestGrace), quarantined files older than OlderThan, and blobs that
// nothing keeps: first those whose last use is at least OlderThan ago, then, while the rest
// exceed MaxSize, the least recently used. A blob in Keep, in Pinned's answer or in a live lease
// is never removed. A blob used between the listing and its removal by age is spared, because
// its last use is read again just before.
func (s *Store) GC(ctx context.Context, opt GCOptions) (GCReport, error) {
	now := opt.Now
	if now.IsZero() {
		now = time.Now()
	}
	rep := GCReport{Blobs: []RemovedBlob{}, Derived: []string{}, Ingest: []string{}, Quarantine: []string{}, DryRun: opt.DryRun}

	if err := s.gcIngest(ctx, now, opt, &rep); err != nil {
		return rep, err
	}

	if !opt.DryRun {
		unlock, err := lockedfile.Lock(ctx, s.gcLock())
		if err != nil {
			return rep, pathErr(err, "locking", s.gcLock())
		}
		defer unlock()
	}
	// Leases first, then the pins: a pull that pinned its blobs and then released its lease
	// before this point wrote its lock before it, so Pinned reads that pin.
	keep, live, err := s.leased(ctx, now, opt.DryRun)
	if err != nil {
		return rep, err
	}
	rep.Leases = live
	leasedOnly := maps.Clone(keep) // what a pull in flight alone keeps, for the report
	for d := range opt.Keep {
		keep[d] = true
		delete(leasedOnly, d)
	}
	if opt.Pinned != nil {
		more, err := opt.Pinned(ctx)
		if err != nil {
			return rep, err
		}
		for d := range more {
			keep[d] = true
			delete(leasedOnly, d)
		}
	}
	blobs, err := s.List(ctx)
	if err != nil {
		return rep, err
	}
	remove := func(b BlobInfo, rule, reason string) error {
		if opt.Evict != nil {
			rep.Derived = append(rep.Derived, opt.Evict(ctx, b.Digest, opt.DryRun)...)
		}
		if !opt.DryRun {
			p := s.Path(b.Digest)
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return pathErr(err, "removing", p)
			}
			os.Remove(filepath.Join(s.uses, b.Digest.Encoded()))
		}
		rep.Blobs = append(rep.Blobs, RemovedBlob{BlobInfo: b, Rule: rule, Reason: reason})
		rep.Freed += b.Size
		return nil
	}
	var stay []BlobInfo
	cutoff := now.Add(-opt.OlderThan)
	for _, b := range blobs {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if keep[b.Digest] {
			rep.Pinned++
			if leasedOnly[b.Digest] {
				rep.InUse++
			}
			stay = append(stay, b)
			continue
		}
		if opt.OlderThan < 0 || b.LastUse.After(cutoff) {
			stay = append(stay, b)
			continue
		}
		if !opt.DryRun {
			// Read the last use again: a process may have used the blob since List.
			if cur, err := s.Stat(b.Digest); err != nil || cur.LastUse.After(cutoff) {
				stay = append(stay, b)
				continue
			}
		}
		reason := fmt.Sprintf("unused since %s, longer than --older-than %s", b.LastUse.Local().Format("2006-01-02 15:04"), FormatAge(opt.OlderThan))
		if err := remove(b, RuleOlderThan, reason); err != nil {
			return rep, err
		}
	}
	var size int64
	for _, b := range stay {
		size += b.Size
	}
	if opt.MaxSize > 0 && size > opt.MaxSize {
		// Least recently used first; equal times by digest, so that a dry run and the real run
		// pick the same blobs.
		sort.SliceStable(stay, func(i, j int) bool {
			if !stay[i].LastUse.Equal(stay[j].LastUse) {
				return stay[i].LastUse.Before(stay[j].LastUse)
			}
			return stay[i].Digest < stay[j].Digest
		})
		var left []BlobInfo
		for i, b := range stay {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			if size <= opt.MaxSize || keep[b.Digest] {
				left = append(left, b)
				if size <= opt.MaxSize {
					left = append(left, stay[i+1:]...)
					break
				}
				continue
			}
			reason := fmt.Sprintf("least recently used (last used %s) while the cache held %s, over --max-size %s",
				b.LastUse.Local().Format("2006-01-02 15:04"), FormatSize(size), FormatSize(opt.MaxSize))
			if err := remove(b, RuleMaxSize, reason); err != nil {
				return rep, err
			}
			size -= b.Size
		}
		stay = left
		rep.OverMaxSize = size > opt.MaxSize
	}
	rep.Kept = len(stay)
	rep.Recent = rep.Kept - rep.Pinned // pinned blobs always stay; the others stay for their age
	rep.Size = size
	if !opt.DryRun && len(rep.Blobs) > 0 {
		atomicSyncDirs(s.blobs)
	}

	if opt.OlderThan >= 0 {
		if err := s.gcQuarantine(cutoff, opt.DryRun, &rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func (s *Store) gcIngest(ctx context.Context, now time.Time, opt GCOptions, rep *GCReport) error {
	dryRun := opt.DryRun
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
		if err != nil {
			continue
		}
		if !fi.Mode().IsRegular() {
			// Planted: mur only ever makes regular files here. Out of the way once it is past
			// the grace, so that no ingest of its name trips on it.
			if now.Sub(fi.ModTime()) >= IngestGrace && !dryRun {
				s.moveAside(p)
			}
			continue
		}
		grace := IngestGrace
		resumable := strings.HasPrefix(e.Name(), resumePrefix)
		if resumable && strings.HasSuffix(e.Name(), resumeSuffix) {
			// A record goes with its bytes; one whose bytes are gone is a leftover.
			if _, err := os.Lstat(strings.TrimSuffix(p, resumeSuffix)); err == nil || now.Sub(fi.ModTime()) < IngestGrace {
				continue
			}
			if _, err := os.Lstat(p); err != nil {
				continue // removed with its bytes just now
			}
			if !dryRun {
				os.Remove(p)
			}
			rep.Ingest = append(rep.Ingest, p)
			rep.Freed += fi.Size()
			continue
		}
		if resumable {
			grace = resumeGrace(opt.OlderThan)
		}
		if now.Sub(fi.ModTime()) < grace {
			continue
		}
		f, err := safefile.Open(p, os.O_RDONLY, 0)
		if notRegular(err) {
			if !dryRun {
				s.moveAside(p)
			}
			continue
		}
		if err != nil {
			continue
		}
		// A lock we can take means no live ingest holds the file; keep it while removing, so
		// that the check and the removal are one step for any ingest that would look.
		if lockedfile.TryLock(f) != nil {
			f.Close()
			continue
		}
		if !dryRun {
			remove := os.Remove
			if resumable {
				remove = removeResumable
			}
			if err := remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
