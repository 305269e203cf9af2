package fetch

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// Where a pull may look, in the order a capsule's install.from lists them.
const (
	FromStores  = "stores"
	FromSources = "sources"
)

// DefaultFrom is install.from when a capsule says nothing.
var DefaultFrom = []string{FromStores, FromSources}

// Project is the folder that holds murmur.yaml, murmur.lock and tools/.
type Project struct{ Dir string }

// LockPath is the project's murmur.lock.
func (p Project) LockPath() string { return filepath.Join(p.Dir, lock.FileName) }

// ToolsDir is where pulled artifacts are staged for people to read.
func (p Project) ToolsDir() string { return filepath.Join(p.Dir, "tools") }

// Request is one artifact to pull.
type Request struct {
	Asked   string   // the reference as the user typed it, for the pull record
	Name    ref.Name //
	Version string   // exact, or ref.Latest
	From    []string // install.from, already narrowed by --from; nil means DefaultFrom
	Update  bool     // --update: move the lock to what the request resolves to

	// stageTo is set by the pull for a payload of this machine's platform: a store's download
	// is staged there as it arrives (streamstage.go).
	stageTo *Project
}

// Result is what one pull did.
type Result struct {
	Name        string         `json:"name"`
	Version     string         `json:"version"`
	Platform    string         `json:"platform"`
	Digest      string         `json:"digest"`
	Size        int64          `json:"size"`
	Origin      string         `json:"origin"`
	Release     string         `json:"release,omitempty"`
	Asset       string         `json:"asset,omitempty"`
	CacheHit    bool           `json:"cache_hit"`
	Transferred int64          `json:"transferred"`
	DurationMS  int64          `json:"duration_ms"`
	Tools       string         `json:"tools,omitempty"`
	NewPin      *lock.ScopePin `json:"new_pin,omitempty"`
	Warnings    []string       `json:"warnings,omitempty"`
	Error       string         `json:"error,omitempty"`
	Err         error          `json:"-"` // the failure itself, with its token
	// Skipped are the places asked before Origin answered, and why each did not.
	Skipped []Skipped `json:"skipped,omitempty"`
	// Notes say what the download had to do besides fetching: continue what an earlier pull
	// kept, start over for a server that ignores Range.
	Notes []string `json:"notes,omitempty"`
	// Resumed is how many bytes an earlier, interrupted pull had kept, which this one
	// continued after.
	Resumed int64 `json:"resumed,omitempty"`
	// Connections is how many connections the download used at most.
	Connections int `json:"connections,omitempty"`
	// Mirror is the write-through of the artifact to the mirror registry, when one is set.
	Mirror *MirrorPush `json:"mirror,omitempty"`

	compile digest.Digest // a fresh payload waiting for the compile queue
	took    time.Duration // the pull's own time, before any compile
}

// Phase is where one artifact's pull stands.
type Phase string

// The phases a pull reports, in order; it ends in one of the last three.
const (
	PhaseResolve Phase = "resolving" // asking the lock, the stores and the sources what to fetch
	PhaseFetch   Phase = "fetch"     // bytes are arriving
	PhaseVerify  Phase = "verifying" // checking the payload, committing it, pinning and staging
	PhaseCompile Phase = "compiling" // precompiling the wasm payload
	PhaseDone    Phase = "done"      // fetched, checked, committed, pinned and staged
	PhaseCached  Phase = "cached"    // the CAS held it; nothing was fetched
	PhaseFailed  Phase = "failed"    // it changed nothing
)

// Event reports progress. Bytes and Total count payload bytes; Total is -1 when unknown.
type Event struct {
	Name    string
	Phase   Phase
	Bytes   int64
	Total   int64
	From    string
	Elapsed time.Duration // since this artifact's pull began
}

