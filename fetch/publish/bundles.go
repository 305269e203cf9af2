package publish

import (
	"context"
	"crypto/sha512"
	"io"
	"os"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/provenance"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
)

// attachBundles puts its bundles and extra beside it in dst, when dst can hold them. A store
// that can't (a file store) is skipped: it has nowhere to put them.
func attachBundles(ctx context.Context, dst fstore.Store, it Item, extra [][]byte) error {
	all := append(append([][]byte{}, it.Bundles...), extra...)
	if len(all) == 0 {
		return nil
	}
	at, ok := dst.(fstore.BundleAttacher)
	if !ok {
		return nil
	}
	seen := map[digest.Digest]bool{}
	for _, b := range all {
		if seen[digest.FromBytes(b)] {
			continue
		}
		seen[digest.FromBytes(b)] = true
		if err := at.AttachBundle(ctx, it.Desc.Name, it.Desc.Version, it.Desc.Digest, b); err != nil {
			next := "; push again"
			if errs.TokenOf(err) == errs.Denied {
				next = "" // pushing again meets the same refusal; the message says what to do
			}
			return errs.Wrap(err, errs.TokenOf(err), "%s@%s is in %s, but its provenance bundle was not attached: %s%s", it.Desc.Name, it.Desc.Version, dst, errs.Message(err), next)
		}
	}
	return nil
}

// Sign signs the item with keyPEM (ECDSA P-256 or Ed25519) through signer and adds the keyed
// bundle to the item, to be attached when it is published. It returns the key's hint, the name
// trusted_keys gives it.
func Sign(ctx context.Context, signer provenance.Signer, it *Item, keyPEM []byte) (string, error) {
	// Ed25519 signs a SHA-512 of the zip (Ed25519ph); the key's type is the helper's to read,
	// so the digest is computed either way: one more pass over a file being pushed anyway.
	h := sha512.New()
	var r io.Reader
	if it.CAS != nil {
		blob, err := it.CAS.ReaderAt(ctx, it.Desc.Digest)
		if err != nil {
			return "", err
		}
		defer blob.Close()
		r = io.NewSectionReader(blob, 0, blob.Size())
	} else {
		f, err := os.Open(it.File)
		if err != nil {
			return "", errs.Wrap(err, errs.IO, "can't read %s: %v", it.File, err)
		}
		defer f.Close()
		r = f
	}
	if _, err := io.Copy(h, r); err != nil {
		return "", errs.Wrap(err, errs.IO, "reading %s@%s to sign it: %v", it.Desc.Name, it.Desc.Version, err)
	}
	b, hint, err := signer.Sign(ctx, keyPEM, it.Desc.Digest, h.Sum(nil))
	if err != nil {
		return "", err
	}
	it.Bundles = append(it.Bundles, b)
	return hint, nil
}
