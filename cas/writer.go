package cas

import (
	"context"
	"crypto/sha256"
	"errors"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/bufpool"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/lockedfile"
)

// The pipeline holds at most chunkCount chunks of chunkSize bytes, so an ingest uses a few MiB
// whatever the blob's size. Hashing and writing run on two goroutines over the same chunks: the
// two costs overlap instead of adding up, which is what lets an ingest outrun a plain
// io.Copy through a sha256 tee.
const (
	chunkSize  = 1 << 20
	chunkCount = 4
)

type chunk struct {
	buf     []byte // lent by bufpool, given back when the ingest stops
	n       int
	pending atomic.Int32 // consumers (hasher, file writer) still using the chunk
}

// Writer is a streaming ingest into the store. Bytes written land in a temporary file in
// ingest/, which becomes the blob only on Commit. A Writer is not safe for concurrent use.
type Writer struct {
	s    *Store
	f    *os.File
	tmp  string
	hash hash.Hash
	size int64

	cur       *chunk
	free      chan *chunk
	allocated int
	// expect is the blob's size when it is known (-1 when not): its chunks are sized to it, so a
	// blob of a few KiB takes a few KiB of buffers, not chunkCount MiB.
	expect   int64
	hashq    chan *chunk
	writeq   chan *chunk
	inflight sync.WaitGroup // chunks dispatched and not yet released
	workers  sync.WaitGroup

	mu   sync.Mutex
	werr error // the first error of the file writer goroutine

	done bool // committed or closed
	// synced is the size the file had at its last fsync, -1 before any: Commit syncs it again
	// only if it grew since.
	synced int64
	// early is the fsync SyncSoon started and nothing has waited for yet.
	early *earlySync

	// res is set for an ingest that can be continued by a later process (see resume.go).
	res *resumable
	// parts is set while the blob is written at offsets (see parts.go).
	parts *Parts

	hashPace, writePace pace // the two stages' work, timed (Pace)
}

// NewWriter starts an ingest. The temporary file is flock-held for the Writer's whole life, so
// that GC in another process can tell a live ingest from a killed one's leftover.
func (s *Store) NewWriter(ctx context.Context) (*Writer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The final name is the digest, known only at Commit; atomicfile names the temporary file
	// and Commit below does the rename itself.
	af, err := atomicfile.Create(s.ingest, filepath.Join(s.blobs, "blob"), 0o444)
	if err != nil {
		return nil, pathErr(err, "creating a temporary file in", s.ingest)
	}
	f := af.File
	if err := lockedfile.TryLock(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, pathErr(&fs.PathError{Op: "flock", Path: f.Name(), Err: err}, "locking", f.Name())
	}
	return newWriter(s, f, sha256.New(), 0, nil), nil
}

// newWriter starts the pipeline of a Writer over f, which holds size bytes that h has hashed.
func newWriter(s *Store, f *os.File, h hash.Hash, size int64, res *resumable) *Writer {
	w := &Writer{
		s:      s,
		f:      f,
		tmp:    f.Name(),
		hash:   h,
		size:   size,
		res:    res,
		free:   make(chan *chunk, chunkCount),
		hashq:  make(chan *chunk, chunkCount),
		writeq: make(chan *chunk, chunkCount),
		synced: -1,
		expect: -1,
	}
	w.workers.Add(2)
	go w.hashLoop()
	go w.writeLoop(size)
	return w
}

func (w *Writer) hashLoop() {
	defer w.workers.Done()
	for c := range w.hashq {
		start := time.Now()
		w.hash.Write(c.buf[:c.n])
		w.hashPace.add(c.n, start)
		w.release(c)
	}
}

// writebackEvery is how much the file writer lets pile up before it asks the kernel to start
// writing it back. The fsync at Commit then waits for the tail only, instead of for the whole
// blob, so durability overlaps the download.
const writebackEvery = 8 << 20