// Puller is the one pull pipeline: resolve, fetch into a CAS scratch, check, commit, record,
// upsert the lock, stage tools/ and precompile. Stores and sources only supply bytes; every
// check that decides what becomes visible is made here, once.
type Puller struct {
	CAS      *cas.Store
	Stores   []Store
	Source   Source // nil when no source may be asked
	Offline  bool
	Platform string // "" means the host's
	Jobs     int    // parallel pulls; <1 means 4
	// Precompile compiles a fresh payload into the compiled cache; nil skips. A failure is a
	// warning: the blob is pinned and valid, and `mur run` reports why it can't execute it.
	Precompile func(ctx context.Context, wasm []byte) error
	// Compiled, when set with Precompile, tells which payloads the compiled cache holds
	// already, by a key the pull computes as it streams the payload anyway; those are not
	// read back or compiled again.
	Compiled CompiledCache
	Events   func(Event)
	Now      func() time.Time
	// MaxCacheSize, when positive, trims the CAS after a pull to at most this many bytes (the
	// cache: {max_size: …} of config.yaml): unpinned blobs go, least recently used first.
	MaxCacheSize int64
	// Evict removes what derives from a blob a trim removes (kept payloads, compiled modules);
	// nil leaves them to `mur cache gc`.
	Evict func(ctx context.Context, d digest.Digest, dryRun bool) []string
	// Warn reports what went wrong without failing the pull (a trim that could not run); nil
	// drops it.
	Warn func(msg string)

	// Fallbacks says, by store address, when a failure of a store falls through to the next
	// place; a store not named has FallbackNotFound (see chain.go).
	Fallbacks map[string]Fallback
	// Health remembers which stores failed, so that each costs its timeout once; nil makes
	// Pull keep its own.
	Health *StoreHealth
	// Connections is how many connections one large blob is fetched over when its server
	// serves ranges; <1 means DefaultConnections, 1 fetches every blob as one stream. Each
	// connection beyond a blob's first takes a free job slot, so Jobs bounds them all.
	Connections int
	// ParallelMin is the size from which a blob is fetched over several connections; <=0 means
	// DefaultParallelMin.
	ParallelMin int64
	// Chunk is the piece one connection asks for at a time; <=0 means DefaultChunk.
	Chunk int64
	// Mirror, when set, receives every artifact a pull brings in from anywhere else (see
	// mirror.go). A failed push is a warning, unless MirrorRequired.
	Mirror         Store
	MirrorRequired bool

	// CASOnly pulls outside a project: into the CAS and the pull records only, with no
	// murmur.lock and no tools/ (see outside.go).
	CASOnly bool
	// Locked pins nothing: a pull that would change murmur.lock fails with lock-mismatch.
	Locked bool

	hashLast bool // hash a parallel download once it is whole, not as it grows (benchmarks)
	// splitWhen, when set, replaces the rule that splits a slow stream; piecesFirst skips the
	// stream (tests).
	splitWhen   func(n int64, elapsed time.Duration) bool
	piecesFirst bool
}

// CompiledCache is the part of the sandbox runner that lets a pull skip what is compiled already.
type CompiledCache interface {
	// ModuleKey returns a hash that, fed a payload, sums to the key of its compiled form.
	ModuleKey() hash.Hash
	// HasCompiled reports whether the compiled cache holds a sound entry under key.
	HasCompiled(key []byte) bool
}

// moduleKey is a fresh key hash, or nil when the pull compiles nothing or can't ask.
func (p *Puller) moduleKey() hash.Hash {
	if p.Precompile == nil || p.Compiled == nil {
		return nil
	}
	return p.Compiled.ModuleKey()
}

func (p *Puller) warn(format string, args ...any) {
	if p.Warn != nil {
		p.Warn(fmt.Sprintf(format, args...))
	}
}

func (p *Puller) platform() string {
	if p.Platform != "" {
		return p.Platform
	}
	return ref.HostPlatform()
}

func (p *Puller) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Puller) emit(ev Event) {
	if p.Events != nil {
		p.Events(ev)
	}
}

// Pull pulls every request, Jobs at a time, and returns one Result per request in order. The
// error is the first failure; the failed requests changed nothing, the others are complete.
func (p *Puller) Pull(ctx context.Context, proj Project, reqs []Request) ([]Result, error) {
	jobs := p.Jobs
	if jobs < 1 {
		jobs = 4
	}
	results := make([]Result, len(reqs))
	errList := make([]error, len(reqs))
	// The lease keeps every digest this pull learns from GC until the lock pins it.
	lease, err := p.CAS.NewLease(ctx)
	if errors.Is(err, syscall.EROFS) {
		// A read-only home (a restored CI cache): nothing can be brought in, and no gc can run.
		lease, err = nil, nil
	}
	if err != nil {
		for i := range reqs {
			results[i] = Result{Name: reqs[i].Name.String(), Error: err.Error()}
		}
		return results, err
	}
	defer lease.Release()
	// Staging leftovers of killed pulls go before new ones are made; one that can't be removed
	// only costs disk space, and gc tries again.
	if !p.CASOnly {
		sweepStaging(proj, p.now(), false)
	}
	p.health()
	// Payloads are compiled one after another as their downloads finish, beside the downloads
	// still running: each compile spreads over every core by itself, and holds no --jobs slot.
	compiles := make(chan int, len(reqs))
	compiled := make(chan struct{})
	go func() {
		defer close(compiled)
		for i := range compiles {
			p.compile(ctx, &results[i])
		}
	}()
	sem := make(chan struct{}, jobs)
	ctx = withSlots(ctx, sem)
	mirrored := p.mirrorState()
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			res, err := p.pullOne(ctx, proj, reqs[i], lease)
			if err == nil {
				err = p.writeThrough(ctx, reqs[i], &res, mirrored)
			}
			if err != nil {
				res.Name = reqs[i].Name.String()
				res.Error, res.Err = err.Error(), err
				p.emit(Event{Name: res.Name, Phase: PhaseFailed})
			}
			results[i], errList[i] = res, err
			if err == nil && res.compile != "" {
				compiles <- i
			}
		}(i)
	}
	wg.Wait()
	close(compiles)
	<-compiled
	lease.Release()
	p.trim(ctx, proj, errList)
	for _, err := range errList {
		if err != nil {
			return results, err
		}
	}
	return results, nil
}

