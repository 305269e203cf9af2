package fetch

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
	"github.com/murmur-nexus/mur/internal/ref"
)

// Ranged downloads. A store or source whose server honours HTTP Range hands the pull a Ranger
// for a blob, and the pull then:
//   - continues what a killed or disconnected pull of the same digest left in cas/ingest (the
//     bytes are re-hashed first, as containerd does), with Range: bytes=N-M and If-Range;
//   - continues a body that breaks off mid-transfer instead of failing the pull;
//   - fetches a large blob over several connections into a preallocated ingest file, hashed in
//     order as the bytes from its start come in, when one connection turns out slow.
//
// A large blob starts as one stream, the fastest way on a fast link (no second copy, no reading
// back to hash): where one connection brings less than fastLink after splitAfter, which is what a
// server or CDN capping each connection looks like, the stream stops where it is and the rest is
// fetched in pieces over several connections. A kept download that already holds pieces beyond
// its start goes straight to pieces.
//
// Only a 206 whose Content-Range is exactly the range asked for is taken as a piece; a server
// that answers with the whole blob (it ignores Range, or If-Range found the content changed)
// makes the pull start over, with a note in the pull records. Closed ranges are always sent:
// some registries (go-containerregistry's own) accept no other form. Every byte is still hashed
// against the digest before anything becomes visible.

// Ranger serves one blob, in parts when its server honours Range.
type Ranger interface {
	// Open asks for bytes off to end of the blob, both inclusive. Off 0 and end -1 ask for the
	// whole blob, without a Range header. A validator that is not empty is sent as If-Range.
	// A 206 whose Content-Range is not exactly the range asked for, or a 416, is an error
	// wrapping ErrNoRanges; a 200 is the whole blob, and Part.Whole says so.
	Open(ctx context.Context, off, end int64, validator string) (Part, error)
}

// Part is one answer of a Ranger. Its body ends with an error carrying errs.Network when it
// breaks off before the length the server announced.
type Part struct {
	Body io.ReadCloser
	// Whole is set when the server sent the whole blob (200) instead of the range asked for:
	// it ignores Range, or If-Range found the blob changed.
	Whole bool
	// Validator is the server's strong ETag for the blob, "" when it gave none.
	Validator string
}

// ErrNoRanges marks an answer to a Range request that does not fit it.
var ErrNoRanges = errors.New("the server does not serve the byte ranges asked for")

// RangeStore is a Store that can read its blobs in parts (a registry). It is not meant for
// implementations outside mur (see the package notes).
type RangeStore interface {
	Store
	// Ranger prepares ranged reads of blob d of name, size bytes long. It may make requests (a
	// registry authenticates); a blob that is not there shows at the Ranger's first Open.
	Ranger(ctx context.Context, name ref.Name, d digest.Digest, size int64) (Ranger, error)
}

// RangedScratch is the Scratch the pipeline hands to Source.Fetch: a source whose server
// honours Range fills it through Fill, which resumes and parallelises as for stores; one that
// writes into it gets a scratch that starts at byte 0.
type RangedScratch interface {
	Scratch
	// Fill fetches the blob the scratch was opened for from r.
	Fill(ctx context.Context, r Ranger) error
}

// Defaults of the Puller's ranged downloads.
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
	// splitAfter and fastLink: a large blob's single stream that brings less than fastLink
	// bytes a second, measured after splitAfter, is split over several connections. A loopback
	// or LAN registry streams faster than that; a connection capped by a server or a CDN, or a
	// long-haul link, does not.
	splitAfter = 250 * time.Millisecond
	fastLink   = 128 << 20
)

// errSplit stops a large blob's single stream so that the rest is fetched in pieces.
var errSplit = errors.New("one connection is slow: split")

// slowLink reports whether a stream that brought n bytes in elapsed should be split.
func (p *Puller) slowLink(n int64, elapsed time.Duration) bool {
	if p.splitWhen != nil {
		return p.splitWhen(n, elapsed)
	}
	return elapsed >= splitAfter && float64(n) < fastLink*elapsed.Seconds()
}

func (p *Puller) connections() int {
	if p.Connections < 1 {
		return DefaultConnections
	}
	return p.Connections
}

func (p *Puller) parallelMin() int64 {
	if p.ParallelMin <= 0 {
		return DefaultParallelMin
	}
	return p.ParallelMin
}

func (p *Puller) chunk() int64 {
	if p.Chunk <= 0 {
		return DefaultChunk
	}
	return p.Chunk
}

// slotsKey carries the pull's job slots: a blob fetched over several connections takes one slot
// for each connection beyond its first, so that --jobs bounds the connections of the whole pull.
type slotsKey struct{}

