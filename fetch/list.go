package fetch

import (
	"bytes"
	"context"
	"sort"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// List and Info are `mur ls` and `mur info`: what mur knows of artifacts without asking any
// store, from murmur.yaml, murmur.lock, the pull records, the CAS, tools/ and the compiled cache.

// LocalInput is where List and Info look.
type LocalInput struct {
	CAS     *cas.Store
	Project pull.Project
	// Intent is murmur.yaml and Lock murmur.lock; both nil outside a project.
	Intent *Intent
	Lock   *lock.Lock
	// Compiled tells which payloads the compiled cache holds; nil reports none compiled.
	Compiled pull.CompiledCache
}

// Listed is one artifact in `mur ls`.
type Listed struct {
	Name      string `json:"name"`
	Requested string `json:"requested"` // murmur.yaml's version; "" outside a project
	Version   string `json:"version"`   // the version murmur.lock pins (outside: that was pulled)
	Platform  string `json:"platform"`  // the pin this machine runs
	Digest    string `json:"digest"`
	Size      int64  `json:"size"` // -1 when the CAS does not hold the blob
	Cached    bool   `json:"cached"`
	Staged    bool   `json:"staged"` // tools/ holds it (always false outside a project)
	Compiled  bool   `json:"compiled"`
}

// List lists a project's artifacts: each murmur.yaml declares, in its order, then any pin
// murmur.lock holds that it does not declare. Outside a project (nil Intent) it lists what the
// CAS holds that a pull recorded by name, newest pull first.
func List(ctx context.Context, in LocalInput) ([]Listed, error) {
	if in.Intent == nil || in.Intent.Capsule == nil {
		return listCached(ctx, in)
	}
	l := in.Lock
	if l == nil {
		l = &lock.Lock{}
	}
	host := ref.HostPlatform()
	out := []Listed{}
	seen := map[string]bool{}
	add := func(name ref.Name, requested string) {
		seen[name.String()] = true
		it := Listed{Name: name.String(), Requested: requested, Size: -1}
		if e := l.Find(name.String()); e != nil {
			it.Version = e.ResolvedVersion
			if hex, plat, ok := e.Digest(host); ok {
				it.Platform, it.Digest = plat, "sha256:"+hex
				in.fill(ctx, &it, name, true)
			}
		}
		out = append(out, it)
	}
	for _, a := range in.Intent.Capsule.Artifacts {
		add(a.Name, a.Version)
	}
	for _, e := range l.Artifacts {
		if n, err := ref.ParseName(e.Name); err == nil && !seen[e.Name] {
			add(n, "")
		}
	}
	return out, nil
}

// fill says whether the CAS, tools/ (when staged is asked) and the compiled cache hold it.
func (in LocalInput) fill(ctx context.Context, it *Listed, name ref.Name, staged bool) {
	d := digest.Digest(it.Digest)
	if d.Validate() != nil || !in.CAS.Has(d) {
		return
	}
	it.Cached = true
	if st, err := in.CAS.Stat(d); err == nil {
		it.Size = st.Size
	}
	if staged {
		it.Staged = stage.CheckStaged(in.Project.Tools(), name, d) == nil
	}
	it.Compiled = in.compiled(ctx, d)
}

// compiled reports whether the compiled cache holds the payload of blob d.
func (in LocalInput) compiled(ctx context.Context, d digest.Digest) bool {
	if in.Compiled == nil {
		return false
	}
	// What ls and info report is read from the payload itself, never from the remembered key
	// alone: a wrong key (a hint a pull left, a file someone edited) would report as compiled a
	// blob that is not. A pull may trust the hint, since the worst it costs is a compile.
	a, blob, err := stage.OpenPacked(ctx, in.CAS, d)
	if err != nil {
		return false
	}
	defer blob.Close()
	if a.Component {
		return false
	}
	h := in.Compiled.ModuleKey()
	if _, err := a.CopyPayload(h); err != nil {
		return false
	}
	key := h.Sum(nil)
	if hint, ok := in.Compiled.BlobKey(d); !ok || !bytes.Equal(hint, key) {
		in.Compiled.RememberBlobKey(d, key)
	}
	return in.Compiled.HasCompiled(key)
}

// listCached is List outside a project: each name@version and platform a pull recorded whose
// blob the CAS still holds, once, the newest pull first.
func listCached(ctx context.Context, in LocalInput) ([]Listed, error) {
	recs, err := in.CAS.Records("")
	if err != nil {
		return nil, err
	}
	out := []Listed{}
	seen := map[string]bool{}
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if r.Name == "" || r.Digest == "" || (r.Outcome != cas.OutcomePulled && r.Outcome != cas.OutcomeCacheHit) {
			continue
		}
		k := r.Name + "@" + r.Version + " " + r.Platform + " " + r.Digest.String()
		if seen[k] {
			continue
		}
		seen[k] = true
		n, err := ref.ParseName(r.Name)
		if err != nil {
			continue
		}
		it := Listed{Name: r.Name, Version: r.Version, Platform: r.Platform, Digest: r.Digest.String(), Size: -1}
		in.fill(ctx, &it, n, false)
		if it.Cached {
			out = append(out, it)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