// trim applies MaxCacheSize once a pull is over. What the pull pinned is safe: the project's lock
// is registered as a GC root, and is the current project's besides.
func (p *Puller) trim(ctx context.Context, proj Project, errList []error) {
	if p.MaxCacheSize <= 0 || !slices.Contains(errList, nil) {
		return
	}
	rep, err := GC(ctx, GCInput{CAS: p.CAS, Project: proj.Dir, OlderThan: -1, MaxSize: p.MaxCacheSize, Evict: p.Evict})
	if err != nil {
		p.warn("the cache was not trimmed to cache.max_size (%d bytes): %s; run 'mur cache gc --max-size %d' to see why", p.MaxCacheSize, errs.Message(err), p.MaxCacheSize)
		return
	}
	if rep.OverMaxSize {
		p.warn("the cache holds %d bytes that locks pin or pulls are bringing in, over cache.max_size (%d bytes); raise it, or remove projects you no longer use and run 'mur cache gc'", rep.Size, p.MaxCacheSize)
	}
}

// pinned is what murmur.lock says about a request.
type pinned struct {
	version  string
	digest   digest.Digest // "" when this platform is not pinned
	platform string
	owner    *lock.ScopePin
}

func (p *Puller) readPin(proj Project, req Request) (pinned, error) {
	if p.CASOnly {
		return pinned{}, nil
	}
	l, err := lock.Read(proj.LockPath())
	if err != nil {
		return pinned{}, err
	}
	var pin pinned
	if op, ok := l.Pin(req.Name.Scope); ok {
		pin.owner = &op
	}
	e := l.Find(req.Name.String())
	if e == nil {
		return pin, nil
	}
	if req.Update {
		// An update re-resolves, also at the pinned version: the lock-conflict for a moved tag
		// tells the user to run exactly that, so the old digest must not be enforced here.
		return pin, nil
	}
	if req.Version != ref.Latest && req.Version != e.ResolvedVersion {
		return pin, errs.New(errs.LockConflict,
			"murmur.lock pins %s at %s, and %s was asked for; to move the pin run 'mur pull --update %s@%s'",
			req.Name, e.ResolvedVersion, req.Version, req.Name, req.Version)
	}
	pin.version = e.ResolvedVersion
	if hex, plat, ok := e.Digest(p.platform()); ok {
		d, err := ref.DigestFromHex(hex)
		if err != nil {
			return pin, errs.Wrap(err, errs.InvalidLock, "murmur.lock pins %s with %q, which is not a sha256 hex digest; fix or remove the entry", req.Name, hex)
		}
		pin.digest, pin.platform = d, plat
	}
	return pin, nil
}

