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

// finisher is the last phase of a pull into proj: it checks and prepares the payload, keeps its
// verified bundle, hands its commit and pin to the committer, installs tools/, queues the
// precompile and records the pull.
type finisher struct {
	cas     *cas.Store
	proj    Project
	casOnly bool // outside a project: no murmur.lock, no tools/
	stages  bool // tools/ shows this payload (Puller.stages)
	compile Compile
	report  Report
	now     func() time.Time
	run     *run
	commit  *committer
	attest  *attestor
}

func (p *Puller) finisher(proj Project) *finisher {
	return &finisher{cas: p.CAS, proj: proj, casOnly: p.CASOnly, stages: p.stages(), compile: p.Compile, report: p.Report,
		now: p.now, run: p.run, commit: p.committer(proj), attest: p.attestor()}
}

// cacheHit pins and stages a payload the CAS already holds, and records a cache hit: 0 bytes
// transferred.
func (f *finisher) cacheHit(ctx context.Context, req Request, res *Result, got *fetched, start time.Time) error {
	st, err := f.cas.Stat(got.desc.Digest)
	if err != nil {
		return err
	}
	if err := cachedLabel(ctx, f.cas, req.Name, got); err != nil {
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
	if err := f.finish(ctx, req, res, got, start); err != nil {
		return err
	}
	f.report.emit(Event{Name: res.Name, Phase: PhaseCached, Bytes: st.Size, Total: st.Size, Elapsed: f.now().Sub(start)})
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
func (f *finisher) finish(ctx context.Context, req Request, res *Result, got *fetched, start time.Time) error {
	d := digest.Digest(res.Digest)
	fresh := got.w != nil
	prepared, key, err := f.prepare(ctx, req, res, got, d)
	if err != nil {
		return err
	}
	guard := f.rootGuard(res)
	guard.register(ctx)
	if got.verified != nil {
		if err := f.attest.keep(ctx, got.verified); err != nil {
			prepared.Discard()
			return err
		}
		res.Provenance = got.verified.record()
	}
	item := &commitItem{size: res.Size, want: d, pin: f.commit.pinOf(req, res, got, strings.TrimPrefix(res.Digest, "sha256:"))}
	if fresh {
		item.w = got.w
	}
	// With the pull's other payloads ready by then: the blob appears only once its pin passed
	// (batch.go), and the pull writes the pin into murmur.lock when it ends (ledger.go).
	if fresh || got.newPin != nil || got.verified != nil || f.casOnly || !f.commit.pinHolds(item.pin) {
		if err := f.commit.commitOf(ctx, item); err != nil {
			prepared.Discard()
			return err
		}
	}
	if err := f.install(req, res, prepared); err != nil {
		return err
	}
	guard.register(ctx)
	f.cas.Touch(d)
	if fresh {
		f.queueCompile(res, got, d, key)
	}
	f.record(ctx, req, res, start, nil)
	return nil
}

// prepare checks the payload and, when the pull stages, readies its tools/ folder: a fresh one
// from what the download staged as it arrived or from the scratch (checkFresh), one the CAS held
// from its blob. key is the compiled cache's key of a fresh payload, when the pull learned it.
func (f *finisher) prepare(ctx context.Context, req Request, res *Result, got *fetched, d digest.Digest) (prepared *fstage.Prepared, key []byte, err error) {
	if got.w != nil {
		return f.checkFresh(req, res, got, d)
	}
	if f.stages {
		prepared, err = fstage.PrepareFromCAS(ctx, f.run.tools(f.proj), f.cas, req.Name, d)
	}
	return prepared, nil, err
}

// checkFresh checks (and stages, when it is this machine's) a downloaded payload from what the
// download staged as it arrived, else from the scratch; the scratch is made durable with the
// pull's other blobs, in its commit.
func (f *finisher) checkFresh(req Request, res *Result, got *fetched, d digest.Digest) (*fstage.Prepared, []byte, error) {
	src, err := got.w.OpenRead()
	if err != nil {
		if got.stream != nil {
			got.stream.Abandon()
		}
		return nil, nil, err
	}
	prepared, key, err := f.checkFrom(req, got, d, src)
	src.Close()
	if err != nil {
		return nil, nil, errs.Wrap(err, errs.TokenOf(err), "%s@%s from %s: %s; nothing was written", req.Name, res.Version, res.Origin, errs.Message(err))
	}
	return prepared, key, nil
}

// checkFrom is checkFresh's check of the payload src holds: what the stream vouches for, or else
// what is read back.
func (f *finisher) checkFrom(req Request, got *fetched, d digest.Digest, src cas.ReaderAt) (*fstage.Prepared, []byte, error) {
	a, err := artifact.Read(src, src.Size())
	if err != nil {
		if got.stream != nil {
			got.stream.Abandon()
		}
		return nil, nil, err
	}
	if got.stream != nil {
		if prepared, key, ok := f.adopt(got, a, src.Size()); ok {
			return prepared, key, nil
		}
	}
	return f.readBack(req, got, d, a, src)
}

// adopt takes what the download's stream staged, or only checked when nothing is staged; ok is
// false when the stream could not vouch for the payload. Either way the stream is done with the
// downloaded bytes, and their share of --jobs goes back.
func (f *finisher) adopt(got *fetched, a *artifact.Archive, size int64) (prepared *fstage.Prepared, key []byte, ok bool) {
	if f.stages {
		prepared = got.stream.Adopt(a, size)
		ok = prepared != nil
	} else {
		ok = got.stream.Verified(a, size)
	}
	got.releaseSlot()
	if ok && got.key != nil {
		key = got.key.Sum(nil)
	}
	return prepared, key, ok
}

// readBack checks (and stages) the payload by reading it back from src, the stream having not
// vouched for it, and hashes it for the compiled cache on the way.
func (f *finisher) readBack(req Request, got *fetched, d digest.Digest, a *artifact.Archive, src cas.ReaderAt) (prepared *fstage.Prepared, key []byte, err error) {
	payloadRereads.Add(1)
	h, known := f.compile.moduleKey(d)
	if known != nil {
		got.known = known
	}
	if f.stages {
		prepared, err = fstage.Prepare(f.run.tools(f.proj), req.Name, d, a, src, h)
	} else {
		err = fstage.CheckPayload(a, h)
	}
	if err == nil && h != nil {
		key = h.Sum(nil)
	}
	return prepared, key, err
}

// rootGuard registers murmur.lock as a GC root before it is written and again after, before the
// lease that protects its blobs ends, so that no gc run elsewhere takes them, even if this
// process is killed in between. Its first failure is a warning of res.
type rootGuard struct {
	commit   *committer // nil outside a project: no lock to register
	lockPath string
	res      *Result
	warned   bool
}

func (f *finisher) rootGuard(res *Result) *rootGuard {
	g := &rootGuard{res: res}
	if !f.casOnly {
		g.commit = f.commit
		g.lockPath, _ = filepath.Abs(f.proj.LockPath())
	}
	return g
}

func (g *rootGuard) register(ctx context.Context) {
	if g.commit == nil {
		return
	}
	if err := g.commit.registerRoot(ctx, g.lockPath); err != nil && !g.warned {
		g.warned = true
		g.res.Warnings = append(g.res.Warnings, "not registered as a GC root, so 'mur cache gc' run outside this project may remove its blobs: "+errs.Message(err))
	}
}

// install moves a prepared payload into tools/, or names the folder tools/ already shows it in.
func (f *finisher) install(req Request, res *Result, prepared *fstage.Prepared) error {
	switch {
	case prepared != nil:
		dir, err := prepared.Install()
		if err != nil {
			return err
		}
		res.Tools = dir
	case f.stages:
		res.Tools = fstage.StagedDir(f.proj.Tools(), req.Name)
	}
	return nil
}

// queueCompile remembers the compiled cache's key of a fresh payload, when the pull hashed it
// (the next pull of d won't), and queues the payload's compile when the cache lacks that key:
// Pull compiles it from the blob, the scratch being gone once committed.
func (f *finisher) queueCompile(res *Result, got *fetched, d digest.Digest, key []byte) {
	if key != nil {
		f.compile.Cache.RememberBlobKey(d, key)
	} else {
		key = got.known
	}
	if f.compile.Precompile != nil && got.archive != nil && !got.archive.Component &&
		(key == nil || !f.compile.Cache.HasCompiled(key)) {
		res.compile = d
	}
}

func (f *finisher) precompile(ctx context.Context, d digest.Digest) error {
	_, wasm, release, err := fstage.ReadBlob(ctx, f.cas, d, true)
	defer release()
	if err != nil || wasm == nil {
		return err
	}
	return f.compile.Precompile(ctx, wasm)
}

// compileQueued precompiles a fresh payload the pull queued, then reports it done. A failure is a
// warning: the blob is pinned and valid, and `mur run` reports why it can't execute it.
func (f *finisher) compileQueued(ctx context.Context, res *Result) {
	d := res.compile
	res.compile = ""
	if ctx.Err() == nil {
		if err := f.precompile(ctx, d); err != nil {
			res.Warnings = append(res.Warnings, "not precompiled: "+err.Error())
		}
	}
	f.report.emit(Event{Name: res.Name, Phase: PhaseDone, Bytes: res.Size, Total: res.Size, From: res.Origin, Elapsed: res.took, Resumed: res.Resumed, Moved: res.Transferred})
}

// record writes the pull record of req: what res pulled, or why it failed.
func (f *finisher) record(ctx context.Context, req Request, res *Result, start time.Time, err error) {
	dur := f.now().Sub(start)
	res.DurationMS = dur.Milliseconds()
	r := cas.Record{
		Time: f.now().UTC(), Ref: req.Asked, Name: req.Name.String(), Version: res.Version, Platform: res.Platform,
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
	f.run.appendRecord(f.cas, r)
}