func (w *Writer) writeLoop(start int64) {
	defer w.workers.Done()
	// A continued ingest appends after the bytes it found.
	written, kicked, flushed := start, start, start
	var flushing chan struct{} // closed when the background flush in flight ends
	defer func() {
		if flushing != nil {
			<-flushing
		}
	}()
	for c := range w.writeq {
		start := time.Now()
		if w.err() == nil {
			if _, err := atomicfile.Write(w.f, c.buf[:c.n]); err != nil {
				w.mu.Lock()
				w.werr = pathErr(err, "writing", w.tmp)
				w.mu.Unlock()
			}
			written += int64(c.n)
			if written-kicked >= writebackEvery {
				// Advisory: a file system without it still gets the fsync at Commit.
				startWriteback(w.f, kicked, written-kicked)
				kicked = written
			}
			if written-flushed >= flushEvery && (flushing == nil || closed(flushing)) {
				flushed, flushing = written, make(chan struct{})
				go func(f *os.File, done chan struct{}) {
					defer close(done)
					// Not advisory: this fsync takes a writeback error off the file, so the one
					// at Commit would not see it. The ingest fails with it instead.
					if err := w.s.durability.SyncFile(f); err != nil {
						w.mu.Lock()
						if w.werr == nil {
							w.werr = pathErr(err, "syncing", w.tmp)
						}
						w.mu.Unlock()
					}
				}(w.f, flushing)
			}
		}
		w.writePace.add(c.n, start)
		w.release(c)
	}
}

// flushEvery is how much a large ingest writes between background flushes. On a virtual machine
// the host caches what the guest writes back, and only an fsync makes the host write it to its
// disk, at a cost in proportion to what it holds: flushing as the blob arrives spreads that cost
// over the download, and the fsync at Commit pays for the tail only.
const flushEvery = 32 << 20

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (w *Writer) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.werr
}

func (w *Writer) release(c *chunk) {
	if c.pending.Add(-1) == 0 {
		c.n = 0
		w.free <- c
		w.inflight.Done()
	}
}

// chunk returns the chunk being filled, taking a free one (or allocating one, up to chunkCount)
// when there is none.
func (w *Writer) chunk() *chunk {
	if w.cur != nil {
		return w.cur
	}
	select {
	case c := <-w.free:
		w.cur = c
	default:
		if w.allocated < chunkCount {
			w.allocated++
			size := chunkSize
			if w.expect >= 0 {
				size = bufpool.Class(max(w.expect-w.size, 0), chunkSize)
			}
			w.cur = &chunk{buf: *bufpool.Get(size)}
		} else {
			w.cur = <-w.free
		}
	}
	return w.cur
}

func (w *Writer) dispatch() {
	c := w.cur
	w.cur = nil
	if c == nil || c.n == 0 {
		if c != nil {
			w.free <- c
		}
		return
	}
	c.pending.Store(2)
	w.inflight.Add(1)
	w.hashq <- c
	w.writeq <- c
}

// flush hands the partial chunk on and waits until the hash and the file hold every byte. The
// chunks' buffers then go back to bufpool: a flushed ingest is usually done being written (it is
// read back, checked, committed), and a pull holds many such ingests while their payloads are
// checked; one written again takes buffers anew.
func (w *Writer) flush() error {
	w.dispatch()
	w.inflight.Wait()
	for len(w.free) > 0 { // every chunk is back: nothing else sends to free now
		c := <-w.free
		bufpool.Put(&c.buf)
		w.allocated--
	}
	return w.err()
}

func (w *Writer) checkOpen() error {
	if w.done {
		return errs.New(errs.Internal, "the ingest %s was already committed or closed", w.tmp)
	}
	return w.err()
}

// Write hashes and stores p. A write error of the file may surface on a later call, and always
// surfaces at Commit.
func (w *Writer) Write(p []byte) (int, error) {
	if err := w.checkOpen(); err != nil {
		return 0, err
	}
	if err := w.sequential(); err != nil {
		return 0, err
	}
	total := len(p)
	for len(p) > 0 {
		c := w.chunk()
		n := copy(c.buf[c.n:], p)
		c.n += n
		p = p[n:]
		w.size += int64(n)
		if c.n == len(c.buf) {
			w.dispatch()
		}
	}
	return total, nil
}