func (p *Puller) pullOne(ctx context.Context, proj Project, req Request, lease *cas.Lease) (res Result, err error) {
	start := p.now()
	res = Result{Name: req.Name.String()}
	// Every failure is recorded, the ones decided before any request (offline, a version the
	// lock doesn't pin) too, so that 'mur cache records' explains each failed pull.
	defer func() {
		if err != nil {
			p.record(req, &res, start, err)
		}
	}()
	p.emit(Event{Name: res.Name, Phase: PhaseResolve, Total: -1})
	pin, err := p.readPin(proj, req)
	if err != nil {
		return res, err
	}
	// Refused before anything is fetched or pinned: staging must not go through a symlink.
	if p.stages() {
		if err := checkStageDirs(proj, req.Name); err != nil {
			return res, err
		}
	}
	version := req.Version
	if pin.version != "" {
		version = pin.version
	}
	if p.stages() {
		req.stageTo = &proj
	}
	// A locked pull whose blob is already here makes no request at all.
	if pin.digest != "" && !req.Update {
		if err := lease.Add(ctx, pin.digest); err != nil {
			return res, err
		}
		if p.CAS.Has(pin.digest) {
			return res, p.cacheHit(ctx, proj, req, &res, &fetched{desc: Descriptor{Name: req.Name, Version: version, Platform: pin.platform, Digest: pin.digest}}, start)
		}
	}
	if p.Offline {
		what := req.Name.String() + "@" + version
		return res, errs.New(errs.Offline, "%s is not in the cache and the network is off (--offline or MUR_OFFLINE); run 'mur warm' (or 'mur pull %s') with network first", what, what)
	}
	got, err := p.fetch(ctx, req, version, pin, lease)
	if err != nil {
		return res, err
	}
	if got.w == nil {
		// Resolved to a digest the CAS already holds: nothing to download.
		return res, p.cacheHit(ctx, proj, req, &res, got, start)
	}
	defer got.w.Close()
	p.emit(Event{Name: res.Name, Phase: PhaseVerify, Bytes: got.w.Size(), Total: got.w.Size(), From: got.desc.Origin})
	fetchTook := p.now().Sub(start)
	res.Version, res.Platform, res.Origin = got.desc.Version, got.desc.Platform, got.desc.Origin
	res.Size, res.Transferred, res.Release, res.Asset, res.NewPin = got.w.Size(), got.xfer.bytes, got.release, got.asset, got.newPin
	res.Skipped, res.Notes, res.Resumed, res.Connections = got.skipped, got.xfer.notes, got.xfer.resumed, got.xfer.conns
	res.Digest = got.w.Digest().String()
	if err := p.finish(ctx, proj, req, &res, got, start); err != nil {
		return res, err
	}
	res.took = fetchTook
	if res.compile != "" {
		// Done once it is compiled.
		p.emit(Event{Name: res.Name, Phase: PhaseCompile, Bytes: res.Size, Total: res.Size, From: res.Origin})
		return res, nil
	}
	p.emit(Event{Name: res.Name, Phase: PhaseDone, Bytes: res.Size, Total: res.Size, From: res.Origin, Elapsed: fetchTook})
	return res, nil
}

// compile precompiles a fresh payload the pull queued, then reports it done. A failure is a
// warning: the blob is pinned and valid, and `mur run` reports why it can't execute it.
func (p *Puller) compile(ctx context.Context, res *Result) {
	d := res.compile
	res.compile = ""
	if ctx.Err() == nil {
		if err := p.precompile(ctx, d); err != nil {
			res.Warnings = append(res.Warnings, "not precompiled: "+err.Error())
		}
	}
	p.emit(Event{Name: res.Name, Phase: PhaseDone, Bytes: res.Size, Total: res.Size, From: res.Origin, Elapsed: res.took})
}

// cacheHit pins and stages a payload the CAS already holds, and records a cache hit: 0 bytes
// transferred.
func (p *Puller) cacheHit(ctx context.Context, proj Project, req Request, res *Result, got *fetched, start time.Time) error {
	st, err := p.CAS.Stat(got.desc.Digest)
	if err != nil {
		return err
	}
	plat := got.desc.Platform
	if plat == "" {
		plat = ref.PlatformAny
	}
	res.Version, res.Platform, res.Digest, res.Size, res.CacheHit = got.desc.Version, plat, got.desc.Digest.String(), st.Size, true
	res.Origin, res.Release, res.Asset, res.NewPin = "cas", got.release, got.asset, got.newPin
	res.Skipped = got.skipped
	if err := p.finish(ctx, proj, req, res, got, start); err != nil {
		return err
	}
	p.emit(Event{Name: res.Name, Phase: PhaseCached, Bytes: st.Size, Total: st.Size, Elapsed: p.now().Sub(start)})
	return nil
}

// fetched is a payload that passed every check but the lock's: in a CAS scratch, or (w nil) a
// blob the CAS already holds.
type fetched struct {
	w       *cas.Writer
	desc    Descriptor
	release string
	asset   string
	newPin  *lock.ScopePin
	archive *artifact.Archive
	xfer    transfer     // what fetching w took
	skipped []Skipped    // the places asked before this one, and why they did not answer
	stream  *streamStage // the payload, staged as it downloaded; nil when it was not
	key     hash.Hash    // the compiled cache's key, fed by stream
}

