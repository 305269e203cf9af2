package download

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/internal/retry"
	"github.com/murmur-nexus/mur/internal/errs"
)

// Ranged fills. A Filler brings one blob into a CAS ingest from a Ranger, and:
//   - continues what a killed or disconnected pull of the same digest left in cas/ingest (the
//     bytes are re-hashed first, as containerd does), with Range: bytes=N-M and If-Range;
//   - continues a body that breaks off mid-transfer instead of failing;
//   - fetches a large blob over several connections into a sparse ingest file, hashed in
//     order as the bytes from its start come in, when one connection turns out slow.
//
// A large blob starts as one stream, the fastest way on a fast link (no second copy, no reading
// back to hash): where the link, not the hashing and writing, holds the stream back (conns.go),
// which is what a server or CDN capping each connection looks like, the stream stops where it is
// and the rest is fetched in pieces over as many connections as can help. A kept download that already holds pieces beyond
// its start goes straight to pieces.
//
// Only a 206 whose Content-Range is exactly the range asked for is taken as a piece (Answer); a
// server that answers with the whole blob (it ignores Range, or If-Range found the content
// changed) makes the fill start over, with a note. Every byte is still hashed against the digest
// by the caller before anything becomes visible.

// Defaults of Options.
const (
	// DefaultConnections is how many connections one large blob is fetched over.
	DefaultConnections = 4
	// DefaultParallelMin is the size from which a blob is fetched over several connections. A
	// smaller blob is one stream: on a fast link extra connections only cost CPU.
	DefaultParallelMin = 64 << 20
	// DefaultChunk is the piece one connection asks for at a time. Small pieces keep the hash,
	// which follows the bytes in order, at most one piece behind the last byte, and let fast
	// connections take more of the work.
	DefaultChunk = 16 << 20
	// maxResumes bounds how often one transfer continues after a break: a link that breaks
	// this often is better reported.
	maxResumes = 5
)

// Options are the knobs of a fill.
type Options struct {
	// Connections is how many connections one large blob is fetched over when its server
	// serves ranges; <1 means DefaultConnections, 1 fetches every blob as one stream.
	Connections int
	// ParallelMin is the size from which a blob is fetched over several connections; <=0 means
	// DefaultParallelMin.
	ParallelMin int64
	// Chunk is the piece one connection asks for at a time; <=0 means DefaultChunk.
	Chunk int64
	// Hooks, when set, change how the engine decides (tests and benchmarks).
	Hooks *Hooks
	// Slots, when set, are the pull's --jobs: each connection of a blob beyond its first takes a
	// whole slot while it is open, and only when one is free.
	Slots *Slots
}

// Hooks change the engine's decisions, for tests and benchmarks.
type Hooks struct {
	// HashLast hashes a parallel download once it is whole, not as it grows.
	HashLast bool
	// SplitWhen, when set, replaces the rule that splits a slow stream (Connections): true
	// splits it over Options.Connections.
	SplitWhen func(n int64, elapsed time.Duration) bool
	// Judged, when set, is told every judgment of a stream: the connections the rule chose.
	Judged func(conns int)
	// PiecesFirst skips the single stream a large blob starts with.
	PiecesFirst bool
}

func (o Options) connections() int {
	if o.Connections < 1 {
		return DefaultConnections
	}
	return o.Connections
}

func (o Options) parallelMin() int64 {
	if o.ParallelMin <= 0 {
		return DefaultParallelMin
	}
	return o.ParallelMin
}

func (o Options) chunk() int64 {
	if o.Chunk <= 0 {
		return DefaultChunk
	}
	return o.Chunk
}

func (o Options) hooks() Hooks {
	if o.Hooks == nil {
		return Hooks{}
	}
	return *o.Hooks
}

// errSplit stops a large blob's single stream so that the rest is fetched in pieces.
var errSplit = errors.New("one connection is slow: split")

