package cas

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/safefile"
)

// A resumable ingest is one whose bytes outlive the process that fetched them, the way
// containerd's ingests do: a pull that is killed or loses its connection leaves
// ingest/resume-<hex> (the bytes) and ingest/resume-<hex>.json (a ResumeInfo), and the next
// ingest of that digest re-hashes the bytes it finds and continues after them. Like any ingest,
// the file is flocked by its writer for as long as it lives, so that two processes never write
// one file and GC never removes a live one; a second process that ingests the same digest at the
// same time gets an ordinary ingest of its own.
//
// Nothing about the bytes is trusted: the record only says how far the file is whole, the whole
// blob is hashed against its digest at Commit as any ingest's is, and a prefix that was damaged
// meanwhile makes that check fail, after which the caller starts over.

const (
	resumePrefix = "resume-"
	resumeSuffix = ".json"
	// maxResumeRecord bounds what is read of a record: a real one is a few hundred bytes, and
	// its spans merge as they are written, so even a ranged download's stays small.
	maxResumeRecord = 1 << 20
)

// ResumeInfo is what an ingest keeps beside its bytes so that a later process can continue it.
type ResumeInfo struct {
	Digest digest.Digest `json:"digest"`
	Size   int64         `json:"size"`
	// Store is where the bytes came from (oci://…, github:owner/repo).
	Store string `json:"store"`
	// Validator is the server's strong ETag for the blob, sent as If-Range when continuing, so
	// that a server whose content changed answers with the whole new body instead of a piece of
	// it. "" when the server gave none.
	Validator string `json:"validator,omitempty"`
	// Have lists the byte ranges the file holds when it was written at offsets (several
	// connections); empty for a file written from its start, which holds exactly its length.
	Have []Span `json:"have,omitempty"`
}

// Span is the byte range [Start, End) of a blob.
type Span struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// Len is the number of bytes in the span.
func (s Span) Len() int64 { return s.End - s.Start }

// Resumed says what a Writer from OpenResumable continued.
type Resumed struct {
	Offset int64      // bytes found, re-hashed and kept: the writer continues after them
	Held   int64      // bytes held in all, Offset included (more when written at offsets)
	Prev   ResumeInfo // the record the earlier ingest left
}

// resumable is the part of a Writer that keeps its ingest resumable.
type resumable struct {
	s       *Store
	meta    string
	info    ResumeInfo
	found   *Resumed // nil for a fresh ingest
	keep    bool     // Close keeps the bytes and the record
	trimmed bool     // the file holds only its prefix: ranges written at offsets were dropped
	// unsaved is a fresh ingest's record before it is first written: an empty file has nothing
	// to vouch for, so the record waits for the validator or the first byte, whichever comes
	// first. On a project pull that is one file created per blob instead of two.
	unsaved bool

	mu sync.Mutex // info, which the connections of a ranged fetch update at once
}

func (r *resumable) setHave(have []Span) {
	r.mu.Lock()
	r.info.Have = have
	r.mu.Unlock()
}

// OpenResumable starts the ingest of info.Digest, a blob of info.Size bytes fetched from
// info.Store, or continues the one a process that died left behind. Continuing re-hashes the
// bytes found; Writer.Resumed says how many there were. When another live process is ingesting
// the same digest, the Writer is an ordinary ingest of its own that nothing will continue.
// Call Writer.Keep before Close to leave the bytes for a later pull.
func (s *Store) OpenResumable(ctx context.Context, info ResumeInfo) (*Writer, error) {
	if err := checkDigest(info.Digest); err != nil {
		return nil, err
	}
	if info.Size < 0 {
		return nil, errs.New(errs.Internal, "a resumable ingest of %s needs the blob's size", info.Digest)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path := filepath.Join(s.ingest, resumePrefix+info.Digest.Encoded())
	var f *os.File
	for attempt := 0; ; attempt++ {
		var err error
		f, err = safefile.Open(path, os.O_RDWR|os.O_CREATE, 0o600)
		if notRegular(err) && attempt < 3 {
			// Planted, never written by mur: a link would have the blob written through it, a
			// FIFO would block here. Move it out of the way and start over on a fresh file.
			if err := s.moveAside(path); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, pathErr(err, "opening", path)
		}
		if err := lockedfile.TryLock(f); err != nil {
			f.Close()
			if lockedfile.Busy(err) {
				// Another process is fetching these bytes right now: fetch them again, as
				// two ingests of one digest always could.
				return s.NewWriter(ctx)
			}
			return nil, pathErr(&fs.PathError{Op: "flock", Path: path, Err: err}, "locking", path)
		}
		// The name may have moved on while this process waited for nothing: a commit renamed
		// the file into blobs/, or gc removed it. Writing through a handle of either would
		// damage a blob or be lost, so only the file the name still leads to will do.
		if sameName(f, path) {
			break
		}
		f.Close()
		if attempt == 3 {
			return nil, errs.New(errs.IO, "the ingest %s kept changing under this process; another mur is busy with the same blob, try again", path)
		}
	}
	res := &resumable{s: s, meta: path + resumeSuffix, info: ResumeInfo{Digest: info.Digest, Size: info.Size, Store: info.Store, Validator: info.Validator}}
	h := sha256.New()
	offset, err := res.adopt(ctx, f, h)
	if err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		f.Close()
		return nil, pathErr(err, "seeking in", path)
	}
	if res.found == nil {
		res.unsaved = true
	} else if err := res.save(); err != nil {
		f.Close()
		return nil, err
	}
	w := newWriter(s, f, h, offset, res)
	w.expect = info.Size
	return w, nil
}