func (p *Puller) fetch(ctx context.Context, req Request, version string, pin pinned, lease *cas.Lease) (*fetched, error) {
	from := req.From
	if from == nil {
		from = DefaultFrom
	}
	what := req.Name.String() + "@" + version
	var failures []error
	var skipped []Skipped
	asked := []string{} // parallel to failures once every place has failed
	places := p.places(req, from)
	for i, pl := range places {
		asked = append(asked, pl.label)
		var got *fetched
		var err error
		if pl.store != nil {
			got, err = p.fromStore(ctx, pl.store, req, version, pin, lease)
		} else {
			if pin.owner != nil {
				if err := pin.owner.CheckOwner(req.Name.Scope, pl.label, 0); err != nil {
					return nil, err
				}
			}
			got, err = p.fromSource(ctx, req, version, pin, lease)
		}
		if err == nil {
			got.skipped = skipped
			return got, nil
		}
		if pl.store != nil && errors.Is(err, errs.LockConflict) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, err
		}
		failures = append(failures, err)
		skipped = append(skipped, skippedOf(pl.label, err))
		if pl.store != nil && i < len(places)-1 && !p.fallsThrough(pl.store, err) {
			return nil, stopped(what, pl.store, err, skipped[:len(skipped)-1], len(places)-1-i)
		}
	}
	return nil, allFailed(what, req.Name.Scope, from, len(p.Stores) > 0, asked, failures)
}

// place is a store or the source, in the order a request asks them.
type place struct {
	store Store // nil for the source
	label string
}

func (p *Puller) places(req Request, from []string) []place {
	var out []place
	for _, kind := range from {
		switch kind {
		case FromStores:
			for _, st := range p.Stores {
				out = append(out, place{store: st, label: st.String()})
			}
		case FromSources:
			if p.Source == nil {
				continue
			}
			if label, ok := p.Source.Label(req.Name.Scope); ok {
				out = append(out, place{label: label})
			}
		}
	}
	return out
}

// allFailed is the one error of a pull that every store and source failed: each place's reason
// in one message, so that a store's "not found" is not lost behind a source's DNS error. Its
// token is not-found when every place said so, else the first other failure's.
func allFailed(what, scope string, from []string, haveStores bool, asked []string, failures []error) error {
	var hints []string
	if !slices.Contains(from, FromSources) {
		hints = append(hints, fmt.Sprintf("sources were not granted (install.from: [%s]), so the GitHub source of scope %s was not asked: add sources to capabilities.install.from or push the artifact to a store", strings.Join(from, ", "), scope))
	}
	if slices.Contains(from, FromStores) && !haveStores {
		hints = append(hints, "no store is configured: add one to .murmur/config.yaml (or $MURMUR_HOME/config.yaml) as stores: [\"oci://registry.example:5000/murmur\"], or pass --store oci://HOST[:PORT]/PREFIX or --store oci-layout:PATH")
	}
	hint := ""
	if len(hints) > 0 {
		hint = "; " + strings.Join(hints, "; ")
	}
	if len(asked) == 0 {
		if len(hints) == 0 {
			hint = "; no source serves its scope: add a store to config.yaml or pass --store"
		}
		return errs.New(errs.NotFound, "%s was not found: nothing was asked%s", what, hint)
	}
	tok := errs.NotFound
	for _, err := range failures {
		if t := errs.TokenOf(err); t != errs.NotFound {
			tok = t
			break
		}
	}
	if len(failures) == 1 {
		return errs.Wrap(failures[0], tok, "%s: %s%s", what, errs.Message(failures[0]), hint)
	}
	reasons := make([]string, len(failures))
	for i, err := range failures {
		reasons[i] = fmt.Sprintf("[%d] %s: %s: %s", i+1, asked[i], errs.TokenOf(err), strings.TrimSuffix(errs.Message(err), "."))
	}
	verb := "could not be pulled from"
	if tok == errs.NotFound {
		verb = "was not found in"
	}
	return errs.Wrap(errors.Join(failures...), tok, "%s %s any of the %d places asked: %s%s", what, verb, len(failures), strings.Join(reasons, "; "), hint)
}

