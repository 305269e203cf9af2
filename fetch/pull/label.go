package pull

import (
	"context"
	"fmt"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// PackedAs is the one check that a blob is the artifact it is taken for: its own murmur.yaml
// names name and version. Every path that takes a blob as name@version makes it: a download from
// a store or a source (checkPacked), a pull of a blob the CAS already holds (cachedLabel), and
// mur verify, with or without --repair. The error says what the blob says it is; the caller
// says who claimed otherwise, and what to do.
func PackedAs(a *artifact.Archive, name ref.Name, version string) error {
	if a.Manifest.Name != name.Name || a.Manifest.Version != version {
		return fmt.Errorf("its packed murmur.yaml says name %q and version %q", a.Manifest.Name, a.Manifest.Version)
	}
	return nil
}

// packedAs is PackedAs for a blob origin served as name@version.
func packedAs(a *artifact.Archive, name ref.Name, version, origin string, tok errs.Token) error {
	if err := PackedAs(a, name, version); err != nil {
		return errs.New(tok, "%s served %s@%s, but %v; nothing was written; report it to the publisher", origin, name, version, err)
	}
	return nil
}

// MislabeledPin words PackedAs's refusal of the blob d that murmur.lock pins as name@version: the
// lock was edited to call it another version (by hand, or in a change to a cloned project),
// which a fresh home finds when it downloads the blob, and a warm one must find too.
func MislabeledPin(name ref.Name, version string, d digest.Digest, err error) string {
	return fmt.Sprintf("murmur.lock pins %s@%s to %s, but %v: the lock was changed to call that blob another version; restore murmur.lock from version control, or pin what the stores serve as %s@%s with 'mur pull --update %s@%s'",
		name, version, d, err, name, version, name, version)
}

// cachedLabel holds the blob d the CAS already holds to the label the pull takes it for (got's
// descriptor), as a download is held: a murmur.lock edited to call a blob another version is
// refused by a warm pull as by a pull on a fresh home, before anything changes.
func cachedLabel(ctx context.Context, c *cas.Store, name ref.Name, got *fetched) error {
	d, version := got.desc.Digest, got.desc.Version
	a, blob, err := artifact.OpenBlob(c.ReaderAt(ctx, d))
	if err != nil {
		return errs.Wrap(err, errs.TokenOf(err), "%s@%s (%s, in the CAS): %s", name, version, d, errs.Message(err))
	}
	blob.Close()
	err = PackedAs(a, name, version)
	switch {
	case err == nil:
		return nil
	case got.desc.Origin == originPin:
		return errs.New(errs.LockConflict, "%s; nothing was changed", MislabeledPin(name, version, d, err))
	}
	return errs.New(errs.Integrity, "%s named %s@%s as %s, which the CAS holds, but %v; nothing was written; report it to the publisher", originOf(got), name, version, d, err)
}

// originPin is the origin of a pull's descriptor that murmur.lock's pin gave, for a blob the CAS
// holds.
const originPin = "cas"

// originOf names where a descriptor came from in a message.
func originOf(got *fetched) string {
	if got.desc.Origin == "" {
		return "the version list cached for offline use"
	}
	return got.desc.Origin
}
