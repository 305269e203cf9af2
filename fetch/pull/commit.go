package pull

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	fstage "github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// payloadRereads counts the fresh payloads pulls read back from their blob to check or stage
// them, because the download's stream could not vouch for them (stage.Stream): tests tell by it
// (export_test.go) that the stream spared the second read.
var payloadRereads atomic.Int64

// cacheHit pins and stages a payload the CAS already holds, and records a cache hit: 0 bytes
// transferred.
func (p *Puller) cacheHit(ctx context.Context, proj Project, req Request, res *Result, got *fetched, start time.Time) error {
	st, err := p.CAS.Stat(got.desc.Digest)
	if err != nil {
		return err
	}
	if err := p.cachedLabel(ctx, req.Name, got); err != nil {
		return err
	}
	plat := got.desc.Platform
	if plat == "" {
		plat = ref.PlatformAny
	}
	res.Version, res.Platform, res.Digest, res.Size, res.CacheHit = got.desc.Version, plat, got.desc.Digest.String(), st.Size, true
	res.Origin, res.Release, res.Asset, res.NewPin = "cas", got.release, got.asset, got.newPin
	res.Skipped = got.skipped
	res.private = got.desc.Private
	if err := p.finish(ctx, proj, req, res, got, start); err != nil {
		return err
	}
	p.Report.emit(Event{Name: res.Name, Phase: PhaseCached, Bytes: st.Size, Total: st.Size, Elapsed: p.now().Sub(start)})
	return nil
}

// checkPacked refuses a payload whose own murmur.yaml names another artifact or version than
// the one it was resolved as: a store or source must not swap one tool for another.
func checkPacked(r io.ReaderAt, size int64, name ref.Name, version, origin string, tok errs.Token) (*artifact.Archive, error) {
	a, err := artifact.Read(r, size)
	if err != nil {
		return nil, errs.Wrap(err, errs.TokenOf(err), "%s@%s from %s: %s", name, version, origin, errs.Message(err))
	}
	if err := packedAs(a, name, version, origin, tok); err != nil {
		return nil, err
	}
	return a, nil
}