// resolveAt turns a request into the descriptor st holds for it. A pinned digest is looked up by
// tag too, for the size the manifest declares (the bound of the download). movedTo is set when
// the tag now names other bytes for the pinned platform: that is the lock's business only if the
// pinned blob itself is gone, which Open finds out. Only a tag that serves the pinned platform
// itself can contradict the pin; an "any" payload for a platform-specific pin means the store does
// not serve that platform.
func (p *Puller) resolveAt(ctx context.Context, st Store, req Request, version string, pin pinned) (desc Descriptor, movedTo digest.Digest, err error) {
	d, err := st.Resolve(ctx, req.Name, version, p.platform())
	d.Origin = st.String()
	switch {
	case pin.digest == "":
		return d, "", err
	case err != nil && errs.TokenOf(err) == errs.Network:
		// A store that can't answer for the tag won't serve the blob either, and asking it
		// again for the blob would cost its timeout twice.
		return Descriptor{}, "", err
	case err == nil && d.Digest == pin.digest:
		d.Platform = pin.platform
		return d, "", nil
	case err == nil && d.Platform == pin.platform:
		movedTo = d.Digest
	}
	return Descriptor{Name: req.Name, Version: version, Platform: pin.platform, Digest: pin.digest, Size: -1, Origin: st.String()}, movedTo, nil
}

func (p *Puller) fromStore(ctx context.Context, st Store, req Request, version string, pin pinned, lease *cas.Lease) (*fetched, error) {
	h := p.health()
	probe, err := h.enter(ctx, st)
	if err != nil {
		return nil, err
	}
	desc, movedTo, err := p.resolveAt(ctx, st, req, version, pin)
	if probe {
		h.verdict(ctx, st, err)
	}
	if err != nil {
		h.failed(ctx, st, err)
		return nil, err
	}
	if desc.Platform == "" {
		desc.Platform = ref.PlatformAny
	}
	if got, err := p.fromCAS(ctx, desc, lease, st.String(), errs.Integrity); got != nil || err != nil {
		return got, err
	}
	key := p.moduleKey()
	w, xfer, stream, err := p.download(ctx, st, req, desc, key)
	if err != nil && movedTo != "" && errors.Is(err, errs.NotFound) {
		return nil, errs.New(errs.LockConflict,
			"%s serves %s@%s as %s, but murmur.lock pins %s; if the new bytes are expected run 'mur pull --update %s@%s', otherwise ask the publisher why the tag moved",
			st, req.Name, version, movedTo, pin.digest, req.Name, version)
	}
	if err != nil {
		h.failed(ctx, st, err)
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			w.Close()
			if stream != nil {
				stream.abandon()
			}
		}
	}()
	if w.Digest() != desc.Digest || (desc.Size >= 0 && w.Size() != desc.Size) {
		return nil, errs.New(errs.Integrity, "%s served %d bytes with digest %s for %s@%s, expected %s (%d bytes); nothing was written; report it to the store's owner",
			st, w.Size(), w.Digest(), req.Name, desc.Version, desc.Digest, desc.Size)
	}
	a, err := checkPacked(w, w.Size(), req.Name, desc.Version, st.String(), errs.Integrity)
	if err != nil {
		return nil, err
	}
	ok = true
	if stream == nil {
		key = nil
	}
	return &fetched{w: w, desc: desc, archive: a, xfer: xfer, stream: stream, key: key}, nil
}