// adopt reads the record an earlier ingest left and re-hashes the bytes it vouches for into h.
// A record that is missing, unreadable or for another blob means starting over.
func (r *resumable) adopt(ctx context.Context, f *os.File, h hash.Hash) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, pathErr(err, "reading", f.Name())
	}
	var prev ResumeInfo
	data, err := safefile.ReadFile(r.meta, maxResumeRecord)
	if notRegular(err) {
		// save renames over the name; a folder planted there would refuse that for good.
		if err := r.s.moveAside(r.meta); err != nil {
			return 0, err
		}
	}
	usable := err == nil && json.Unmarshal(data, &prev) == nil && prev.Digest == r.info.Digest && prev.Size == r.info.Size
	if !usable {
		if fi.Size() > 0 {
			if err := f.Truncate(0); err != nil {
				return 0, pathErr(err, "emptying", f.Name())
			}
		}
		return 0, nil
	}
	have := normalize(prev.Have, min(fi.Size(), r.info.Size))
	if len(prev.Have) == 0 {
		// Written from its start: the file is whole as far as it goes.
		have = normalize([]Span{{0, fi.Size()}}, r.info.Size)
	}
	offset := int64(0)
	if len(have) > 0 && have[0].Start == 0 {
		offset = have[0].End
	}
	if offset > 0 {
		if err := hashRange(ctx, f, h, 0, offset); err != nil {
			return 0, err
		}
	}
	if prev.Store == r.info.Store && r.info.Validator == "" {
		// An ETag belongs to the server that gave it.
		r.info.Validator = prev.Validator
	}
	r.info.Have = have
	held := int64(0)
	for _, s := range have {
		held += s.Len()
	}
	if held > 0 {
		r.found = &Resumed{Offset: offset, Held: held, Prev: prev}
	}
	if len(have) == 1 && have[0].Start == 0 {
		r.info.Have = nil // the plain, sequential shape
	}
	return offset, nil
}

// hashRange feeds bytes [from, to) of f to h.
func hashRange(ctx context.Context, f *os.File, h hash.Hash, from, to int64) error {
	buf := make([]byte, 1<<20)
	for pos := from; pos < to; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := f.ReadAt(buf[:min(int64(len(buf)), to-pos)], pos)
		h.Write(buf[:n])
		pos += int64(n)
		if err != nil && !(errors.Is(err, io.EOF) && pos == to) {
			if errors.Is(err, io.EOF) {
				return errs.New(errs.IO, "the ingest %s ended at byte %d while its bytes up to %d were being hashed; another process changed it", f.Name(), pos, to)
			}
			return pathErr(err, "reading", f.Name())
		}
	}
	return nil
}

// normalize sorts spans, merges those that touch, and drops what lies outside [0, limit).
func normalize(spans []Span, limit int64) []Span {
	var in []Span
	for _, s := range spans {
		s.End = min(s.End, limit)
		if s.Start >= 0 && s.Start < s.End {
			in = append(in, s)
		}
	}
	if len(in) == 0 {
		return nil
	}
	for i := 1; i < len(in); i++ { // insertion sort: a handful of spans
		for j := i; j > 0 && in[j].Start < in[j-1].Start; j-- {
			in[j], in[j-1] = in[j-1], in[j]
		}
	}
	out := []Span{in[0]}
	for _, s := range in[1:] {
		last := &out[len(out)-1]
		if s.Start <= last.End {
			last.End = max(last.End, s.End)
			continue
		}
		out = append(out, s)
	}
	return out
}

// save writes the record beside the bytes: a temporary file renamed over the old record, so
// that a kill leaves the old record or the new, never half of one. It is not fsynced: after a
// power cut a record may claim bytes the disk lost, and the digest check at Commit catches that.
func (r *resumable) save() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	data, err := json.Marshal(r.info)
	if err != nil {
		return errs.Wrap(err, errs.Internal, "can't encode the resume record %s: %v", r.meta, err)
	}
	dir := filepath.Dir(r.meta)
	tmp, err := os.CreateTemp(dir, atomicfile.TempPrefix+"resume-")
	if err != nil {
		return pathErr(err, "creating a temporary file in", dir)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), r.meta)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return pathErr(werr, "writing", r.meta)
	}
	r.unsaved = false
	return nil
}