// Tee follows the bytes of a fill in order from the blob's first byte (single-pass staging): as
// they arrive on one stream, or as the ingest's hasher reads pieces back in order (cas.Parts.Follow).
// Abandon is called once they no longer can.
type Tee interface {
	io.Writer
	Abandon()
}

// Transfer is what filling one blob did, for the pull's result and records.
type Transfer struct {
	Bytes int64 // bytes received in this fill
	// Resumed is how many bytes an earlier pull kept that this one used, pieces beyond the start
	// included: what the stopped pull called kept, and where progress starts.
	Resumed int64
	Conns   int      // connections used at most
	Notes   []string // restarts and why
}

// Filler fetches one blob into a CAS ingest.
type Filler struct {
	opt      Options
	w        *cas.Writer
	r        Ranger
	size     int64
	dg       digest.Digest
	from     string // the store or source, for notes and messages
	progress func(n int64)
	xfer     Transfer
	tee      Tee        // follows the bytes while they arrive in order from byte 0; nil after
	parts    *cas.Parts // whose hasher writes to tee, in a parallel fill
	got      atomic.Int64
	evMu     sync.Mutex
	lastE    int64
	// Retry bounds (bounds.go): retries taken, when the fill began, when the last byte came
	// (unix ns), and whether the ranged attempt was given up for one stream.
	retries   int
	began     time.Time
	lastByte  atomic.Int64
	oneStream bool
	kept      int64 // bytes an earlier pull kept, from the start and beyond; 0 once started over
	// conns is how many connections the judgment of the stream chose, 0 before any.
	conns int
}

// New prepares the fill of ingest w with blob d of size bytes from the store or source named
// from. progress, when not nil, is told how many of the blob's bytes are in, every MiB.
func New(w *cas.Writer, d digest.Digest, size int64, from string, opt Options, progress func(n int64)) *Filler {
	f := &Filler{opt: opt, w: w, dg: d, size: size, from: from, progress: progress, began: time.Now()}
	if rs, ok := w.Resumed(); ok {
		f.xfer.Resumed, f.kept = rs.Held, rs.Held
		f.xfer.Notes = append(f.xfer.Notes, fmt.Sprintf("continued a download an earlier pull left at %d of %d bytes (%d held)", rs.Offset, size, rs.Held))
	}
	return f
}

// SetTee has t follow the bytes as long as they arrive in order from the blob's first byte.
func (f *Filler) SetTee(t Tee) { f.tee = t }

// Tee is the tee that followed every byte, or nil when it had to stop.
func (f *Filler) Tee() Tee { return f.tee }

// Transfer is what the fill did so far.
func (f *Filler) Transfer() Transfer { return f.xfer }

// Fill fetches every byte the ingest lacks from r. When bytes kept from an earlier pull turn out
// damaged (the whole does not hash to the digest), it starts over once: the server is not to
// blame for them.
func (f *Filler) Fill(ctx context.Context, r Ranger) error {
	f.r = r
	err := f.run(ctx)
	// Kept pieces beyond the start count as much as kept bytes from it: either may be damaged.
	if kept := max(f.xfer.Resumed, f.kept); err == nil && f.w.Digest() != f.dg && kept > 0 {
		if err = f.Restart("the %d bytes kept from an earlier pull did not hash to %s with the rest; started over from byte 0", kept, f.dg); err == nil {
			err = f.run(ctx)
		}
	}
	if err != nil {
		f.Untee()
	}
	return err
}

func (f *Filler) note(format string, args ...any) {
	f.xfer.Notes = append(f.xfer.Notes, f.from+": "+fmt.Sprintf(format, args...))
}

// received counts n bytes in and reports progress every MiB.
func (f *Filler) received(n int64) {
	if n <= 0 {
		return
	}
	now := f.got.Add(n)
	f.lastByte.Store(time.Now().UnixNano())
	f.evMu.Lock()
	defer f.evMu.Unlock()
	// The last byte is always reported, resumed or not, so that progress ends at the blob's size.
	if f.lastE == 0 || now-f.lastE >= 1<<20 || f.xfer.Resumed+now >= f.size {
		f.lastE = now
		if f.progress != nil {
			f.progress(min(f.xfer.Resumed+now, f.size))
		}
	}
}