// fromCAS leases desc's digest and, when the CAS holds it, returns it as fetched without
// downloading anything, once its packed manifest names what it was resolved as. It returns nil,
// nil when the CAS does not hold it.
func (p *Puller) fromCAS(ctx context.Context, desc Descriptor, lease *cas.Lease, origin string, tok errs.Token) (*fetched, error) {
	if err := lease.Add(ctx, desc.Digest); err != nil {
		return nil, err
	}
	if !p.CAS.Has(desc.Digest) {
		return nil, nil
	}
	blob, err := p.CAS.ReaderAt(ctx, desc.Digest)
	if errors.Is(err, errs.NotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer blob.Close()
	a, err := checkPacked(blob, blob.Size(), desc.Name, desc.Version, origin, tok)
	if err != nil {
		return nil, err
	}
	return &fetched{desc: desc, archive: a}, nil
}

func (p *Puller) fromSource(ctx context.Context, req Request, version string, pin pinned, lease *cas.Lease) (*fetched, error) {
	s, err := p.Source.Resolve(ctx, req.Name, version, p.platform(), pin.owner)
	if err != nil {
		return nil, err
	}
	if pin.digest != "" && s.Digest != pin.digest {
		return nil, errs.New(errs.LockConflict, "%s serves %s@%s as %s, but murmur.lock pins %s; if the new bytes are expected run 'mur pull --update %s@%s'",
			s.Origin, req.Name, s.Version, s.Digest, pin.digest, req.Name, s.Version)
	}
	if got, err := p.fromCAS(ctx, s.Descriptor, lease, s.Origin, errs.IndexMismatch); got != nil || err != nil {
		if got != nil {
			got.release, got.asset, got.newPin = s.Release, s.Asset, s.NewPin
		}
		return got, err
	}
	w, err := p.CAS.OpenResumable(ctx, cas.ResumeInfo{Digest: s.Digest, Size: s.Size, Store: s.Origin})
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			w.Close()
		}
	}()
	rs := p.newRangedScratch(w, s, req.Name.String())
	s, err = p.Source.Fetch(ctx, req.Name, version, p.platform(), pin.owner, rs)
	if err != nil {
		ok = true // dropOrKeep closes it
		return nil, p.dropOrKeep(ctx, w, err, "fetching %s@%s from %s", req.Name, version, rs.f.from)
	}
	if pin.digest != "" && s.Digest != pin.digest {
		return nil, errs.New(errs.LockConflict, "%s serves %s@%s as %s, but murmur.lock pins %s; if the new bytes are expected run 'mur pull --update %s@%s'",
			s.Origin, req.Name, s.Version, s.Digest, pin.digest, req.Name, s.Version)
	}
	if w.Digest() != s.Digest {
		return nil, errs.New(errs.Integrity, "%s reported %s for %s@%s but the bytes hash to %s; nothing was written", s.Origin, s.Digest, req.Name, s.Version, w.Digest())
	}
	a, err := checkPacked(w, w.Size(), req.Name, s.Version, s.Origin, errs.IndexMismatch)
	if err != nil {
		return nil, err
	}
	ok = true
	return &fetched{w: w, desc: s.Descriptor, release: s.Release, asset: s.Asset, newPin: s.NewPin, archive: a, xfer: rs.xfer()}, nil
}

