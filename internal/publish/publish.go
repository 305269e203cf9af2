// Package publish prepares what `mur push` sends to a store: a packed file under a scope, or a
// blob the CAS already holds, mirrored with the same digest.
package publish

import (
	"context"
	"crypto/sha256"
	"io"
	"os"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// Item is one payload to publish: its descriptor and the file that holds its bytes.
type Item struct {
	Desc fetch.Descriptor
	Path string
}

// FromFile reads a packed file's own name and version and publishes it under scope.
func FromFile(path, scope, platform string) (Item, error) {
	if err := ref.ValidateSegment(scope); err != nil {
		return Item{}, errs.New(errs.Usage, "--scope: %s", errs.Message(err))
	}
	if scope == ref.ScopeLocal {
		return Item{}, errs.New(errs.Usage, "scope %q is reserved for files on disk and can't be published; choose your GitHub owner name as the scope", scope)
	}
	a, c, err := artifact.Open(path)
	if err != nil {
		return Item{}, err
	}
	c.Close()
	d, n, err := hashFile(path)
	if err != nil {
		return Item{}, err
	}
	return Item{Path: path, Desc: fetch.Descriptor{
		Name: ref.Name{Scope: scope, Name: a.Manifest.Name}, Version: a.Manifest.Version, Platform: platform,
		Digest: d, Size: n, Title: a.Manifest.Name + "-" + a.Manifest.Version + ".mur.zip",
	}}, nil
}

// FromCAS finds what murmur.lock pins for r and publishes the CAS's copy of it.
func FromCAS(store *cas.Store, l *lock.Lock, r ref.Ref, platform string) (Item, error) {
	if r.Name.Scope == ref.ScopeLocal {
		return Item{}, errs.New(errs.Usage, "%s was read from a file on disk, and scope %q can't be published; push the file itself under your scope: 'mur push FILE.mur.zip --scope SCOPE --store STORE'", r.Name, ref.ScopeLocal)
	}
	e := l.Find(r.Name.String())
	if e == nil {
		return Item{}, errs.New(errs.NotFound, "%s is not in murmur.lock; pull it first ('mur pull %s') or push a file with 'mur push FILE.mur.zip --scope %s'", r.Name, r, r.Name.Scope)
	}
	if r.Version != ref.Latest && r.Version != e.ResolvedVersion {
		return Item{}, errs.New(errs.NotFound, "murmur.lock pins %s at %s, not %s; pull %s first", r.Name, e.ResolvedVersion, r.Version, r)
	}
	want := platform
	if want == ref.PlatformAny {
		want = ref.HostPlatform()
	}
	hex, plat, ok := e.Digest(want)
	if !ok {
		return Item{}, errs.New(errs.NotFound, "murmur.lock pins no payload of %s@%s for %s", r.Name, e.ResolvedVersion, want)
	}
	d, err := ref.DigestFromHex(hex)
	if err != nil {
		return Item{}, err
	}
	if err := store.Verify(context.Background(), d); err != nil {
		return Item{}, err
	}
	st, err := store.Stat(d)
	if err != nil {
		return Item{}, err
	}
	return Item{Path: store.Path(d), Desc: fetch.Descriptor{
		Name: r.Name, Version: e.ResolvedVersion, Platform: plat, Digest: d, Size: st.Size,
		Title: r.Name.Name + "-" + e.ResolvedVersion + ".mur.zip",
	}}, nil
}

// Push sends it.
func Push(ctx context.Context, dst fetch.Store, it Item) error {
	f, err := os.Open(it.Path)
	if err != nil {
		return errs.Wrap(err, errs.IO, "can't read %s: %v", it.Path, err)
	}
	defer f.Close()
	return dst.Push(ctx, it.Desc, f)
}

func hashFile(path string) (digest.Digest, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, errs.Wrap(err, errs.NotFound, "can't read %s: %v", path, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, errs.Wrap(err, errs.IO, "can't read %s: %v", path, err)
	}
	return digest.NewDigestFromBytes(digest.SHA256, h.Sum(nil)), n, nil
}
