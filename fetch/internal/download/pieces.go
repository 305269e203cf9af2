package download

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/bufpool"
	"github.com/murmur-nexus/mur/internal/errs"
)

// parallel fetches what the ingest lacks in pieces, over up to Connections connections.
func (f *Filler) parallel(ctx context.Context) error {
	parts, err := f.w.Parts(f.size, f.opt.hooks().HashLast)
	if err != nil {
		f.Untee()
		return err
	}
	if f.tee != nil {
		// The tee has followed the bytes from the start up to here; the hasher, which reads
		// the pieces back in order, takes it on.
		parts.Follow(f.tee)
		f.parts = parts
	}
	var queue []cas.Span
	for _, m := range parts.Missing() {
		for s := m.Start; s < m.End; s += f.opt.chunk() {
			queue = append(queue, cas.Span{Start: s, End: min(s+f.opt.chunk(), m.End)})
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
		if err := f.misfit(err, "asked for bytes %d-%d and got an answer that does not fit (%v); started over from byte 0, as one stream", first.Start, first.End-1, err); err != nil {
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
		if err := f.Restart("asked for bytes %d-%d and got the whole blob (%s); started over from byte 0, as one stream", first.Start, first.End-1, why); err != nil {
			part.Body.Close()
			return err
		}
		return f.stream(ctx, &part, false)
	}
	if f.changed(part) {
		part.Body.Close()
		if err := f.Restart("the blob's ETag changed from %s to %s since the kept bytes were fetched; started over from byte 0", f.w.Validator(), part.Validator); err != nil {
			return err
		}
		return errStartOver
	}
	if err := f.w.SetValidator(part.Validator); err != nil {
		part.Body.Close()
		return err
	}
	pf := &pieces{f: f, parts: parts, queue: queue[1:], validator: part.Validator, slots: f.opt.Slots}
	return pf.run(ctx, first, part)
}

// pieces is one parallel fetch: a queue of byte ranges and the connections working it off.
type pieces struct {
	f         *Filler
	parts     *cas.Parts
	validator string
	slots     *Slots

	mu       sync.Mutex
	queue    []cas.Span
	workers  int // connections open
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
	go pf.work(inner, first, &part, false)
	pf.grow(inner)
	pf.wg.Wait()
	pf.mu.Lock()
	err := pf.err
	pf.mu.Unlock()
	if err != nil {
		if errors.Is(err, ErrNoRanges) {
			// The server served ranges, then stopped: whatever it does now, one stream from
			// the start is what every server can do.
			if err := pf.f.misfit(err, "the server stopped serving byte ranges mid-transfer (%v); started over from byte 0, as one stream", err); err != nil {
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
	for pf.err == nil && len(pf.queue) > 0 && pf.workers < pf.f.connections() {
		if !pf.slots.tryWhole() {
			return
		}
		pf.workers++
		pf.f.xfer.Conns = max(pf.f.xfer.Conns, pf.workers)
		next := pf.queue[0]
		pf.queue = pf.queue[1:]
		pf.wg.Add(1)
		go pf.work(ctx, next, nil, true)
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

// leave ends an extra connection: its job slot goes back at once, so that another download
// can start while this blob's last pieces still come in.
func (pf *pieces) leave() {
	pf.mu.Lock()
	pf.workers--
	pf.mu.Unlock()
	pf.slots.releaseWhole()
}

// work fetches piece, then whatever the queue holds. open is the answer already open on piece.
// extra is set for a connection beyond the blob's first, which holds a job slot of its own.
func (pf *pieces) work(ctx context.Context, piece cas.Span, open *Part, extra bool) {
	defer pf.wg.Done()
	if extra {
		defer pf.leave()
	}
	pooled := bufpool.Get(1 << 20)
	defer bufpool.Put(pooled)
	buf := *pooled
	for {
		rest, err := pf.fetch(ctx, piece, open, buf)
		open = nil
		pf.mu.Lock()
		switch {
		case err == nil:
		case pf.err != nil:
			pf.mu.Unlock()
			return
		case Resumable(ctx, err) && pf.failures < maxResumes && rest.Start > piece.Start:
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