// finish makes a payload visible and tells the project about it. Every check of the payload (its
// CRC-32, its sizes, the decompression ceiling) runs before the lock is touched, and the blob is
// committed inside the lock's update, after the lock's own checks, so that a failure of any kind
// leaves no blob, no lock entry and no tools/.
func (p *Puller) finish(ctx context.Context, proj Project, req Request, res *Result, got *fetched, start time.Time) error {
	hex := strings.TrimPrefix(res.Digest, "sha256:")
	d := digest.Digest(res.Digest)
	fresh := got.w != nil
	// tools/ shows what this machine runs; a pull for another platform (a CI warming a mixed
	// fleet's lock) fills the CAS and the lock but leaves tools/ alone.
	stage := p.stages()
	var prepared *fstage.Prepared
	var key []byte // the compiled cache's key of the payload, when the pull could ask
	if fresh {
		// The payload is checked (and staged, when it is this machine's) from what the download
		// staged as it arrived, else from the scratch; the scratch is made durable with the
		// pull's other blobs, in its commit.
		src, err := got.w.OpenRead()
		if err != nil {
			if got.stream != nil {
				got.stream.Abandon()
			}
			return err
		}
		checked := make(chan error, 1)
		func() {
			defer src.Close()
			a, err := artifact.Read(src, src.Size())
			if err != nil {
				if got.stream != nil {
					got.stream.Abandon()
				}
				checked <- err
				return
			}
			if got.stream != nil {
				// What the download's stream staged, or only checked when nothing is staged.
				var vouched bool
				if stage {
					prepared = got.stream.Adopt(a, src.Size())
					vouched = prepared != nil
				} else {
					vouched = got.stream.Verified(a, src.Size())
				}
				got.releaseSlot() // the stream is done with the downloaded bytes
				if vouched {
					if got.key != nil {
						key = got.key.Sum(nil)
					}
					checked <- nil
					return
				}
			}
			// The stream could not vouch for the payload: it is read back from the blob.
			payloadRereads.Add(1)
			h, known := p.moduleKey(d)
			if known != nil {
				got.known = known
			}
			if stage {
				prepared, err = fstage.Prepare(p.run.tools(proj), req.Name, d, a, src, h)
			} else {
				err = fstage.CheckPayload(a, h)
			}
			if err == nil && h != nil {
				key = h.Sum(nil)
			}
			checked <- err
		}()
		if err := <-checked; err != nil {
			return errs.Wrap(err, errs.TokenOf(err), "%s@%s from %s: %s; nothing was written", req.Name, res.Version, res.Origin, errs.Message(err))
		}
	} else if stage {
		var err error
		if prepared, err = fstage.PrepareFromCAS(ctx, p.run.tools(proj), p.CAS, req.Name, d); err != nil {
			return err
		}
	}
	// The lock is registered as a GC root before it is written and again after, before the lease
	// that protects its blobs ends, so that no gc run elsewhere takes them, even if this process
	// is killed in between.
	lockPath, _ := filepath.Abs(proj.LockPath())
	cm := p.committer(proj)
	warned := false
	register := func() {
		if p.CASOnly {
			return
		}
		if err := cm.registerRoot(ctx, lockPath); err != nil && !warned {
			warned = true
			res.Warnings = append(res.Warnings, "not registered as a GC root, so 'mur cache gc' run outside this project may remove its blobs: "+errs.Message(err))
		}
	}
	register()
	if got.verified != nil {
		if err := p.attestor().keep(ctx, got.verified); err != nil {
			prepared.Discard()
			return err
		}
		res.Provenance = got.verified.record()
	}
	item := &commitItem{size: res.Size, want: d, pin: cm.pinOf(req, res, got, hex)}
	if fresh {
		item.w = got.w
	}
	// With the pull's other payloads ready by then: the blob appears only once its pin passed
	// (batch.go), and the pull writes the pin into murmur.lock when it ends (ledger.go).
	if fresh || got.newPin != nil || got.verified != nil || p.CASOnly || !cm.pinHolds(item.pin) {
		if err := cm.commitOf(ctx, item); err != nil {
			prepared.Discard()
			return err
		}
	}
	switch {
	case prepared != nil:
		dir, err := prepared.Install()
		if err != nil {
			return err
		}
		res.Tools = dir
	case stage:
		res.Tools = fstage.StagedDir(proj.Tools(), req.Name)
	}
	register()
	p.CAS.Touch(d)
	if fresh && key != nil {
		p.Compile.Cache.RememberBlobKey(d, key) // hashed this time; the next pull of d won't
	} else if fresh {
		key = got.known
	}
	if fresh && p.Compile.Precompile != nil && got.archive != nil && !got.archive.Component &&
		(key == nil || !p.Compile.Cache.HasCompiled(key)) {
		// Queued: Pull compiles it from the blob (the scratch is gone once committed).
		res.compile = d
	}
	p.record(ctx, req, res, start, nil)
	return nil
}

func (p *Puller) precompile(ctx context.Context, d digest.Digest) error {
	_, wasm, release, err := fstage.ReadBlob(ctx, p.CAS, d, true)
	defer release()
	if err != nil || wasm == nil {
		return err
	}
	return p.Compile.Precompile(ctx, wasm)
}

func (p *Puller) record(ctx context.Context, req Request, res *Result, start time.Time, err error) {
	dur := p.now().Sub(start)
	res.DurationMS = dur.Milliseconds()
	r := cas.Record{
		Time: p.now().UTC(), Ref: req.Asked, Name: req.Name.String(), Version: res.Version, Platform: res.Platform,
		Digest: digest.Digest(res.Digest), Size: res.Size, Source: res.Origin, Release: res.Release, Asset: res.Asset,
		Transferred: res.Transferred, DurationMS: dur.Milliseconds(), Outcome: cas.OutcomePulled, Private: res.private,
	}
	if res.NewPin != nil {
		r.OwnerID = res.NewPin.OwnerID
	}
	r.Notes = res.Notes
	r.ResolvedOffline = res.ResolvedOffline
	r.VersionList = res.versionList
	r.Provenance = res.Provenance
	for _, sk := range res.Skipped {
		r.Skipped = append(r.Skipped, cas.Skip{Place: sk.Place, Token: sk.Token, Reason: sk.Reason})
	}
	if res.CacheHit {
		r.Outcome = cas.OutcomeCacheHit
	}
	if err != nil {
		r.Outcome, r.Error = cas.OutcomeFailed, err.Error()
		if ctx.Err() != nil {
			r.Error = stoppedRecord(err)
		}
	}
	p.run.appendRecord(p.CAS, r)
}