// forget removes the record; the bytes are the caller's to remove or rename.
func (r *resumable) forget() {
	if r != nil {
		os.Remove(r.meta)
	}
}

// suspend writes the record as it stands for a later pull; the file's flock goes when the
// caller closes it.
func (w *Writer) suspend() error {
	if w.parts != nil {
		have := w.parts.stop()
		w.parts = nil
		w.res.setHave(have)
	}
	return w.res.save()
}

// Resumed reports what the Writer continued from an earlier ingest of its digest: ok is false
// for a fresh ingest, and for one whose earlier bytes it dropped with Restart.
func (w *Writer) Resumed() (Resumed, bool) {
	if w.res == nil || w.res.found == nil {
		return Resumed{}, false
	}
	return *w.res.found, true
}

// Held is how many bytes of the blob the ingest holds: Size, and while it is written at offsets,
// the ranges beyond.
func (w *Writer) Held() int64 {
	if w.parts != nil {
		return w.parts.Held()
	}
	return w.size
}

// Resumable reports whether a later pull can continue this ingest once it is kept: false for
// the ordinary ingest OpenResumable falls back to while another process holds the digest.
func (w *Writer) Resumable() bool { return w.res != nil }

// Validator is the ETag the ingest's record holds for If-Range, "" when none.
func (w *Writer) Validator() string {
	if w.res == nil {
		return ""
	}
	w.res.mu.Lock()
	defer w.res.mu.Unlock()
	return w.res.info.Validator
}

// SetValidator records the server's strong ETag for the blob, so that a later pull sends it as
// If-Range. A weak ETag (W/…) is not a validator for ranges and is ignored.
func (w *Writer) SetValidator(etag string) error {
	if w.res == nil || strings.HasPrefix(etag, "W/") || etag == w.res.info.Validator {
		return nil
	}
	w.res.mu.Lock()
	w.res.info.Validator = etag
	w.res.mu.Unlock()
	return w.res.save()
}

// Keep makes Close leave the bytes written so far, and the record of how far they go, for a
// later pull of the same digest to continue. It is for failures that say nothing against the
// bytes (a connection lost, a stall, an interrupt); on an ordinary ingest it does nothing.
func (w *Writer) Keep() {
	if w.res != nil {
		w.res.keep = true
	}
}

// Restart drops every byte written so far, those found from an earlier ingest included, and
// empties the hash: for a server that ignored a Range request and sent the whole blob, or whose
// content changed. The validator goes too.
func (w *Writer) Restart() error {
	if err := w.checkOpen(); err != nil {
		return err
	}
	if err := w.flush(); err != nil {
		return err
	}
	if w.parts != nil {
		w.parts.stop()
		w.parts = nil
	}
	if err := w.f.Truncate(0); err != nil {
		return pathErr(err, "emptying", w.tmp)
	}
	if _, err := w.f.Seek(0, io.SeekStart); err != nil {
		return pathErr(err, "seeking in", w.tmp)
	}
	w.hash.Reset()
	w.size = 0
	if w.res == nil {
		return nil
	}
	w.res.found = nil
	w.res.trimmed = true
	w.res.mu.Lock()
	w.res.info.Validator, w.res.info.Have = "", nil
	w.res.mu.Unlock()
	return w.res.save()
}

// sequential readies the file for bytes appended after the prefix: ranges held beyond it, from
// an earlier ingest written at offsets, are dropped.
func (w *Writer) sequential() error {
	if w.parts != nil {
		return errs.New(errs.Internal, "the ingest %s is being written at offsets; it takes no appended bytes until they are all in", w.tmp)
	}
	r := w.res
	if r != nil && r.unsaved {
		// The first byte is about to land: from here on a killed pull leaves bytes to continue.
		if err := r.save(); err != nil {
			return err
		}
	}
	if r == nil || r.trimmed {
		return nil
	}
	r.trimmed = true
	if len(r.info.Have) == 0 {
		return nil
	}
	if err := w.f.Truncate(w.size); err != nil {
		return pathErr(err, "trimming", w.tmp)
	}
	r.setHave(nil)
	return r.save()
}

// endParts leaves offset mode before the ingest ends: an error when bytes are still missing.
func (w *Writer) endParts() error {
	p := w.parts
	if p == nil {
		return nil
	}
	w.parts = nil
	p.stop()
	if p.herr != nil {
		return p.herr
	}
	if p.hashed != p.size {
		return errs.New(errs.Internal, "the ingest %s was committed with %d of its %d bytes hashed", w.tmp, p.hashed, p.size)
	}
	w.size = p.size
	return nil
}

// removeResumable removes a resumable ingest's bytes and record; gc calls it with the bytes'
// flock held.
func removeResumable(path string) error {
	err := os.Remove(path)
	os.Remove(path + resumeSuffix)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
