package pull

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/internal/download"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// The seam between pulling and downloading: the engine (resume, parallel pieces, the one reading
// of a Range answer) lives in fetch/internal/download; this file hands it a CAS ingest, the
// Puller's knobs and a progress func, and turns what it did into the pull's transfer.

// Defaults of the Puller's ranged downloads.
const (
	// DefaultConnections is how many connections one large blob is fetched over.
	DefaultConnections = download.DefaultConnections
	// DefaultParallelMin is the size from which a blob is fetched over several connections.
	DefaultParallelMin = download.DefaultParallelMin
	// DefaultChunk is the piece one connection asks for at a time.
	DefaultChunk = download.DefaultChunk
)

// rangeStore is a Store that can read its blobs in parts (a registry).
type rangeStore interface {
	store.Store
	// Ranger prepares ranged reads of blob d of name, size bytes long. It may make requests (a
	// registry authenticates); a blob that is not there shows at the Ranger's first Open.
	Ranger(ctx context.Context, name ref.Name, d digest.Digest, size int64) (download.Ranger, error)
}

// options are the Puller's knobs for the engine, its connections taking free slots of r's jobs.
func (l Limits) options(r *run) download.Options {
	o := download.Options{Connections: l.Connections, ParallelMin: l.ParallelMin, Chunk: l.Chunk, Hooks: l.Hooks}
	if r != nil {
		o.Slots = r.jobs
	}
	return o
}

// progress reports a download's bytes as fetch events of name.
func (ft *fetcher) progress(name string, total int64, from string, resumed int64) func(int64) {
	return func(n int64) {
		if n < resumed { // the kept bytes were dropped: the download started over
			resumed = 0
		}
		ft.report.emit(Event{Name: name, Phase: PhaseFetch, Bytes: n, Total: total, From: from, Resumed: resumed})
	}
}

// transfer is what fetching one blob did, for the result and the pull records.
type transfer = download.Transfer

// download fetches desc's blob from st into a CAS ingest: through a Ranger when the store serves
// ranges and the size is known (resumable, and parallel for large blobs), else as one stream. On
// error the ingest is closed; its bytes stay for the next pull when the failure says nothing
// against them (a broken connection, a stall, an interrupt).
//
// For a payload of this machine's platform the bytes are also followed by a streamStage
// (single-pass staging, fed key) as long as they arrive in order from the blob's first byte: an
// ingest that continues kept bytes, starts over or is split into pieces is staged from the blob
// once it is in, and the returned stream is nil.
func (ft *fetcher) download(ctx context.Context, st store.Store, req Request, desc store.Descriptor, key hash.Hash) (*cas.Writer, transfer, *stage.Stream, error) {
	rs, ok := st.(rangeStore)
	if !ok || desc.Size <= 0 {
		return ft.downloadStream(ctx, st, req, desc, key)
	}
	r, err := rs.Ranger(ctx, req.Name, desc.Digest, desc.Size)
	if err != nil {
		return nil, transfer{}, nil, err
	}
	w, err := ft.cas.OpenResumable(ctx, cas.ResumeInfo{Digest: desc.Digest, Size: desc.Size, Store: st.String()})
	if err != nil {
		return nil, transfer{}, nil, err
	}
	kept, _ := w.Resumed()
	f := download.New(w, desc.Digest, desc.Size, st.String(), ft.limits.options(ft.run), ft.progress(req.Name.String(), desc.Size, st.String(), kept.Held))
	var stream *stage.Stream
	if w.Held() == 0 {
		if stream = stage.NewStream(req.stageTo, req.Name, desc.Digest, key); stream != nil {
			stream.Expect(desc.Size)
			f.SetTee(stream)
		}
	}
	if err := f.Fill(ctx, r); err != nil {
		return nil, f.Transfer(), nil, ft.dropOrKeep(ctx, w, err, "reading %s@%s from %s", req.Name, desc.Version, st)
	}
	if f.Tee() == nil {
		stream = nil
	}
	return w, f.Transfer(), stream, nil
}

// dropOrKeep closes an ingest whose download failed with err, keeping its bytes for the next pull
// when err says nothing against them, and says so in the error.
func (ft *fetcher) dropOrKeep(ctx context.Context, w *cas.Writer, err error, format string, args ...any) error {
	held := w.Held()
	// An interrupt says nothing against the bytes either.
	keep := (download.Resumable(ctx, err) || ctx.Err() != nil) && w.Resumable() && held > 0
	if keep {
		w.Keep()
	}
	if cerr := w.Close(); cerr != nil && keep {
		keep = false
	}
	var me *errs.Error
	if !errors.As(err, &me) && ctx.Err() == nil {
		err = errs.Wrap(err, errs.Network, "%s stopped: %v", fmt.Sprintf(format, args...), err)
	}
	if keep {
		return keptBytes(errs.Wrap(err, errs.TokenOf(err), "%s; the bytes received are kept and the next pull continues from there", errs.Message(err)), held)
	}
	return err
}

