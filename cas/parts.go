package cas

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/bufpool"
	"github.com/murmur-nexus/mur/internal/errs"
)

// saveEvery is how often, at most, a blob written at offsets records how far it has come. A
// kill loses what arrived since: at 100 MB/s over four connections, a few megabytes.
const saveEvery = 25 * time.Millisecond

// Parts writes a blob of known size at offsets, from several connections at once, into the
// Writer's file, which it first grows to the blob's full size. The hash is taken in order, by a
// goroutine that follows the bytes held from the start of the blob as they grow (or, with
// hashLast, reads the whole file once every byte is in), so the digest is ready when the last
// byte lands. Nothing becomes visible before Commit, as with any ingest. Parts is safe for
// concurrent use; the Writer itself is not used until Wait returns.
type Parts struct {
	w        *Writer
	size     int64
	hashLast bool

	mu       sync.Mutex
	have     []Span // sorted, merged
	lastSave time.Time
	saving   sync.Mutex

	hashed int64 // owned by the hasher until done is closed
	herr   error
	wake   chan struct{}
	quit   chan struct{}
	done   chan struct{}
	once   sync.Once

	followMu sync.Mutex
	follower io.Writer // given every byte the hasher reads, in order; nil for none
}

// Follow has the hasher write every byte it hashes to f, in order, from the first byte it had
// not hashed yet: the ingest's bytes reach f in order however the pieces arrive. A pull stages
// the payload from them while the blob downloads. f's errors are ignored.
func (p *Parts) Follow(f io.Writer) {
	p.followMu.Lock()
	p.follower = f
	p.followMu.Unlock()
}

// Unfollow stops Follow; once it returns, the follower gets no more bytes.
func (p *Parts) Unfollow() { p.Follow(nil) }

// Parts switches w to writing at offsets a blob of size bytes. What w holds already (from its
// start, and the ranges a resumed ingest held beyond that) counts as written; Missing lists the
// rest. With hashLast the hash is taken after the last byte arrives instead of as the bytes from
// the start come in.
func (w *Writer) Parts(size int64, hashLast bool) (*Parts, error) {
	if err := w.checkOpen(); err != nil {
		return nil, err
	}
	if w.parts != nil {
		return nil, errs.New(errs.Internal, "the ingest %s is already written at offsets", w.tmp)
	}
	if w.res != nil && size != w.res.info.Size {
		return nil, errs.New(errs.Internal, "the ingest %s is of %d bytes, not %d", w.tmp, w.res.info.Size, size)
	}
	if err := w.flush(); err != nil {
		return nil, err
	}
	if w.size > size {
		return nil, errs.New(errs.Integrity, "the ingest %s already holds %d bytes, more than the %d expected", w.tmp, w.size, size)
	}
	have := []Span{{0, w.size}}
	if w.res != nil {
		w.res.mu.Lock()
		have = append(have, w.res.info.Have...)
		w.res.mu.Unlock()
	}
	have = normalize(have, size)
	// Grown sparse: blocks are taken only as bytes arrive. The size is the store's claim, which
	// no byte has proved yet; reserving it up front would let a store that claims 2 GiB and sends
	// 1 MiB hold 2 GiB of disk, through an interrupt and until gc.
	if err := w.f.Truncate(size); err != nil {
		return nil, pathErr(err, "growing", w.tmp)
	}
	p := &Parts{
		w: w, size: size, hashLast: hashLast, have: have, hashed: w.size,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
	}
	w.parts = p
	if w.res != nil {
		w.res.trimmed = true
		w.res.setHave(have)
		if err := w.res.save(); err != nil {
			w.parts = nil
			return nil, err
		}
	}
	go p.hashLoop()
	return p, nil
}

// Missing lists the byte ranges not written yet, in order.
func (p *Parts) Missing() []Span {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Span
	pos := int64(0)
	for _, s := range p.have {
		if s.Start > pos {
			out = append(out, Span{pos, s.Start})
		}
		pos = s.End
	}
	if pos < p.size {
		out = append(out, Span{pos, p.size})
	}
	return out
}