// errStartOver asks run to fetch the blob again from its start.
var errStartOver = errors.New("start over")

// run fetches every byte the ingest lacks.
func (f *Filler) run(ctx context.Context) error {
	defer func() {
		f.xfer.Bytes = f.got.Load()
		f.xfer.Conns = max(f.xfer.Conns, 1)
	}()
	for restarts := 0; ; restarts++ {
		var err error
		kept, _ := f.w.Resumed()
		switch {
		case f.oneStream || f.size < f.opt.parallelMin() || f.opt.connections() < 2:
			// One stream continues after the kept start only.
			f.xfer.Resumed = min(f.xfer.Resumed, kept.Offset)
			err = f.stream(ctx, nil, false)
		case kept.Held > kept.Offset || f.opt.hooks().PiecesFirst:
			// Pieces beyond the start were kept: only pieces can use them.
			err = f.parallel(ctx)
		default:
			err = f.stream(ctx, nil, true)
			if errors.Is(err, errSplit) {
				err = f.parallel(ctx)
			}
		}
		if errors.Is(err, errStartOver) && restarts < 2 && f.retry() {
			continue
		}
		if errors.Is(err, errStartOver) {
			return errs.New(errs.Network, "%s changed the blob under three attempts to fetch it; try again later", f.from)
		}
		return err
	}
}

// Untee stops single-pass staging: the bytes no longer arrive in order from the blob's start.
func (f *Filler) Untee() {
	if f.parts != nil {
		f.parts.Unfollow()
		f.parts = nil
	}
	if f.tee != nil {
		f.tee.Abandon()
		f.tee = nil
	}
}

// Restart drops what the ingest holds, for the reason given, which becomes a note when there
// was something to drop.
func (f *Filler) Restart(format string, args ...any) error {
	f.Untee()
	if f.w.Held() > 0 || f.xfer.Resumed > 0 {
		f.note(format, args...)
	}
	f.xfer.Resumed, f.kept = 0, 0
	return f.w.Restart()
}

// changed reports whether an answer's ETag says the blob is no longer the one the ingest holds
// bytes of: for servers that ignore If-Range.
func (f *Filler) changed(part Part) bool {
	v := f.w.Validator()
	return v != "" && part.Validator != "" && part.Validator != v
}

// Resumable reports whether a transfer that failed with err may go on with a Range request.
func Resumable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || err == nil {
		return false
	}
	return errs.TokenOf(err) == errs.Network || retry.Transient(err) || errors.Is(err, io.ErrUnexpectedEOF)
}

