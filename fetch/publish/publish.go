// Package publish is what `mur push` and the write-through mirror send to a store: a packed
// artifact from a file or from the CAS, under the name and version its own murmur.yaml packs,
// with the Sigstore bundles kept for it attached as referrers (bundles.go).
package publish

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/provenance"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// Publishing prepares what `mur push` sends to a store: a packed file under a scope, or a
// blob the CAS already holds, mirrored with the same digest.

// Item is one payload to publish: its descriptor and where its bytes are.
type Item struct {
	Desc fstore.Descriptor
	File string // the packed file to send; "" when the bytes come from the CAS
	// Bundles are Sigstore bundles to attach beside it (mur push --sign-key); an item from the
	// CAS also carries the bundles its pull records verified (publish_bundles.go).
	Bundles [][]byte
	CAS     *cas.Store
}

// FromFile reads a packed file's own name and version and publishes it under scope.
func FromFile(path, scope, platform string) (Item, error) {
	if err := ref.ValidateSegment(scope); err != nil {
		return Item{}, errs.New(errs.Usage, "--scope: %s", errs.Message(err))
	}
	if err := lock.CheckScopeSource(scope, ""); err != nil {
		return Item{}, errs.Wrap(err, errs.Usage, "%s, so it can't be published; choose your GitHub owner name as the scope", errs.Message(err))
	}
	a, c, err := artifact.Open(path)
	if err != nil {
		return Item{}, err
	}
	c.Close()
	d, n, err := artifact.HashFile(path)
	if err != nil {
		return Item{}, err
	}
	return Item{File: path, Desc: fstore.Descriptor{
		Name: ref.Name{Scope: scope, Name: a.Manifest.Name}, Version: a.Manifest.Version, Platform: platform,
		Digest: d, Size: n, Title: artifact.FileName(a.Manifest.Name, a.Manifest.Version),
	}}, nil
}

// FromCAS finds the blob of r in the CAS and publishes it, mirroring it with the same
// digest: what murmur.lock (l, which may be nil outside a project) pins for r, or else what the
// CAS's pull records say was pulled as r, so that `mur push NAME@VERSION` works outside any
// project. latest is the pinned version, or the highest semantic version the records know.
func FromCAS(store *cas.Store, l *lock.Lock, r ref.Ref, platform string) (Item, error) {
	if r.Name.Scope == ref.ScopeLocal {
		return Item{}, errs.New(errs.Usage, "%s was read from a file on disk, and scope %q can't be published; push the file itself under your scope: 'mur push FILE.mur.zip --scope SCOPE --store STORE'", r.Name, ref.ScopeLocal)
	}
	want := platform
	if want == ref.PlatformAny {
		want = ref.HostPlatform()
	}
	var e *lock.Entry
	if l != nil {
		e = l.Find(r.Name.String())
	}
	var (
		d       digest.Digest
		plat    string
		version string
	)
	if e != nil && (r.Version == ref.Latest || r.Version == e.ResolvedVersion) {
		hex, p, ok := e.Digest(want)
		if !ok {
			return Item{}, errs.New(errs.NotFound, "murmur.lock pins no payload of %s@%s for %s", r.Name, e.ResolvedVersion, want)
		}
		var err error
		if d, err = ref.DigestFromHex(hex); err != nil {
			return Item{}, err
		}
		plat, version = p, e.ResolvedVersion
	} else {
		rec, err := fromRecords(store, r, want)
		if err != nil {
			return Item{}, err
		}
		if rec == nil {
			where := "it is not in murmur.lock"
			if e != nil {
				where = fmt.Sprintf("murmur.lock pins %s at %s, not %s", r.Name, e.ResolvedVersion, r.Version)
			}
			return Item{}, errs.New(errs.NotFound, "%s: %s, and the pull records of %s name no %s for %s whose blob is here; pull it first ('mur pull %s') or push a file with 'mur push FILE.mur.zip --scope %s'",
				r, where, store.Root(), r, want, r, r.Name.Scope)
		}
		d, plat, version = rec.Digest, rec.Platform, rec.Version
	}
	// Verified now, so that a damaged blob is refused before anything is sent, and quarantined.
	if err := store.Verify(context.Background(), d); err != nil {
		return Item{}, err
	}
	st, err := store.Stat(d)
	if err != nil {
		return Item{}, err
	}
	return Item{CAS: store, Desc: fstore.Descriptor{
		Name: r.Name, Version: version, Platform: plat, Digest: d, Size: st.Size,
		Title: artifact.FileName(r.Name.Name, version),
	}}, nil
}

// fromRecords is the latest pull record of r (latest: of its highest semantic version) for
// platform, exact or "any", whose blob the CAS still holds; nil when there is none.
func fromRecords(store *cas.Store, r ref.Ref, platform string) (*cas.Record, error) {
	recs, err := store.Records("")
	if err != nil {
		return nil, err
	}
	var usable []cas.Record
	for _, rec := range recs {
		if rec.Name != r.Name.String() || rec.Outcome == cas.OutcomeFailed || rec.Digest == "" || rec.Version == "" ||
			(rec.Platform != platform && rec.Platform != ref.PlatformAny) || !store.Has(rec.Digest) {
			continue
		}
		usable = append(usable, rec)
	}
	version := r.Version
	if version == ref.Latest {
		var versions []string
		for _, rec := range usable {
			versions = append(versions, rec.Version)
		}
		best, ok := ref.HighestSemver(versions)
		if !ok {
			return nil, nil
		}
		version = best
	}
	var found *cas.Record
	for i := range usable {
		rec := &usable[i]
		if rec.Version != version {
			continue
		}
		// The exact platform wins over "any"; among equals, the most recent record.
		if found == nil || rec.Platform == platform || found.Platform != platform {
			found = rec
		}
	}
	return found, nil
}

// Push sends it. The store is handed the bytes as they are; it refuses a version it already
// holds with another digest.
func Push(ctx context.Context, dst fstore.Store, it Item) error {
	if it.CAS != nil {
		blob, err := it.CAS.ReaderAt(ctx, it.Desc.Digest)
		if err != nil {
			return err
		}
		defer blob.Close()
		if err := dst.Push(ctx, it.Desc, io.NewSectionReader(blob, 0, blob.Size())); err != nil {
			return err
		}
		return attachBundles(ctx, dst, it, provenance.RecordedBundles(ctx, it.CAS, it.Desc.Digest))
	}
	f, err := os.Open(it.File)
	if err != nil {
		return errs.Wrap(err, errs.IO, "can't read %s: %v", it.File, err)
	}
	defer f.Close()
	if err := dst.Push(ctx, it.Desc, f); err != nil {
		return err
	}
	return attachBundles(ctx, dst, it, nil)
}
