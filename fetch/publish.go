package fetch

import (
	"context"
	"io"
	"os"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// Publishing prepares what `mur push` sends to a store: a packed file under a scope, or a
// blob the CAS already holds, mirrored with the same digest.

// PublishItem is one payload to publish: its descriptor and where its bytes are.
type PublishItem struct {
	Desc Descriptor
	File string // the packed file to send; "" when the bytes come from the CAS
	cas  *cas.Store
}

// PublishFile reads a packed file's own name and version and publishes it under scope.
func PublishFile(path, scope, platform string) (PublishItem, error) {
	if err := ref.ValidateSegment(scope); err != nil {
		return PublishItem{}, errs.New(errs.Usage, "--scope: %s", errs.Message(err))
	}
	if scope == ref.ScopeLocal {
		return PublishItem{}, errs.New(errs.Usage, "scope %q is reserved for files on disk and can't be published; choose your GitHub owner name as the scope", scope)
	}
	a, c, err := artifact.Open(path)
	if err != nil {
		return PublishItem{}, err
	}
	c.Close()
	d, n, err := artifact.HashFile(path)
	if err != nil {
		return PublishItem{}, err
	}
	return PublishItem{File: path, Desc: Descriptor{
		Name: ref.Name{Scope: scope, Name: a.Manifest.Name}, Version: a.Manifest.Version, Platform: platform,
		Digest: d, Size: n, Title: artifact.FileName(a.Manifest.Name, a.Manifest.Version),
	}}, nil
}

// PublishFromCAS finds what murmur.lock pins for r and publishes the CAS's copy of it.
func PublishFromCAS(store *cas.Store, l *lock.Lock, r ref.Ref, platform string) (PublishItem, error) {
	if r.Name.Scope == ref.ScopeLocal {
		return PublishItem{}, errs.New(errs.Usage, "%s was read from a file on disk, and scope %q can't be published; push the file itself under your scope: 'mur push FILE.mur.zip --scope SCOPE --store STORE'", r.Name, ref.ScopeLocal)
	}
	e := l.Find(r.Name.String())
	if e == nil {
		return PublishItem{}, errs.New(errs.NotFound, "%s is not in murmur.lock; pull it first ('mur pull %s') or push a file with 'mur push FILE.mur.zip --scope %s'", r.Name, r, r.Name.Scope)
	}
	if r.Version != ref.Latest && r.Version != e.ResolvedVersion {
		return PublishItem{}, errs.New(errs.NotFound, "murmur.lock pins %s at %s, not %s; pull %s first", r.Name, e.ResolvedVersion, r.Version, r)
	}
	want := platform
	if want == ref.PlatformAny {
		want = ref.HostPlatform()
	}
	hex, plat, ok := e.Digest(want)
	if !ok {
		return PublishItem{}, errs.New(errs.NotFound, "murmur.lock pins no payload of %s@%s for %s", r.Name, e.ResolvedVersion, want)
	}
	d, err := ref.DigestFromHex(hex)
	if err != nil {
		return PublishItem{}, err
	}
	// Verified now, so that a damaged blob is refused before anything is sent, and quarantined.
	if err := store.Verify(context.Background(), d); err != nil {
		return PublishItem{}, err
	}
	st, err := store.Stat(d)
	if err != nil {
		return PublishItem{}, err
	}
	return PublishItem{cas: store, Desc: Descriptor{
		Name: r.Name, Version: e.ResolvedVersion, Platform: plat, Digest: d, Size: st.Size,
		Title: artifact.FileName(r.Name.Name, e.ResolvedVersion),
	}}, nil
}

// Publish sends it. The store is handed the bytes as they are; it refuses a version it already
// holds with another digest.
func Publish(ctx context.Context, dst Store, it PublishItem) error {
	if it.cas != nil {
		blob, err := it.cas.ReaderAt(ctx, it.Desc.Digest)
		if err != nil {
			return err
		}
		defer blob.Close()
		return dst.Push(ctx, it.Desc, io.NewSectionReader(blob, 0, blob.Size()))
	}
	f, err := os.Open(it.File)
	if err != nil {
		return errs.Wrap(err, errs.IO, "can't read %s: %v", it.File, err)
	}
	defer f.Close()
	return dst.Push(ctx, it.Desc, f)
}
