package fetch

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/errs"
)

// download fetches desc's blob from st into a CAS ingest: through a Ranger when the store serves
// ranges and the size is known (resumable, and parallel for large blobs), else as one stream. On
// error the ingest is closed; its bytes stay for the next pull when the failure says nothing
// against them (a broken connection, a stall, an interrupt).
//
// For a payload of this machine's platform the bytes are also followed by a streamStage
// (single-pass staging, fed key) as long as they arrive in order from the blob's first byte: an
// ingest that continues kept bytes, starts over or is split into pieces is staged from the blob
// once it is in, and the returned stream is nil.
func (p *Puller) download(ctx context.Context, st Store, req Request, desc Descriptor, key hash.Hash) (*cas.Writer, transfer, *streamStage, error) {
	rs, ok := st.(RangeStore)
	if !ok || desc.Size <= 0 {
		return p.downloadStream(ctx, st, req, desc, key)
	}
	r, err := rs.Ranger(ctx, req.Name, desc.Digest, desc.Size)
	if err != nil {
		return nil, transfer{}, nil, err
	}
	w, err := p.CAS.OpenResumable(ctx, cas.ResumeInfo{Digest: desc.Digest, Size: desc.Size, Store: st.String()})
	if err != nil {
		return nil, transfer{}, nil, err
	}
	f := p.newFiller(w, r, desc.Digest, desc.Size, st.String(), req.Name.String())
	if req.stageTo != nil && w.Held() == 0 {
		f.tee = newStreamStage(*req.stageTo, req.Name, desc.Digest, key)
	}
	for attempt := 0; ; attempt++ {
		err = f.run(ctx)
		if err == nil && w.Digest() != desc.Digest && f.xfer.resumed > 0 && attempt == 0 {
			// The bytes kept from an earlier pull were damaged since: the store is not to blame.
			if err = f.restart("the %d bytes kept from an earlier pull did not hash to %s with the rest; started over from byte 0", f.xfer.resumed, desc.Digest); err == nil {
				continue
			}
		}
		break
	}
	if err != nil {
		f.untee()
		return nil, f.xfer, nil, p.dropOrKeep(ctx, w, err, "reading %s@%s from %s", req.Name, desc.Version, st)
	}
	return w, f.xfer, f.tee, nil
}

// dropOrKeep closes an ingest whose download failed with err, keeping its bytes for the next pull
// when err says nothing against them, and says so in the error.
func (p *Puller) dropOrKeep(ctx context.Context, w *cas.Writer, err error, format string, args ...any) error {
	held := w.Held()
	// An interrupt says nothing against the bytes either.
	keep := (resumable(ctx, err) || ctx.Err() != nil) && w.Resumable() && held > 0
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
		return errs.Wrap(err, errs.TokenOf(err), "%s; the bytes received are kept and the next pull continues from there", errs.Message(err))
	}
	return err
}

// downloadStream is the download of a store that serves no ranges: one stream, bounded by the
// declared size, that a break fails.
func (p *Puller) downloadStream(ctx context.Context, st Store, req Request, desc Descriptor, key hash.Hash) (*cas.Writer, transfer, *streamStage, error) {
	rc, err := st.Open(ctx, req.Name, desc.Digest)
	if err != nil {
		return nil, transfer{}, nil, err
	}
	defer rc.Close()
	w, err := p.CAS.NewWriter(ctx)
	if err != nil {
		return nil, transfer{}, nil, err
	}
	var stream *streamStage
	if req.stageTo != nil {
		stream = newStreamStage(*req.stageTo, req.Name, desc.Digest, key)
	}
	var sink io.Writer = w
	if stream != nil {
		sink = io.MultiWriter(w, stream)
	}
	dst := &progressWriter{w: sink, p: p, name: req.Name.String(), total: desc.Size, from: st.String()}
	if _, err := copyBounded(dst, rc, desc.Size); err != nil {
		w.Close()
		if stream != nil {
			stream.abandon()
		}
		if errors.Is(err, errTooLong) {
			return nil, transfer{}, nil, errs.New(errs.Integrity, "%s declares %d bytes for %s (%s@%s) but sent more; the transfer was stopped after %d bytes and nothing was kept; report it to the store's owner",
				st, desc.Size, desc.Digest, req.Name, desc.Version, w.Size())
		}
		return nil, transfer{}, nil, errs.Wrap(err, errs.Network, "reading %s@%s from %s stopped after %d bytes: %v; run the pull again", req.Name, desc.Version, st, w.Size(), err)
	}
	return w, transfer{bytes: w.Size(), conns: 1}, stream, nil
}

// rangedScratch is the Scratch a source fetches into: Fill for a source whose server serves
// ranges, Write for one that streams.
type rangedScratch struct {
	progressWriter
	w      *cas.Writer
	f      *filler
	digest digest.Digest
	wrote  bool
	werr   error
}

func (p *Puller) newRangedScratch(w *cas.Writer, s Sourced, name string) *rangedScratch {
	rs := &rangedScratch{
		progressWriter: progressWriter{w: w, p: p, name: name, total: s.Size, from: "source"},
		w:              w, digest: s.Digest,
	}
	rs.f = p.newFiller(w, nil, s.Digest, s.Size, s.Origin, name)
	return rs
}

// Write takes a stream from its first byte: bytes an earlier pull kept are dropped first.
func (rs *rangedScratch) Write(b []byte) (int, error) {
	if !rs.wrote {
		rs.wrote = true
		if rs.w.Size() > 0 {
			if err := rs.f.restart("the source streams from byte 0"); err != nil {
				rs.werr = err
				return 0, err
			}
		}
	}
	return rs.progressWriter.Write(b)
}

func (rs *rangedScratch) ReadAt(b []byte, off int64) (int, error) { return rs.w.ReadAt(b, off) }
func (rs *rangedScratch) Size() int64                             { return rs.w.Size() }
func (rs *rangedScratch) Digest() digest.Digest                   { return rs.w.Digest() }

func (rs *rangedScratch) Fill(ctx context.Context, r Ranger) error {
	rs.f.r = r
	err := rs.f.run(ctx)
	if err == nil && rs.w.Digest() != rs.digest && rs.f.xfer.resumed > 0 {
		if err = rs.f.restart("the %d bytes kept from an earlier pull did not hash to %s with the rest; started over from byte 0", rs.f.xfer.resumed, rs.digest); err == nil {
			err = rs.f.run(ctx)
		}
	}
	return err
}

// xfer is what the source's transfer did.
func (rs *rangedScratch) xfer() transfer {
	t := rs.f.xfer
	if rs.wrote {
		t.bytes = rs.w.Size()
		t.conns = 1
	}
	return t
}
