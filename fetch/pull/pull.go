// Package pull is the pull pipeline beneath fetch's verbs, as the Go command's modfetch is beneath
// modload: it resolves each request at the places it may look (the lock's pin, the stores in
// order, the scope's source), downloads into a CAS scratch, checks the bytes against the index,
// the lock and the provenance policy, commits the blob, records the pull, stages tools/ and
// precompiles. It learns of murmur.lock only through the LockWriter it is handed, and takes its
// limits as fields, never from the context.
//
// The Puller holds the options and drives each request through its phases, each a type that
// holds only what it reads of the Puller (built by a method of the same name): the resolver
// (resolve.go, chain.go, meta.go, offline_latest.go: the places asked, their health, "latest"
// offline), the fetcher (fetch.go, source.go, download.go: the chain walk and the downloads),
// the attestor (provenance.go, bundles_early.go: Sigstore bundles), the committer (batch.go,
// ledger.go, once.go: the pins, group commits and the one write of murmur.lock) and the finisher
// (commit.go: checking and staging the payload, the records, the precompile queue). The
// mirrorWriter (mirror.go, mirror_denied.go) writes what a pull brought in through to a mirror.
//
// Files: pull.go (Puller, Pull, one request); options.go (its options, by concern); run.go (what
// one Pull shares, and the phases built for it); slots.go (the bounds on what is in flight);
// download_bound.go, kept.go (the seam to fetch/internal/download); warm_bundles.go (a recorded
// bundle for warm); events.go (progress).
package pull

