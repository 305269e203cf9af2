package cas

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/safefile"
)

// Outcome is how a pull ended, as recorded.
type Outcome string

// Outcomes of a pull.
const (
	OutcomePulled   Outcome = "pulled"
	OutcomeCacheHit Outcome = "cache-hit"
	OutcomeFailed   Outcome = "failed"
	// OutcomeMirrored records a write-through: the blob was pushed to the mirror named in
	// Source.
	OutcomeMirrored Outcome = "mirrored"
)

// Skip is a place a pull asked before the one that answered, and why it did not.
type Skip struct {
	Place  string `json:"place"`
	Token  string `json:"token"`
	Reason string `json:"reason"`
}

// Record is one pull, as appended to records/records.jsonl.
type Record struct {
	Time        time.Time     `json:"time"`
	Ref         string        `json:"ref"` // the reference as asked
	Name        string        `json:"name,omitempty"`
	Version     string        `json:"version,omitempty"`
	Platform    string        `json:"platform,omitempty"`
	Digest      digest.Digest `json:"digest,omitempty"`
	Size        int64         `json:"size,omitempty"`
	Source      string        `json:"source,omitempty"` // oci://…, oci-layout:…, github:owner/repo, cas
	Release     string        `json:"release,omitempty"`
	Asset       string        `json:"asset,omitempty"`
	OwnerID     int64         `json:"owner_id,omitempty"`
	Transferred int64         `json:"transferred"` // bytes over the network; 0 for a cache hit
	DurationMS  int64         `json:"duration_ms"`
	Outcome     Outcome       `json:"outcome"` // OutcomePulled, OutcomeCacheHit, OutcomeFailed or OutcomeMirrored
	Error       string        `json:"error,omitempty"`
	Skipped     []Skip        `json:"skipped,omitempty"` // places asked before Source, and why they did not answer
	Notes       []string      `json:"notes,omitempty"`   // what the download had to do: continue, start over
	// Provenance is what the artifact's verified Sigstore bundle proved, when it had one.
	Provenance *Provenance `json:"provenance,omitempty"`
	// Private is set when the place needed the user's credentials to serve the blob (a private
	// repository, a registry that asked for auth).
	Private bool `json:"private,omitempty"`
	// ResolvedOffline is set when "latest" was resolved offline, from what the cache already
	// knew, rather than by asking a store or source.
	ResolvedOffline bool `json:"resolved_offline,omitempty"`
	// VersionList is the blob holding the versions "latest" was chosen from when it was resolved
	// online, kept so that an offline "latest" later chooses from the same list.
	VersionList digest.Digest `json:"version_list,omitempty"`
}

// Provenance is the record of a verified bundle: the bundle itself is a blob of the CAS.
type Provenance struct {
	Kind         string        `json:"kind"`
	Bundle       digest.Digest `json:"bundle"`
	Signer       string        `json:"signer"`
	OwnerID      int64         `json:"owner_id,omitempty"`
	RepoID       int64         `json:"repo_id,omitempty"`
	Repository   string        `json:"repository,omitempty"`
	SourceCommit string        `json:"source_commit,omitempty"`
}

func (s *Store) recordsFile() string { return filepath.Join(s.records, "records.jsonl") }
func (s *Store) recordsLock() string { return filepath.Join(s.records, "records.lock") }

// AppendRecord appends r as one JSON line, in one write under the records lock, and fsyncs it.
// A crash can at worst leave a torn last line, which Records skips and the next append closes.
func (s *Store) AppendRecord(r Record) error { return s.AppendRecords([]Record{r}) }

// AppendRecords appends rs, one JSON line each, in one write and one fsync: a pull of many
// artifacts records them all at once.
func (s *Store) AppendRecords(rs []Record) error {
	var line []byte
	for _, r := range rs {
		for _, d := range []digest.Digest{r.Digest, r.VersionList} {
			if d != "" {
				if err := checkDigest(d); err != nil {
					return err
				}
			}
		}
		b, err := json.Marshal(r)
		if err != nil {
			return errs.Wrap(err, errs.Internal, "can't encode the pull record of %s: %v", r.Ref, err)
		}
		line = append(append(line, b...), '\n')
	}
	if len(line) == 0 {
		return nil
	}
	unlock, err := lockedfile.Lock(context.Background(), s.recordsLock())
	if err != nil {
		return pathErr(err, "locking", s.recordsLock())
	}
	defer unlock()
	p := s.recordsFile()
	// Never through a link, never blocking on a FIFO: what is planted at the name instead of the
	// records file is moved aside into quarantine/, and the records start afresh.
	f, err := safefile.Open(p, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if notRegular(err) {
		if err := s.moveAside(p); err != nil {
			return err
		}
		f, err = safefile.Open(p, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	}
	if err != nil {
		return pathErr(err, "opening", p)
	}
	defer f.Close()
	// A torn line left by a crash has no newline; end it first, so that this record starts a
	// line of its own instead of being glued to the wreck.
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			line = append([]byte{'\n'}, line...)
		}
	}
	if _, err := f.Write(line); err != nil {
		return pathErr(err, "appending a pull record to", p)
	}
	if err := f.Sync(); err != nil {
		return pathErr(err, "syncing", p)
	}
	s.indexProvenance(rs)
	return nil
}