func withSlots(ctx context.Context, slots chan struct{}) context.Context {
	return context.WithValue(ctx, slotsKey{}, slots)
}

// transfer is what fetching one blob did, for the result and the pull records.
type transfer struct {
	bytes   int64    // bytes received in this pull
	resumed int64    // bytes an earlier pull had kept, which this one continued after
	conns   int      // connections used at most
	notes   []string // restarts and why
}

// filler fetches one blob into a CAS ingest.
type filler struct {
	p     *Puller
	w     *cas.Writer
	r     Ranger
	size  int64
	dg    digest.Digest
	from  string // the store or source, for notes and messages
	name  string // the artifact, for progress events
	xfer  transfer
	tee   *streamStage // follows the bytes while they arrive in order from byte 0; nil after
	got   atomic.Int64 // bytes received, for progress
	evMu  sync.Mutex
	lastE int64
}

func (p *Puller) newFiller(w *cas.Writer, r Ranger, d digest.Digest, size int64, from, name string) *filler {
	f := &filler{p: p, w: w, r: r, dg: d, size: size, from: from, name: name}
	if rs, ok := w.Resumed(); ok {
		f.xfer.resumed = rs.Offset
		f.xfer.notes = append(f.xfer.notes, fmt.Sprintf("continued a download an earlier pull left at %d of %d bytes (%d held)", rs.Offset, size, rs.Held))
	}
	return f
}

func (f *filler) note(format string, args ...any) {
	f.xfer.notes = append(f.xfer.notes, f.from+": "+fmt.Sprintf(format, args...))
}

// received counts n bytes in and reports progress every MiB.
func (f *filler) received(n int64) {
	if n <= 0 {
		return
	}
	now := f.got.Add(n)
	f.evMu.Lock()
	defer f.evMu.Unlock()
	if f.lastE == 0 || now-f.lastE >= 1<<20 || now == f.size {
		f.lastE = now
		f.p.emit(Event{Name: f.name, Phase: PhaseFetch, Bytes: min(f.xfer.resumed+now, f.size), Total: f.size, From: f.from})
	}
}

// errStartOver asks run to fetch the blob again from its start.
var errStartOver = errors.New("start over")

// run fetches every byte the ingest lacks.
func (f *filler) run(ctx context.Context) error {
	defer func() {
		f.xfer.bytes = f.got.Load()
		f.xfer.conns = max(f.xfer.conns, 1)
	}()
	for restarts := 0; ; restarts++ {
		var err error
		kept, _ := f.w.Resumed()
		switch {
		case f.size < f.p.parallelMin() || f.p.connections() < 2:
			err = f.stream(ctx, nil, false)
		case kept.Held > kept.Offset || f.p.piecesFirst:
			// Pieces beyond the start were kept: only pieces can use them.
			err = f.parallel(ctx)
		default:
			err = f.stream(ctx, nil, true)
			if errors.Is(err, errSplit) {
				err = f.parallel(ctx)
			}
		}
		if errors.Is(err, errStartOver) && restarts < 2 {
			continue
		}
		if errors.Is(err, errStartOver) {
			return errs.New(errs.Network, "%s changed the blob under three attempts to fetch it; try again later", f.from)
		}
		return err
	}
}

// untee stops single-pass staging: the bytes no longer arrive in order from the blob's start.
func (f *filler) untee() {
	if f.tee != nil {
		f.tee.abandon()
		f.tee = nil
	}
}

// restart drops what the ingest holds, for the reason given.
func (f *filler) restart(format string, args ...any) error {
	f.untee()
	if f.w.Held() > 0 || f.xfer.resumed > 0 {
		f.note(format, args...)
	}
	f.xfer.resumed = 0
	return f.w.Restart()
}

// changed reports whether an answer's ETag says the blob is no longer the one the ingest holds
// bytes of: for servers that ignore If-Range.
func (f *filler) changed(part Part) bool {
	v := f.w.Validator()
	return v != "" && part.Validator != "" && part.Validator != v
}

// resumable reports whether a transfer that failed with err may go on with a Range request.
func resumable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || err == nil {
		return false
	}
	return errs.TokenOf(err) == errs.Network || retry.Transient(err) || errors.Is(err, io.ErrUnexpectedEOF)
}