// checkPacked refuses a payload whose own murmur.yaml names another artifact or version than
// the one it was resolved as: a store or source must not swap one tool for another.
func checkPacked(r io.ReaderAt, size int64, name ref.Name, version, origin string, tok errs.Token) (*artifact.Archive, error) {
	a, err := artifact.Read(r, size)
	if err != nil {
		return nil, errs.Wrap(err, errs.TokenOf(err), "%s@%s from %s: %s", name, version, origin, errs.Message(err))
	}
	if a.Manifest.Name != name.Name || a.Manifest.Version != version {
		return nil, errs.New(tok, "%s served %s@%s, but its packed murmur.yaml says name %q and version %q; nothing was written; report it to the publisher",
			origin, name, version, a.Manifest.Name, a.Manifest.Version)
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
	var prepared *preparedStage
	var key []byte // the compiled cache's key of the payload, when the pull could ask
	if fresh {
		// The payload is checked (and staged, when it is this machine's) while the scratch is
		// made durable: from what the download staged as it arrived, else from the scratch.
		src, err := got.w.OpenRead()
		if err != nil {
			if got.stream != nil {
				got.stream.abandon()
			}
			return err
		}
		checked := make(chan error, 1)
		go func() {
			defer src.Close()
			// The scratch is being synced meanwhile, and a cas.Writer serves one goroutine: this
			// one reads the zip again through a handle of its own.
			a, err := artifact.Read(src, src.Size())
			if err != nil {
				if got.stream != nil {
					got.stream.abandon()
				}
				checked <- err
				return
			}
			if stage && got.stream != nil {
				if prepared = got.stream.adopt(a, src.Size()); prepared != nil {
					if got.key != nil {
						key = got.key.Sum(nil)
					}
					checked <- nil
					return
				}
			}
			h := p.moduleKey()
			if stage {
				prepared, err = prepareStage(proj, req.Name, d, src, h)
			} else {
				err = checkPayload(a, h)
			}
			if err == nil && h != nil {
				key = h.Sum(nil)
			}
			checked <- err
		}()
		syncErr := got.w.Sync()
		if err := <-checked; err != nil {
			return errs.Wrap(err, errs.TokenOf(err), "%s@%s from %s: %s; nothing was written", req.Name, res.Version, res.Origin, errs.Message(err))
		}
		if syncErr != nil {
			prepared.discard()
			return syncErr
		}
	} else if stage {
		var err error
		if prepared, err = prepareFromCAS(ctx, proj, p.CAS, req.Name, d); err != nil {
			return err
		}
	}
	// The lock is registered as a GC root before it is written and again after, before the lease
	// that protects its blobs ends, so that no gc run elsewhere takes them, even if this process
	// is killed in between.
	lockPath, _ := filepath.Abs(proj.LockPath())
	warned := false
	register := func() {
		if p.CASOnly {
			return
		}
		if err := p.CAS.RegisterRoot(ctx, lockPath); err != nil && !warned {
			warned = true
			res.Warnings = append(res.Warnings, "not registered as a GC root, so 'mur cache gc' run outside this project may remove its blobs: "+errs.Message(err))
		}
	}
	register()
	size, want := res.Size, d
	err := p.lockUpdate()(ctx, proj.LockPath(), func(l *lock.Lock) error {
		if got.newPin != nil {
			// Another process may have pinned the scope since this pull read the lock.
			if cur, ok := l.Pin(req.Name.Scope); ok {
				if err := cur.CheckOwner(req.Name.Scope, got.newPin.Source, got.newPin.OwnerID); err != nil {
					return err
				}
			} else if err := l.SetPin(req.Name.Scope, *got.newPin); err != nil {
				return err
			}
		}
		plat := res.Platform
		if e := l.Find(req.Name.String()); e != nil && len(e.SHA256.Platforms) > 0 && plat == ref.PlatformAny && p.platform() != ref.PlatformAny {
			// The entry already pins per platform (a mixed fleet): a store's "any" payload is
			// what this platform runs, so it is pinned under this platform's own key.
			plat = p.platform()
		}
		if err := l.Upsert(req.Name.String(), res.Version, plat, hex, "operator", req.Update); err != nil {
			return err
		}
		if fresh {
			// Under the lock's own file lock: the blob appears only once the lock will pin it.
			_, err := got.w.Commit(ctx, size, want)
			return err
		}
		return nil
	})
	if err != nil {
		prepared.discard()
		return err
	}
	switch {
	case prepared != nil:
		dir, err := prepared.install()
		if err != nil {
			return err
		}
		res.Tools = dir
	case stage:
		res.Tools = StagedDir(proj, req.Name)
	}
	register()
	p.CAS.Touch(d)
	if fresh && p.Precompile != nil && got.archive != nil && !got.archive.Component &&
		(key == nil || !p.Compiled.HasCompiled(key)) {
		// Queued: Pull compiles it from the blob (the scratch is gone once committed).
		res.compile = d
	}
	p.record(req, res, start, nil)
	return nil
}

func (p *Puller) precompile(ctx context.Context, d digest.Digest) error {
	_, wasm, err := readBlob(ctx, p.CAS, d, true)
	if err != nil || wasm == nil {
		return err
	}
	return p.Precompile(ctx, wasm)
}

func (p *Puller) record(req Request, res *Result, start time.Time, err error) {
	dur := p.now().Sub(start)
	res.DurationMS = dur.Milliseconds()
	r := cas.Record{
		Time: p.now().UTC(), Ref: req.Asked, Name: req.Name.String(), Version: res.Version, Platform: res.Platform,
		Digest: digest.Digest(res.Digest), Size: res.Size, Source: res.Origin, Release: res.Release, Asset: res.Asset,
		Transferred: res.Transferred, DurationMS: dur.Milliseconds(), Outcome: cas.OutcomePulled,
	}
	if res.NewPin != nil {
		r.OwnerID = res.NewPin.OwnerID
	}
	r.Notes = res.Notes
	for _, sk := range res.Skipped {
		r.Skipped = append(r.Skipped, cas.Skip{Place: sk.Place, Token: sk.Token, Reason: sk.Reason})
	}
	if res.CacheHit {
		r.Outcome = cas.OutcomeCacheHit
	}
	if err != nil {
		r.Outcome, r.Error = cas.OutcomeFailed, err.Error()
	}
	// A record that can't be written must not undo a pull that is complete.
	_ = p.CAS.AppendRecord(r)
}

type progressWriter struct {
	w     io.Writer
	p     *Puller
	name  string
	total int64
	from  string
	n     int64
	last  int64
}

func (pw *progressWriter) Write(b []byte) (int, error) {
	n, err := pw.w.Write(b)
	first := pw.n == 0
	pw.n += int64(n)
	if first || pw.n-pw.last >= 1<<20 {
		pw.last = pw.n
		pw.p.emit(Event{Name: pw.name, Phase: PhaseFetch, Bytes: pw.n, Total: pw.total, From: pw.from})
	}
	return n, err
}