// WriteBuffer is Write for a caller that reads into bufpool's buffers of ChunkSize bytes (a
// download's read-ahead): when nothing is buffered, b itself becomes the next chunk instead of
// being copied into one, and the caller gets a free chunk's buffer back to fill next. Otherwise
// it copies as Write does and gives b back. Either way b's first n bytes are written, and the
// buffer passed in is no longer the caller's.
func (w *Writer) WriteBuffer(b *[]byte, n int) (*[]byte, error) {
	if cap(*b) != chunkSize || n <= 0 || n > chunkSize || (w.cur != nil && w.cur.n > 0) {
		_, err := w.Write((*b)[:n])
		return b, err
	}
	if err := w.checkOpen(); err != nil {
		return b, err
	}
	if err := w.sequential(); err != nil {
		return b, err
	}
	c := w.chunk()
	if cap(c.buf) != chunkSize {
		// A chunk sized to a small blob: b's bytes are copied into it.
		_, err := w.Write((*b)[:n])
		return b, err
	}
	c.buf, *b = (*b)[:chunkSize], c.buf[:chunkSize]
	c.n = n
	w.size += int64(n)
	if c.n == len(c.buf) {
		w.dispatch()
	}
	return b, nil
}

// Expect tells the writer the blob's size, n bytes in all (-1: not known), before its first
// write, so that its buffers are no larger than the blob.
func (w *Writer) Expect(n int64) { w.expect = n }

// ChunkSize is the size of the buffers WriteBuffer takes without a copy.
const ChunkSize = chunkSize

// ReadFrom reads r to its end straight into the pipeline's chunks, sparing io.Copy a copy.
func (w *Writer) ReadFrom(r io.Reader) (int64, error) {
	return w.readFrom(context.Background(), r)
}