// downloadStream is the download of a store that serves no ranges: one stream, bounded by the
// declared size, that a break fails.
func (ft *fetcher) downloadStream(ctx context.Context, st store.Store, req Request, desc store.Descriptor, key hash.Hash) (*cas.Writer, transfer, *stage.Stream, error) {
	rc, err := st.Open(ctx, req.Name, desc.Digest)
	if err != nil {
		return nil, transfer{}, nil, err
	}
	defer rc.Close()
	bound, err := undeclaredBound(desc.Size)
	if err != nil {
		return nil, transfer{}, nil, err
	}
	w, err := ft.cas.NewWriter(ctx)
	if err != nil {
		return nil, transfer{}, nil, err
	}
	w.Expect(desc.Size)
	stream := stage.NewStream(req.stageTo, req.Name, desc.Digest, key)
	var sink io.Writer = w
	if stream != nil {
		stream.Expect(desc.Size)
		sink = io.MultiWriter(w, stream)
	}
	if _, err := download.Stream(sink, rc, bound, ft.progress(req.Name.String(), desc.Size, st.String(), 0)); err != nil {
		w.Close()
		if stream != nil {
			stream.Abandon()
		}
		if errors.Is(err, download.ErrTooLong) && desc.Size < 0 {
			return nil, transfer{}, nil, undeclaredTooLong(st.String(), desc.Digest, req.Name, desc.Version, bound)
		}
		if errors.Is(err, download.ErrTooLong) {
			return nil, transfer{}, nil, errs.New(errs.Integrity, "%s declares %d bytes for %s (%s@%s) but sent more; the transfer was stopped after %d bytes and nothing was kept; report it to the store's owner",
				st, desc.Size, desc.Digest, req.Name, desc.Version, w.Size())
		}
		return nil, transfer{}, nil, errs.Wrap(err, errs.Network, "reading %s@%s from %s stopped after %d bytes: %v; run the pull again", req.Name, desc.Version, st, w.Size(), err)
	}
	return w, transfer{Bytes: w.Size(), Conns: 1}, stream, nil
}

// sourceScratch is the Scratch a source fetches into: Fill (download.Fillable) for a source
// that opens its blob as a Ranger, Write for one that streams.
type sourceScratch struct {
	w      *cas.Writer
	f      *download.Filler
	pw     download.Progress
	digest digest.Digest
	from   string
	wrote  bool
}

var _ download.Fillable = (*sourceScratch)(nil)

func (ft *fetcher) newSourceScratch(w *cas.Writer, s store.Sourced, name string) *sourceScratch {
	kept, _ := w.Resumed()
	return &sourceScratch{
		w: w, digest: s.Digest, from: s.Origin,
		pw: download.Progress{W: w, Report: ft.progress(name, s.Size, "source", 0)},
		f:  download.New(w, s.Digest, s.Size, s.Origin, ft.limits.options(ft.run), ft.progress(name, s.Size, s.Origin, kept.Held)),
	}
}

// Write takes a stream from its first byte: bytes an earlier pull kept are dropped first.
func (rs *sourceScratch) Write(b []byte) (int, error) {
	if !rs.wrote {
		rs.wrote = true
		if rs.w.Size() > 0 {
			if err := rs.f.Restart("the source streams from byte 0"); err != nil {
				return 0, err
			}
		}
	}
	return rs.pw.Write(b)
}

func (rs *sourceScratch) ReadAt(b []byte, off int64) (int, error) { return rs.w.ReadAt(b, off) }
func (rs *sourceScratch) Size() int64                             { return rs.w.Size() }
func (rs *sourceScratch) Digest() digest.Digest                   { return rs.w.Digest() }

// Fill fetches the blob the scratch was opened for from r, resuming and in parallel as for stores.
func (rs *sourceScratch) Fill(ctx context.Context, r download.Ranger) error { return rs.f.Fill(ctx, r) }

// xfer is what the source's transfer did.
func (rs *sourceScratch) xfer() transfer {
	t := rs.f.Transfer()
	if rs.wrote {
		t.Bytes = rs.w.Size()
		t.Conns = 1
	}
	return t
}