// stream fetches the rest of the blob over one connection, continuing after a break. first,
// when set, is an answer already open on the whole blob. With split, it asks for a closed range
// even from byte 0, so that the answer says whether the server serves ranges, and stops with
// errSplit when the connection proves slow and the server does.
func (f *filler) stream(ctx context.Context, first *Part, split bool) error {
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
			var err error
			if off == 0 && !split {
				part, err = f.r.Open(ctx, 0, -1, "")
			} else {
				part, err = f.r.Open(ctx, off, f.size-1, f.w.Validator())
			}
			if errors.Is(err, ErrNoRanges) {
				if err := f.restart("asked for bytes %d-%d and got an answer that does not fit (%v); started over from byte 0", off, f.size-1, err); err != nil {
					return err
				}
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
			if err := f.restart("asked to continue at byte %d of %d and got the whole blob (%s); started over from byte 0", off, f.size, why); err != nil {
				part.Body.Close()
				return err
			}
		} else if off > 0 && f.changed(part) {
			part.Body.Close()
			if err := f.restart("the blob's ETag changed from %s to %s since the kept bytes were fetched; started over from byte 0", f.w.Validator(), part.Validator); err != nil {
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
		_, err := copyBounded(dst, part.Body, f.size-f.w.Size())
		part.Body.Close()
		switch {
		case dst.err != nil:
			return dst.err // errSplit, or the ingest's own failure
		case errors.Is(err, errTooLong):
			return errs.New(errs.Integrity, "%s declares %d bytes for %s (%s) but sent more; the transfer was stopped after %d bytes and nothing was kept; report it to its owner", f.from, f.size, f.dg, f.name, f.size)
		}
		if err == nil {
			// The answer ended as its server meant it to; if that is short of the blob, the
			// caller's size and digest checks refuse it.
			return nil
		}
		if resumable(ctx, err) && f.w.Size() > off && resumes < maxResumes {
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
	f     *filler
	err   error
	split bool
	start time.Time
	n     int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	if c.split && c.f.p.slowLink(c.n, time.Since(c.start)) {
		c.err = errSplit
		return 0, errSplit
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.f.received(int64(n))
	if err != nil {
		c.err = err
	} else if c.f.tee != nil {
		c.f.tee.Write(b[:n]) // takes every byte; a stream that gave up only counts
	}
	return n, err
}

// parallel fetches what the ingest lacks in pieces, over up to Connections connections.
func (f *filler) parallel(ctx context.Context) error {
	f.untee()
	parts, err := f.w.Parts(f.size, f.p.hashLast)
	if err != nil {
		return err
	}
	var queue []cas.Span
	for _, m := range parts.Missing() {
		for s := m.Start; s < m.End; s += f.p.chunk() {
			queue = append(queue, cas.Span{Start: s, End: min(s+f.p.chunk(), m.End)})
		}
	}
	if len(queue) == 0 {
		return parts.Wait(ctx)
	}
	// The first piece is the probe: a server that answers it with the whole blob is read as one
	// stream instead.
	first := queue[0]
	part, err := f.r.Open(ctx, first.Start, first.End-1, f.w.Validator())
	if errors.Is(err, ErrNoRanges) {
		if err := f.restart("asked for bytes %d-%d and got an answer that does not fit (%v); started over from byte 0, as one stream", first.Start, first.End-1, err); err != nil {
			return err
		}
		return f.stream(ctx, nil, false)
	}
	if err != nil {
		return err
	}
	if part.Whole {
		why := "the server ignores Range"
		if f.changed(part) {
			why = fmt.Sprintf("its ETag changed from %s to %s", f.w.Validator(), part.Validator)
		}
		if err := f.restart("asked for bytes %d-%d and got the whole blob (%s); started over from byte 0, as one stream", first.Start, first.End-1, why); err != nil {
			part.Body.Close()
			return err
		}
		return f.stream(ctx, &part, false)
	}
	if f.changed(part) {
		part.Body.Close()
		if err := f.restart("the blob's ETag changed from %s to %s since the kept bytes were fetched; started over from byte 0", f.w.Validator(), part.Validator); err != nil {
			return err
		}
		return errStartOver
	}
	if err := f.w.SetValidator(part.Validator); err != nil {
		part.Body.Close()
		return err
	}
	pf := &pieces{f: f, parts: parts, queue: queue[1:], validator: part.Validator, slots: slotsFrom(ctx)}
	return pf.run(ctx, first, part)
}

func slotsFrom(ctx context.Context) chan struct{} {
	s, _ := ctx.Value(slotsKey{}).(chan struct{})
	return s
}

// pieces is one parallel fetch: a queue of byte ranges and the connections working it off.
type pieces struct {
	f         *filler
	parts     *cas.Parts
	validator string
	slots     chan struct{}

	mu       sync.Mutex
	queue    []cas.Span
	workers  int
	extra    int // job slots taken
	failures int
	err      error
	wg       sync.WaitGroup
	cancel   context.CancelFunc
}

func (pf *pieces) run(ctx context.Context, first cas.Span, part Part) error {
	// The connections share a context of their own, which the first failure ends.
	inner, cancel := context.WithCancel(ctx)
	pf.cancel = cancel
	defer cancel()
	pf.workers = 1
	pf.wg.Add(1)
	go pf.work(inner, first, &part)
	pf.grow(inner)
	pf.wg.Wait()
	pf.mu.Lock()
	for ; pf.extra > 0; pf.extra-- {
		<-pf.slots
	}
	err := pf.err
	pf.mu.Unlock()
	if err != nil {
		if errors.Is(err, ErrNoRanges) {
			// The server served ranges, then stopped: whatever it does now, one stream from
			// the start is what every server can do.
			if err := pf.f.restart("the server stopped serving byte ranges mid-transfer (%v); started over from byte 0, as one stream", err); err != nil {
				return err
			}
			return pf.f.stream(ctx, nil, false)
		}
		return err
	}
	if err := pf.parts.Wait(ctx); err != nil {
		return err
	}
	return nil
}

// grow starts connections while pieces wait and the budget allows: Connections for this blob,
// and a free job slot for each beyond the first.
func (pf *pieces) grow(ctx context.Context) {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	for pf.err == nil && len(pf.queue) > 0 && pf.workers < pf.f.p.connections() {
		if pf.slots != nil {
			select {
			case pf.slots <- struct{}{}:
				pf.extra++
			default:
				return
			}
		}
		pf.workers++
		pf.f.xfer.conns = max(pf.f.xfer.conns, pf.workers)
		next := pf.queue[0]
		pf.queue = pf.queue[1:]
		pf.wg.Add(1)
		go pf.work(ctx, next, nil)
	}
}

// fail records the first error and stops every connection.
func (pf *pieces) fail(err error) {
	pf.mu.Lock()
	if pf.err == nil {
		pf.err = err
	}
	pf.mu.Unlock()
	pf.cancel()
}

// work fetches piece, then whatever the queue holds. open is the answer already open on piece.
func (pf *pieces) work(ctx context.Context, piece cas.Span, open *Part) {
	defer pf.wg.Done()
	buf := make([]byte, 1<<20)
	for {
		rest, err := pf.fetch(ctx, piece, open, buf)
		open = nil
		pf.mu.Lock()
		switch {
		case err == nil:
		case pf.err != nil:
			pf.mu.Unlock()
			return
		case resumable(ctx, err) && pf.failures < maxResumes && rest.Start > piece.Start:
			// Broke off after some bytes: the rest goes back to the front of the queue.
			pf.failures++
			pf.queue = append([]cas.Span{rest}, pf.queue...)
		default:
			pf.mu.Unlock()
			pf.fail(err)
			return
		}
		if len(pf.queue) == 0 {
			pf.mu.Unlock()
			return
		}
		piece = pf.queue[0]
		pf.queue = pf.queue[1:]
		pf.mu.Unlock()
		pf.grow(ctx)
	}
}

// fetch reads piece into the ingest and returns what of it is still missing.
func (pf *pieces) fetch(ctx context.Context, piece cas.Span, open *Part, buf []byte) (cas.Span, error) {
	var part Part
	if open != nil {
		part = *open
	} else {
		var err error
		part, err = pf.f.r.Open(ctx, piece.Start, piece.End-1, pf.validator)
		if err != nil {
			return piece, err
		}
		if part.Whole || (part.Validator != "" && pf.validator != "" && part.Validator != pf.validator) {
			part.Body.Close()
			return piece, fmt.Errorf("%w: bytes %d-%d came back as the whole blob or with another ETag (%s)", ErrNoRanges, piece.Start, piece.End-1, part.Validator)
		}
	}
	defer part.Body.Close()
	pos := piece.Start
	for pos < piece.End {
		n, err := io.ReadFull(part.Body, buf[:min(int64(len(buf)), piece.End-pos)])
		if n > 0 {
			if _, werr := pf.parts.WriteAt(buf[:n], pos); werr != nil {
				return cas.Span{Start: pos, End: piece.End}, werr
			}
			pos += int64(n)
			pf.f.received(int64(n))
		}
		if err != nil && pos < piece.End {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = errs.Wrap(io.ErrUnexpectedEOF, errs.Network, "%s ended bytes %d-%d at %d", pf.f.from, piece.Start, piece.End-1, pos)
			}
			return cas.Span{Start: pos, End: piece.End}, err
		}
	}
	return cas.Span{Start: pos, End: pos}, nil
}