// stream fetches the rest of the blob over one connection, continuing after a break. first,
// when set, is an answer already open on the whole blob. With split, it asks for a closed range
// even from byte 0, so that the answer says whether the server serves ranges, and stops with
// errSplit when the connection proves slow and the server does.
func (f *Filler) stream(ctx context.Context, first *Part, split bool) error {
	resumes := 0
	for {
		off := f.w.Size()
		if off == f.size {
			return nil
		}
		var part Part
		if first != nil {
			part, first = *first, nil
		} else {
			if off > 0 && f.oneStream {
				// Ranges are given up for this blob: a break is continued from byte 0.
				if err := f.Restart("continued a broken stream from byte 0: %s serves no usable ranges", f.from); err != nil {
					return err
				}
				off = 0
			}
			var err error
			if off == 0 && !split {
				part, err = f.r.Open(ctx, 0, -1, "")
			} else {
				part, err = f.r.Open(ctx, off, f.size-1, f.w.Validator())
			}
			if errors.Is(err, ErrNoRanges) {
				if err := f.misfit(err, "asked for bytes %d-%d and got an answer that does not fit (%v); started over from byte 0, as one stream", off, f.size-1, err); err != nil {
					return err
				}
				split = false
				continue
			}
			if err != nil {
				return err
			}
		}
		if part.Whole && off > 0 {
			// The whole blob: the server ignores Range, or If-Range found it changed.
			why := "the server ignores Range"
			if f.changed(part) {
				why = fmt.Sprintf("its ETag changed from %s to %s", f.w.Validator(), part.Validator)
			}
			if err := f.Restart("asked to continue at byte %d of %d and got the whole blob (%s); started over from byte 0", off, f.size, why); err != nil {
				part.Body.Close()
				return err
			}
		} else if off > 0 && f.changed(part) {
			part.Body.Close()
			if err := f.Restart("the blob's ETag changed from %s to %s since the kept bytes were fetched; started over from byte 0", f.w.Validator(), part.Validator); err != nil {
				return err
			}
			continue
		}
		if part.Whole {
			split = false // a server that ignores ranges can only stream
		}
		if err := f.w.SetValidator(part.Validator); err != nil {
			part.Body.Close()
			return err
		}
		dst := &countingWriter{w: f.w, f: f, split: split, start: time.Now()}
		_, err := CopyBounded(dst, part.Body, f.size-f.w.Size())
		part.Body.Close()
		switch {
		case dst.err != nil:
			return dst.err // errSplit, or the ingest's own failure
		case errors.Is(err, ErrTooLong):
			return errs.New(errs.Integrity, "%s declares %d bytes for %s but sent more; the transfer was stopped after %d bytes and nothing was kept; report it to its owner", f.from, f.size, f.dg, f.size)
		}
		if err == nil {
			// The answer ended as its server meant it to; if that is short of the blob, the
			// caller's size and digest checks refuse it.
			return nil
		}
		if Resumable(ctx, err) && f.w.Size() > off && resumes < maxResumes && f.retry() {
			resumes++
			continue
		}
		return err
	}
}

// countingWriter writes into the ingest, counts for progress, keeps the ingest's own error
// apart from the body's, and with split, stops a stream that proves slow. Bytes the body read
// ahead beyond that point are dropped: the pieces fetch them again.
type countingWriter struct {
	w     *cas.Writer
	f     *Filler
	err   error
	split bool
	start time.Time
	n     int64
	// teeBusy is the time the tee took over the bytes, which the stream waited for.
	teeBusy time.Duration
	first   time.Time // when the first bytes were taken
	firstN  int64     // bytes taken before them
	// wantSince is when the judgments began to call for more connections, wantFewest the
	// fewest they called for since (steady).
	wantSince  time.Time
	wantFewest int
}

// The ingest and the writers before it take a read-ahead's buffers whole (Body.WriteTo).
var (
	_ bufferWriter = (*cas.Writer)(nil)
	_ bufferWriter = (*countingWriter)(nil)
	_ bufferWriter = (*limitedWriter)(nil)
)

// WriteBuffer is Write without the copy into the ingest (cas.Writer.WriteBuffer).
func (c *countingWriter) WriteBuffer(b *[]byte, n int) (*[]byte, error) {
	if c.splitNow() {
		return b, errSplit
	}
	if c.f.tee != nil {
		start := time.Now()
		c.f.tee.Write((*b)[:n]) // before the ingest owns the buffer; a failed ingest ends the stream
		c.teeBusy += time.Since(start)
	}
	nb, err := c.w.WriteBuffer(b, n)
	if err != nil {
		c.err = err
		return nb, err
	}
	c.n += int64(n)
	c.f.received(int64(n))
	return nb, nil
}

func (c *countingWriter) Write(b []byte) (int, error) {
	if c.splitNow() {
		return 0, errSplit
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.f.received(int64(n))
	if err != nil {
		c.err = err
	} else if c.f.tee != nil {
		start := time.Now()
		c.f.tee.Write(b[:n]) // takes every byte; a stream that gave up only counts
		c.teeBusy += time.Since(start)
	}
	return n, err
}