func (w *Writer) readFrom(ctx context.Context, r io.Reader) (int64, error) {
	var total int64
	// Open first: sequential may write the resume record, which a closed ingest has removed.
	if err := w.checkOpen(); err != nil {
		return 0, err
	}
	if err := w.sequential(); err != nil {
		return 0, err
	}
	for {
		if err := w.checkOpen(); err != nil {
			return total, err
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
		c := w.chunk()
		n, err := r.Read(c.buf[c.n:])
		if n < 0 || n > len(c.buf)-c.n {
			return total, errs.New(errs.Internal, "a reader returned %d bytes for a %d-byte buffer", n, len(c.buf)-c.n)
		}
		c.n += n
		w.size += int64(n)
		total += int64(n)
		if c.n == len(c.buf) {
			w.dispatch()
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// OpenRead opens what was written so far for reading on a handle of its own, which stays
// valid after Commit renames the file into place, so that a caller can copy out of the blob
// while Commit makes it durable.
func (w *Writer) OpenRead() (ReaderAt, error) {
	if err := w.checkOpen(); err != nil {
		return nil, err
	}
	if err := w.flush(); err != nil {
		return nil, err
	}
	f, err := os.Open(w.tmp)
	if err != nil {
		return nil, pathErr(err, "reopening", w.tmp)
	}
	return &fileBlob{f: f, size: w.size}, nil
}

// ReadAt reads back what was written so far, before Commit, so that a caller can look inside
// (the pull checks the zip's manifest) without a second copy.
func (w *Writer) ReadAt(p []byte, off int64) (int, error) {
	if err := w.checkOpen(); err != nil {
		return 0, err
	}
	if err := w.flush(); err != nil {
		return 0, err
	}
	if off >= w.size {
		return 0, io.EOF
	}
	return w.f.ReadAt(p, off)
}

// Size is the number of bytes written so far.
func (w *Writer) Size() int64 { return w.size }

// Digest is the SHA-256 of everything written so far, or "" once the Writer is committed or
// closed.
func (w *Writer) Digest() digest.Digest {
	if w.done {
		return ""
	}
	w.flush()
	return digest.NewDigest(digest.SHA256, w.hash)
}

// Sync makes what was written so far durable, so that Commit's own fsync finds nothing left to
// write. It waits for an fsync that SyncSoon started, and reports that one's failure: after a
// failed fsync the kernel may have dropped the dirty pages, so a second one could succeed on
// bytes that never reached the disk.
func (w *Writer) Sync() error {
	if err := w.checkOpen(); err != nil {
		return err
	}
	if err := w.flush(); err != nil {
		return err
	}
	if covered, err := w.settleEarly(); err != nil || covered {
		return err
	}
	if err := w.s.durability.SyncFile(w.f); err != nil {
		return pathErr(err, "syncing", w.tmp)
	}
	if w.parts == nil {
		w.synced = w.size
	}
	return nil
}

// earlySync is an fsync that SyncSoon started in the background.
type earlySync struct {
	size int64 // what the file held when it started
	done chan struct{}
	err  error
}

// SyncSoon starts making what was written so far durable in the background, so that the fsync
// overlaps what the caller does before it commits: a pull checks and stages the payload
// meanwhile, and a large blob's fsync then costs nothing on the pull's critical path. Sync, and
// so SyncAll and CommitAll, wait for it; the blob is still renamed into place only after its
// bytes are durable. Bytes written afterwards are synced by the next Sync.
func (w *Writer) SyncSoon() {
	if w.checkOpen() != nil || w.early != nil || w.parts != nil || w.flush() != nil {
		return
	}
	e := &earlySync{size: w.size, done: make(chan struct{})}
	w.early = e
	f, sync := w.f, w.s.durability.SyncFile
	go func() {
		defer close(e.done)
		e.err = sync(f)
	}()
}

// settleEarly waits for the fsync SyncSoon started, if any. Its failure is the ingest's, and it
// covers the file (which then counts as synced) when nothing was written since it started.
func (w *Writer) settleEarly() (covered bool, err error) {
	e := w.early
	if e == nil {
		return false, nil
	}
	w.early = nil
	<-e.done
	if e.err != nil {
		return false, pathErr(e.err, "syncing", w.tmp)
	}
	if e.size != w.size || w.parts != nil {
		return false, nil
	}
	w.synced = w.size
	return true, nil
}

// stop ends the goroutines, and gives the chunks' buffers back for the process's next ingest;
// the temporary file stays open.
func (w *Writer) stop() {
	w.dispatch()
	close(w.hashq)
	close(w.writeq)
	w.workers.Wait()
	// Every chunk is back in free once both goroutines are done with it.
	for {
		select {
		case c := <-w.free:
			bufpool.Put(&c.buf)
		default:
			return
		}
	}
}

// Commit checks what was written against size and want, and only then makes it the blob. A
// negative size or an empty want skips that check. On a mismatch the error carries
// errs.Integrity, names both values, and the temporary file is gone. A blob that another
// process committed first is success.
func (w *Writer) Commit(ctx context.Context, size int64, want digest.Digest) (digest.Digest, error) {
	return w.commit(ctx, size, want, false)
}

// commit is Commit; batched, it leaves the fsync of blobs/ to CommitAll, which does it once.
func (w *Writer) commit(ctx context.Context, size int64, want digest.Digest, batched bool) (digest.Digest, error) {
	if w.done {
		return "", errs.New(errs.Internal, "the ingest %s was already committed or closed", w.tmp)
	}
	if want != "" {
		if err := checkDigest(want); err != nil {
			w.Close()
			return "", err
		}
	}
	w.stop()
	w.done = true
	fail := func(err error) (digest.Digest, error) {
		w.endParts()
		w.f.Close()
		os.Remove(w.tmp)
		w.res.forget()
		return "", err
	}
	if err := w.endParts(); err != nil {
		return fail(err)
	}
	if err := w.err(); err != nil {
		return fail(err)
	}
	if _, err := w.settleEarly(); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	got := digest.NewDigest(digest.SHA256, w.hash)
	if size >= 0 && size != w.size {
		return fail(errs.New(errs.Integrity, "the stream was expected to hold %d bytes but held %d (sha256 %s); the source is truncated or damaged, nothing was stored; try again or use another store", size, w.size, got.Encoded()))
	}
	if want != "" && want != got {
		return fail(errs.New(errs.Integrity, "expected digest %s but the %d bytes received hash to %s; the source served other bytes than it announced, nothing was stored", want, w.size, got))
	}
	final := filepath.Join(w.s.blobs, got.Encoded())
	// A shared hold on the GC lock keeps GC from removing the blob between the check below (or
	// the rename) and the use marker that protects it.
	unlock, err := lockedfile.RLock(ctx, w.s.gcLock())
	if err != nil {
		return fail(pathErr(err, "locking", w.s.gcLock()))
	}
	defer unlock()
	if fi, err := os.Lstat(final); err == nil && fi.Mode().IsRegular() && fi.Size() == w.size {
		// Another process won the race. Its blob went through the same checks; ours is a
		// duplicate. A blob of the wrong size (damaged by hand) is replaced below instead.
		w.f.Close()
		os.Remove(w.tmp)
		w.res.forget()
		w.s.touchHex(got.Encoded(), time.Now())
		return got, nil
	}
	if err := w.f.Chmod(0o444); err != nil {
		return fail(pathErr(err, "setting the mode of", w.tmp))
	}
	// The resume record goes first, while the flock keeps every other process off this
	// digest's ingest: a kill between the two leaves bytes without a record, which the next
	// ingest of the digest starts over and gc removes.
	w.res.forget()
	// fsync, rename, fsync of blobs/: the file is whole on disk before its name says so, and the
	// name survives a power cut before Commit reports success. The flock stays held across the
	// rename, so GC never judges the file in between.
	if !sameName(w.f, w.tmp) {
		// Something else took the ingest's name since it was opened: renaming the name would
		// make that thing the blob.
		w.f.Close()
		return "", errs.New(errs.IO, "the ingest %s was replaced by something else while %s was being written; nothing was stored, check who writes to %s and try again", w.tmp, got, w.s.ingest)
	}
	publish := w.s.durability.Publish
	if batched {
		publish = func(f *os.File, final string) error {
			if w.synced != w.size {
				if err := w.s.durability.SyncFile(f); err != nil {
					return err
				}
			}
			return w.s.durability.RenameFile(f.Name(), final)
		}
	}
	if err := publish(w.f, final); err != nil {
		w.f.Close()
		if _, serr := os.Lstat(w.tmp); serr == nil {
			os.Remove(w.tmp)
			return "", pathErr(err, "syncing and renaming the ingest to", final)
		}
		return "", pathErr(err, "syncing", w.s.blobs)
	}
	if !committedBlob(w.f, final, w.size) {
		// Swapped between the check above and the rename: what landed is not these bytes.
		w.f.Close()
		w.s.moveAside(final)
		return "", errs.New(errs.IO, "the ingest %s was replaced by something else while %s was being committed; nothing was stored, check who writes to %s and try again", w.tmp, got, w.s.ingest)
	}
	if err := w.f.Close(); err != nil {
		return "", pathErr(err, "closing", final)
	}
	// A failed use marker only makes GC see the blob's mtime, which is now anyway.
	w.s.touchHex(got.Encoded(), time.Now())
	return got, nil
}

// Close aborts the ingest unless it was committed, removing the temporary file. It is safe to
// call after Commit and more than once, so callers can defer it.
func (w *Writer) Close() error {
	if w.done {
		return nil
	}
	w.done = true
	w.stop()
	w.settleEarly() // the file is closed below; an abandoned ingest's fsync result does not matter
	if w.res != nil && w.res.keep {
		// Kept for a later pull to continue: every byte written is in the file, and the record
		// says how far the file is whole.
		err := w.suspend()
		w.f.Close()
		return err
	}
	w.endParts()
	w.f.Close()
	w.res.forget()
	if err := os.Remove(w.tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return pathErr(err, "removing", w.tmp)
	}
	return nil
}

// Ingest streams r into the store and commits it against size and want (see Commit). Nothing is
// visible unless every check passed.
func (s *Store) Ingest(ctx context.Context, r io.Reader, size int64, want digest.Digest) (digest.Digest, error) {
	return s.IngestChecked(ctx, r, size, want, nil)
}

// IngestChecked is Ingest that also lets check look at the stored bytes, once they are whole
// and hash to want, before the blob becomes visible: a caller that knows what a blob must hold
// (a cache import checks a packed artifact's entries, which the CAS knows nothing of) refuses it
// there, and nothing of it is stored. check's error is returned as it is. Bytes that do not hash
// to want are not shown to check: Commit's integrity error is the one that says what is wrong.
func (s *Store) IngestChecked(ctx context.Context, r io.Reader, size int64, want digest.Digest, check func(blob ReaderAt) error) (digest.Digest, error) {
	if want != "" {
		if err := checkDigest(want); err != nil {
			return "", err
		}
	}
	w, err := s.NewWriter(ctx)
	if err != nil {
		return "", err
	}
	defer w.Close()
	if _, err := w.readFrom(ctx, r); err != nil {
		if e := w.err(); e != nil {
			return "", e
		}
		var me *errs.Error
		if errors.As(err, &me) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return "", err
		}
		return "", errs.Wrap(err, errs.IO, "reading the stream to ingest into %s failed after %d bytes: %v; nothing was stored, try again", s.root, w.size, err)
	}
	if check != nil && (size < 0 || size == w.size) && (want == "" || w.Digest() == want) {
		blob, err := w.OpenRead()
		if err != nil {
			return "", err
		}
		err = check(blob)
		blob.Close()
		if err != nil {
			return "", err
		}
	}
	return w.Commit(ctx, size, want)
}