import (
	"context"
	"hash"
	"path/filepath"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// Where a pull may look, in the order a capsule's install.from lists them: manifest's words.
const (
	FromStores  = manifest.FromStores
	FromSources = manifest.FromSources
)

// Project is the folder that holds murmur.yaml, murmur.lock and tools/.
type Project struct{ Dir string }

// LockPath is the project's murmur.lock.
func (p Project) LockPath() string { return filepath.Join(p.Dir, lock.FileName) }

// ToolsDir is where pulled artifacts are staged for people to read.
func (p Project) ToolsDir() string { return p.Tools().Dir() }

// Tools is the project's tools/ folder, as the stage reaches it.
func (p Project) Tools() stage.Tools { return stage.Tools{Project: p.Dir} }

// Request is one artifact to pull.
type Request struct {
	Asked   string   // the reference as the user typed it, for the pull record
	Name    ref.Name //
	Version string   // exact, or ref.Latest
	From    []string // install.from, already narrowed by --from; nil means manifest.DefaultFrom()
	Update  bool     // --update: move the lock to what the request resolves to

	// stageTo is set by the pull for a payload of this machine's platform: a store's download
	// is staged there as it arrives (streamstage.go). Without it (outside a project, another
	// platform's payload) the payload is only checked as it arrives, and written nowhere.
	stageTo *stage.Tools
}

// Result is what one pull did. Its json tags are its --json shape (docs/json.md): every key,
// always; a command's view adds its own keys and the errors as {token, message}.
type Result struct {
	Name        string         `json:"name"`
	Version     string         `json:"version"`
	Platform    string         `json:"platform"`
	Digest      string         `json:"digest"`
	Size        int64          `json:"size"`
	Origin      string         `json:"origin"`
	Release     string         `json:"release"`
	Asset       string         `json:"asset"`
	CacheHit    bool           `json:"cache_hit"`
	Transferred int64          `json:"transferred"`
	DurationMS  int64          `json:"duration_ms"`
	Tools       string         `json:"tools"`
	NewPin      *lock.ScopePin `json:"new_pin"`
	Warnings    []string       `json:"warnings"`
	Error       string         `json:"-"` // the failure as a record keeps it, "token: message"
	Err         error          `json:"-"` // the failure itself, with its token
	// Skipped are the places asked before Origin answered, and why each did not.
	Skipped []Skipped `json:"skipped"`
	// Notes say what the download had to do besides fetching: continue what an earlier pull
	// kept, start over for a server that ignores Range.
	Notes []string `json:"notes"`
	// Resumed is how many bytes an earlier, interrupted pull had kept, which this one
	// continued after.
	Resumed int64 `json:"resumed"`
	// Connections is how many connections the download used at most.
	Connections int `json:"connections"`
	// Mirror is the write-through of the artifact to the mirror registry, when one is set.
	Mirror *MirrorPush `json:"-"` // in --json with its error as {token, message}
	// ResolvedOffline is set when "latest" was resolved offline from what the cache knew
	// (offline_latest.go); Warnings then say how old that knowledge is.
	ResolvedOffline bool `json:"resolved_offline"`
	// Provenance is what the artifact's verified Sigstore bundle proved, when this pull checked one.
	Provenance *cas.Provenance `json:"provenance"`
	// Unsigned is the one of Warnings that says no place held a provenance bundle for the
	// artifact, when one did: a command says that once per scope (fetch.UnsignedWarnings).
	Unsigned string `json:"-"`

	compile     digest.Digest // a fresh payload waiting for the compile queue
	private     bool          // fetched with the user's credentials, now or by an earlier pull
	versionList digest.Digest // the cached list "latest" was resolved from online, if it was
	took        time.Duration // the pull's own time, before any compile
}

// Puller is the one pull pipeline: resolve, fetch into a CAS scratch, check, commit, record,
// upsert the lock, stage tools/ and precompile. Stores and sources only supply bytes; every
// check that decides what becomes visible is made here, once.
type Puller struct {
	CAS      *cas.Store
	Stores   []store.Store
	Source   store.Source // nil when no source may be asked
	Offline  bool
	Platform string // "" means the host's
	// CASOnly pulls outside a project: into the CAS and the pull records only, with no
	// murmur.lock and no tools/ (see outside.go).
	CASOnly bool
	// Lock is how the pull changes murmur.lock, handed down by the project verbs, which decide
	// there what the lock keeps (fetch's one transition). nil pins nothing: a pull that would
	// change murmur.lock fails with lock-mismatch, as --locked does.
	Lock LockWriter

	Limits     Limits
	Chain      Chain
	Mirror     Mirror
	Provenance Provenance
	Compile    Compile
	Report     Report
	Now        func() time.Time

	// run is what one Pull shares among its requests (run.go); nil outside a Pull.
	run *run
}

// CompiledCache is the part of the sandbox runner that lets a pull skip what is compiled already.
type CompiledCache interface {
	// ModuleKey returns a hash that, fed a payload, sums to the key of its compiled form.
	ModuleKey() hash.Hash
	// HasCompiled reports whether the compiled cache holds a sound entry under key.
	HasCompiled(key []byte) bool
	// BlobKey returns the key remembered for the payload of blob d, so that it need not be
	// hashed again; RememberBlobKey remembers one the pull hashed. A remembered key is a hint:
	// a wrong one only costs or spares a precompile.
	BlobKey(d digest.Digest) ([]byte, bool)
	RememberBlobKey(d digest.Digest, key []byte)
}

// moduleKey is how the pull learns the compiled cache's key of blob d's payload: the key the
// cache remembers, or else a fresh hash to feed the payload with; both nil when the pull compiles
// nothing or can't ask.
func (c Compile) moduleKey(d digest.Digest) (hash.Hash, []byte) {
	if c.Precompile == nil || c.Cache == nil {
		return nil, nil
	}
	if key, ok := c.Cache.BlobKey(d); ok {
		return nil, key
	}
	return c.Cache.ModuleKey(), nil
}

// Warnf reports what went wrong without failing the pull.
func (p *Puller) Warnf(format string, args ...any) { p.Report.warnf(format, args...) }

func (p *Puller) TargetPlatform() string {
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

// Pull pulls every request, its downloads bounded by Jobs, and returns one Result per request in order. The
// error is the first failure; the failed requests changed nothing, the others are complete.
func (p *Puller) Pull(ctx context.Context, proj Project, reqs []Request) ([]Result, error) {
	p, lease, failed, err := p.open(ctx, proj, reqs)
	if err != nil {
		return failed, err
	}
	defer lease.Release()
	results := make([]Result, len(reqs))
	errList := make([]error, len(reqs))
	ph := p.phases(proj)
	pinned := ph.commit.pinOnInterrupt(ctx)
	// Payloads are compiled one after another as their downloads finish, beside the downloads
	// still running: each compile spreads over every core by itself, and holds no --jobs slot.
	compiles := make(chan int, len(reqs))
	compiled := make(chan struct{})
	go func() {
		defer close(compiled)
		for i := range compiles {
			ph.finish.compileQueued(ctx, &results[i])
		}
	}()
	mirror := p.mirrorWriter()
	var wg sync.WaitGroup
	workers := p.workers()
	for i := range reqs {
		wg.Add(1)
		workers <- struct{}{}
		go func(i int) {
			defer func() { <-workers }()
			defer wg.Done()
			res, err := p.pullOne(ctx, ph, reqs[i], lease)
			if err == nil {
				err = mirror.writeThrough(ctx, reqs[i], &res)
			}
			if err != nil {
				res.Name = reqs[i].Name.String()
				res.Error, res.Err = err.Error(), err
				p.Report.emit(Event{Name: res.Name, Phase: PhaseFailed, Kept: keptOf(err)})
			}
			results[i], errList[i] = res, err
			if err == nil && res.compile != "" {
				compiles <- i
			}
		}(i)
	}
	wg.Wait()
	pinned()
	ph.commit.pinFailures(results, errList)
	close(compiles)
	<-compiled
	lease.Release()

	for _, err := range errList {
		if err != nil {
			return results, err
		}
	}
	return results, nil
}

// workers bounds the requests a pull works on at once to what can move: every metadata request
// and every download its slots hold. The rest wait their turn as no more than an index, instead of
// as a goroutine each, whose stack (tens of KiB once it has resolved) a pull of 1,000 artifacts
// held all at once.
func (p *Puller) workers() chan struct{} {
	return make(chan struct{}, p.Limits.metaJobs()+p.run.jobs.Most())
}

// pullOne pulls one request through the phases: its pin, what the CAS holds already, the places
// of its chain, its provenance, and the finish.
func (p *Puller) pullOne(ctx context.Context, ph *phases, req Request, lease *cas.Lease) (res Result, err error) {
	start := p.now()
	res = Result{Name: req.Name.String()}
	// Every failure is recorded, the ones decided before any request (offline, a version the
	// lock doesn't pin) too, so that 'mur cache records' explains each failed pull.
	defer func() {
		if err != nil {
			ph.finish.record(ctx, req, &res, start, err)
		}
	}()
	p.Report.emit(Event{Name: res.Name, Phase: PhaseResolve, Total: -1})
	pin, err := ph.commit.readPin(ctx, req)
	if err != nil {
		return res, err
	}
	// Refused before anything is fetched or pinned: staging must not go through a symlink.
	if p.stages() {
		if err := stage.CheckDirs(ph.proj.Tools(), req.Name); err != nil {
			return res, err
		}
		t := p.run.tools(ph.proj)
		req.stageTo = &t
	}
	version := req.Version
	if pin.version != "" {
		version = pin.version
	}
	if done, err := p.fromCache(ctx, ph, req, pin, version, lease, &res, start); done {
		return res, err
	}
	rv := ph.resolve
	if p.Offline {
		// Folders on disk (an oci-layout: store, a packed file) are no network: an air-gapped
		// machine pulls from the layout `mur warm --layout` wrote. Nothing else is asked.
		if rv = rv.localOnly(); rv == nil {
			what := req.Name.String() + "@" + version
			return res, errs.New(errs.Offline, "%s is not in the cache and the network is off (--offline or MUR_OFFLINE); run 'mur warm' (or 'mur pull %s') with network first, or pull from a layout that 'mur warm --layout DIR' wrote: --store oci-layout:DIR", what, what)
		}
	}
	got, err := p.fetcher(rv).fetch(ctx, req, version, pin, lease)
	if err != nil {
		return res, err
	}
	defer got.releaseSlot() // finish gives it back once the payload is followed
	if version == ref.Latest {
		res.versionList = rv.keepVersionList(ctx, req, got.desc, lease)
	}
	if err := ph.attest.check(ctx, req, pin, got, &res); err != nil {
		got.discard()
		return res, err
	}
	if got.w == nil {
		// Resolved to a digest the CAS already holds: nothing to download.
		return res, ph.finish.cacheHit(ctx, req, &res, got, start)
	}
	defer got.w.Close()
	p.Report.emit(Event{Name: res.Name, Phase: PhaseVerify, Bytes: got.w.Size(), Total: got.w.Size(), From: got.desc.Origin})
	fetchTook := p.now().Sub(start)
	got.describe(&res)
	if err := ph.finish.finish(ctx, req, &res, got, start); err != nil {
		return res, err
	}
	res.took = fetchTook
	if res.compile != "" {
		// Done once it is compiled.
		p.Report.emit(Event{Name: res.Name, Phase: PhaseCompile, Bytes: res.Size, Total: res.Size, From: res.Origin})
		return res, nil
	}
	p.Report.emit(Event{Name: res.Name, Phase: PhaseDone, Bytes: res.Size, Total: res.Size, From: res.Origin, Elapsed: fetchTook, Resumed: res.Resumed, Moved: res.Transferred})
	return res, nil
}

// fromCache answers req from what the CAS holds, without asking any place: the blob murmur.lock
// pins (a locked pull whose blob is here makes no request at all), or, offline, the version
// "latest" was when it was last listed. done is false when the request must be fetched.
func (p *Puller) fromCache(ctx context.Context, ph *phases, req Request, pin pinned, version string, lease *cas.Lease, res *Result, start time.Time) (done bool, err error) {
	if pin.digest != "" && !req.Update {
		if err := lease.Add(ctx, pin.digest); err != nil {
			return true, err
		}
		if p.CAS.Has(pin.digest) {
			got := &fetched{desc: store.Descriptor{Name: req.Name, Version: version, Platform: pin.platform, Digest: pin.digest, Origin: originPin}}
			if err := ph.attest.fromCAS(ctx, req, pin, got, res); err != nil {
				return true, err
			}
			return true, ph.finish.cacheHit(ctx, req, res, got, start)
		}
	}
	if p.Offline && version == ref.Latest {
		got, warning, err := ph.resolve.offlineLatest(ctx, req, lease)
		if err != nil {
			return true, err
		}
		if got != nil {
			res.Warnings, res.ResolvedOffline = append(res.Warnings, warning), true
			return true, ph.finish.cacheHit(ctx, req, res, got, start)
		}
	}
	return false, nil
}