// Held is how many bytes are written, in all.
func (p *Parts) Held() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, s := range p.have {
		n += s.Len()
	}
	return n
}

// WriteAt writes b at offset off of the blob. Bytes past the blob's size are refused with
// errs.Integrity, and nothing of them is written.
func (p *Parts) WriteAt(b []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(b)) > p.size {
		return 0, errs.New(errs.Integrity, "bytes %d to %d were offered for a blob of %d bytes", off, off+int64(len(b)), p.size)
	}
	select {
	case <-p.quit:
		return 0, errs.New(errs.Internal, "the ingest %s no longer takes bytes at offsets", p.w.tmp)
	default:
	}
	n, err := atomicfile.WriteAt(p.w.f, b, off)
	if n > 0 {
		// Recorded only once written: the record must never claim bytes the file lacks.
		p.mu.Lock()
		p.have = normalize(append(p.have, Span{off, off + int64(n)}), p.size)
		front := len(p.have) > 0 && p.have[0].Start == 0 && p.have[0].End > off
		due := time.Since(p.lastSave) >= saveEvery
		p.mu.Unlock()
		if front {
			select {
			case p.wake <- struct{}{}:
			default:
			}
		}
		if due {
			p.save(false)
		}
	}
	if err != nil {
		return n, pathErr(err, "writing", p.w.tmp)
	}
	return n, nil
}

// save records the ranges held. Concurrent callers skip rather than wait: the next write saves
// again, and only the final save (force) must happen.
func (p *Parts) save(force bool) {
	if p.w.res == nil {
		return
	}
	if force {
		p.saving.Lock()
	} else if !p.saving.TryLock() {
		return
	}
	defer p.saving.Unlock()
	p.mu.Lock()
	have := append([]Span(nil), p.have...)
	p.lastSave = time.Now()
	p.mu.Unlock()
	p.w.res.setHave(have)
	// A record that can't be written costs a longer resume, never a wrong blob.
	_ = p.w.res.save()
}

func (p *Parts) hashLoop() {
	defer close(p.done)
	pooled := bufpool.Get(1 << 20)
	defer bufpool.Put(pooled)
	buf := *pooled
	for p.hashed < p.size {
		p.mu.Lock()
		target := p.hashed
		if len(p.have) > 0 && p.have[0].Start == 0 {
			target = p.have[0].End
		}
		if p.hashLast && target < p.size {
			target = p.hashed
		}
		p.mu.Unlock()
		for p.hashed < target {
			select {
			case <-p.quit:
				return
			default:
			}
			n, err := p.w.f.ReadAt(buf[:min(int64(len(buf)), target-p.hashed)], p.hashed)
			p.w.hash.Write(buf[:n])
			p.followMu.Lock()
			if p.follower != nil {
				p.follower.Write(buf[:n])
			}
			p.followMu.Unlock()
			p.hashed += int64(n)
			if err != nil && !(errors.Is(err, io.EOF) && p.hashed == target) {
				p.herr = pathErr(err, "reading back", p.w.tmp)
				return
			}
		}
		if p.hashed == p.size {
			return
		}
		select {
		case <-p.wake:
		case <-p.quit:
			return
		}
	}
}

// Wait returns once every byte is written and hashed, or ctx ends. Afterwards the Writer holds
// the whole blob as if it had been written from its start, and Commit checks it.
func (p *Parts) Wait(ctx context.Context) error {
	select {
	case <-p.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if p.herr != nil {
		return p.herr
	}
	if p.hashed != p.size {
		return errs.New(errs.Internal, "the ingest %s stopped taking bytes at offsets with %d of %d hashed", p.w.tmp, p.hashed, p.size)
	}
	w := p.w
	w.parts = nil
	w.size = p.size
	if w.res != nil {
		w.res.setHave(nil)
		if err := w.res.save(); err != nil {
			return err
		}
	}
	return nil
}

// stop ends the hasher and returns the ranges held, for the record a kept ingest leaves.
func (p *Parts) stop() []Span {
	p.once.Do(func() { close(p.quit) })
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Span(nil), p.have...)
}
