package fetch

import (
	"context"
	"sort"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/publish"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/stage"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/fetch/verify"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// Warm is `mur warm`: it makes a project runnable offline by pulling every digest
// murmur.lock pins, staging tools/ and precompiling, and can mirror the lot into an OCI layout
// that other machines use as a store.

// WarmInput is one warming.
type WarmInput struct {
	Project pull.Project
	Lock    *lock.Lock
	Puller  *Puller
	// Platform is "" for this machine's, "all" for every platform the lock names, or one tag.
	Platform string
	// Precompile compiles the payloads this machine runs; nil skips. wasm is unmapped once it
	// returns (stage.ReadBlob): it must not keep it.
	Precompile func(ctx context.Context, wasm []byte) error
	// Layout, when set, receives every warmed blob, so that the folder serves as a store.
	Layout fstore.Store
	// From is the install.from of each artifact; nil means manifest.DefaultFrom() for all.
	From func(name string) ([]string, error)
	// Intent is murmur.yaml, whose differences with the lock are problems; nil for none.
	Intent *Intent
	// Only, when set, narrows the warming to these artifacts (mur pull --platform all REF...).
	Only map[string]bool
}

// WarmReport says what warming did.
type WarmReport struct {
	Artifacts int           `json:"artifacts"`
	Fetched   int           `json:"fetched"`
	Cached    int           `json:"cached"`
	Compiled  int           `json:"compiled"`
	Bytes     int64         `json:"bytes_fetched"`
	Results   []pull.Result `json:"results"`
	// Problems are murmur.lock's differences with murmur.yaml: what the lock pins is warmed all
	// the same, and the warm fails with lock-mismatch.
	Problems []verify.Problem `json:"problems"`
}

// Warm warms. A platform that nobody serves fails with the store's or source's error, naming
// the artifact and platform; what was warmed before stays warm.
func Warm(ctx context.Context, in WarmInput) (_ *WarmReport, err error) {
	rep := &WarmReport{Results: []pull.Result{}, Problems: intentProblems(in.Intent, in.Lock, in.Platform)}
	defer func() {
		if err == nil && in.Intent != nil {
			err = lock.MismatchError(in.Intent.Mismatches(in.Lock, in.Platform))
		}
	}()
	host := ref.HostPlatform()
	for _, plat := range warmPlatforms(in.Lock, in.Platform, host) {
		var reqs []pull.Request
		for _, e := range in.Lock.Artifacts {
			if in.Only != nil && !in.Only[e.Name] {
				continue
			}
			_, pinned, ok := e.Digest(plat)
			if !ok || (in.Platform == "all" && pinned != plat) {
				// With all, an "any" pin is warmed once, in the pass for "any", not again in
				// the pass of every platform it falls back for.
				continue
			}
			n, err := ref.ParseName(e.Name)
			if err != nil {
				return rep, err
			}
			var from []string
			if in.From != nil {
				if from, err = in.From(e.Name); err != nil {
					return rep, err
				}
			}
			reqs = append(reqs, pull.Request{Asked: e.Name + "@" + e.ResolvedVersion, Name: n, Version: e.ResolvedVersion, From: from})
		}
		if len(reqs) == 0 {
			continue
		}
		// Every platform's pass shares one record of store health (with): a store that failed
		// costs its timeout once.
		p := in.Puller.with(func(pl *pull.Puller) {
			pl.Platform = plat
			pl.Compile.Precompile = nil // warm compiles below, cache hits included
		})
		results, err := p.Pull(ctx, in.Project, reqs)
		for _, r := range results {
			if r.Error != "" {
				continue
			}
			rep.Artifacts++
			if r.CacheHit {
				rep.Cached++
			} else {
				rep.Fetched++
				rep.Bytes += r.Transferred
			}
			rep.Results = append(rep.Results, r)
		}
		if err != nil {
			return rep, err
		}
		for i, r := range results {
			d, err := ref.ParseDigest(r.Digest)
			if err != nil {
				return rep, err
			}
			bundle, err := p.pl.RecordedBundle(ctx, reqs[i], in.Lock.Find(r.Name), d)
			if err != nil {
				return rep, err
			}
			if in.Layout != nil {
				if err := mirror(ctx, in.Puller.pl.CAS, in.Layout, r, d, bundle); err != nil {
					return rep, err
				}
			}
			if in.Precompile == nil || (plat != host && plat != ref.PlatformAny) {
				continue
			}
			if compiled, err := warmPrecompile(ctx, in.Puller.pl.CAS, r, in.Precompile); err != nil {
				return rep, err
			} else if compiled {
				rep.Compiled++
			}
		}
	}
	return rep, nil
}

func warmPlatforms(l *lock.Lock, want, host string) []string {
	if want != "all" {
		if want == "" {
			want = host
		}
		return []string{want}
	}
	set := map[string]bool{}
	for _, e := range l.Artifacts {
		if e.SHA256.Any != "" {
			set[ref.PlatformAny] = true
		}
		for p := range e.SHA256.Platforms {
			set[p] = true
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	// This machine's platform goes last: a pull stages tools/ from what it pulled, and tools/
	// must end up holding what this machine runs.
	sort.Slice(out, func(i, j int) bool {
		if (out[i] == host) != (out[j] == host) {
			return out[j] == host
		}
		return out[i] < out[j]
	})
	return out
}

func warmPrecompile(ctx context.Context, store *cas.Store, r pull.Result, compile func(context.Context, []byte) error) (bool, error) {
	d, _ := ref.ParseDigest(r.Digest)
	_, wasm, release, err := stage.ReadBlob(ctx, store, d, true)
	defer release()
	if err != nil || wasm == nil {
		return false, err
	}
	if err := compile(ctx, wasm); err != nil {
		return false, errs.Wrap(err, errs.InvalidArtifact, "%s@%s can't be compiled: %v", r.Name, r.Version, err)
	}
	return true, nil
}

// mirror copies r into dst with its bundles: those its pull records verified, and bundle, the one
// murmur.lock records (nil for none).
func mirror(ctx context.Context, store *cas.Store, dst fstore.Store, r pull.Result, dg digest.Digest, bundle []byte) error {
	n, err := ref.ParseName(r.Name)
	if err != nil {
		return err
	}
	return publish.Push(ctx, dst, publish.Item{CAS: store, Desc: fstore.Descriptor{
		Name: n, Version: r.Version, Platform: r.Platform, Digest: dg, Size: r.Size,
		Title: artifact.FileName(n.Name, r.Version),
	}, Bundles: nonEmpty(bundle)})
}

func nonEmpty(b []byte) [][]byte {
	if b == nil {
		return nil
	}
	return [][]byte{b}
}