// The provenance index: records/provenance/<hex> lists the bundles the records verified for blob
// <hex>, one digest a line. Every pull of a blob the CAS holds asks it (ProvenanceOf), and
// reading the whole records file for that would cost every warm pull the length of the home's
// history. The records stay the truth; the index is a hint that a missing or torn file only
// makes quieter: a blob it does not name is not re-verified.
func (s *Store) provenanceIndex(d digest.Digest) string {
	return filepath.Join(s.records, "provenance", d.Encoded())
}

func (s *Store) indexProvenance(rs []Record) {
	for _, r := range rs {
		if r.Provenance == nil || r.Digest == "" || checkDigest(r.Digest) != nil || checkDigest(r.Provenance.Bundle) != nil {
			continue
		}
		if slices.Contains(s.ProvenanceOf(r.Digest), r.Provenance.Bundle) {
			continue
		}
		p := s.provenanceIndex(r.Digest)
		if os.MkdirAll(filepath.Dir(p), 0o700) != nil {
			continue
		}
		f, err := safefile.Open(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			continue
		}
		_, _ = f.WriteString(r.Provenance.Bundle.String() + "\n")
		f.Close()
	}
}

// maxProvenanceIndex bounds what is read of one blob's provenance index: a few digests.
const maxProvenanceIndex = 64 << 10

// ProvenanceOf is the bundles the pull records verified for blob d, from the provenance index.
func (s *Store) ProvenanceOf(d digest.Digest) []digest.Digest {
	if checkDigest(d) != nil {
		return nil
	}
	data, err := safefile.ReadFile(s.provenanceIndex(d), maxProvenanceIndex)
	if err != nil {
		return nil
	}
	var out []digest.Digest
	for _, line := range strings.Split(string(data), "\n") {
		b := digest.Digest(strings.TrimSpace(line))
		if checkDigest(b) == nil && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

// Records reads the pull records, oldest first, keeping those for filter ("" keeps all). Lines
// that don't parse (a torn last line after a crash) are skipped.
func (s *Store) Records(filter digest.Digest) ([]Record, error) {
	if filter != "" {
		if err := checkDigest(filter); err != nil {
			return nil, err
		}
		// A line that does not name the digest can't be its record: passed over unparsed.
		return s.readRecords(func(line []byte) bool { return bytes.Contains(line, []byte(filter)) }, filter)
	}
	return s.readRecords(nil, "")
}

// readRecords reads the records file, parsing the lines keep accepts (nil: every line) and
// keeping the records of filter ("" for all).
func (s *Store) readRecords(keep func([]byte) bool, filter digest.Digest) ([]Record, error) {
	out := []Record{}
	p := s.recordsFile()
	f, err := safefile.OpenRead(p)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if notRegular(err) {
		return nil, errs.Wrap(err, errs.Integrity, "the pull records %v; mur reads no records through it. Remove it (the next pull starts the records afresh) and run again", err)
	}
	if err != nil {
		return nil, pathErr(err, "opening", p)
	}
	defer f.Close()
	// Appends are single writes under an exclusive lock, so reading needs no lock: at worst the
	// last line is still being written and is skipped like a torn one. A last line that lacks only
	// its newline is whole JSON and is kept.
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 && (keep == nil || keep(line)) {
			var r Record
			if json.Unmarshal(line, &r) == nil && (filter == "" || r.Digest == filter) {
				out = append(out, r)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, pathErr(err, "reading", p)
		}
	}
	return out, nil
}

// Recent keeps the records at or after since (zero keeps all) and then, when limit is above
// zero, the newest limit of them; the order stays oldest first.
func Recent(recs []Record, since time.Time, limit int) []Record {
	out := recs[:0:0]
	for _, r := range recs {
		if since.IsZero() || !r.Time.Before(since) {
			out = append(out, r)
		}
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}
