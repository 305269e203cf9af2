package provenance

import (
	"context"
	"crypto/sha512"
	"io"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/errs"
)

// MaxBundleSize bounds what mur reads as one Sigstore bundle: real ones are a few KB, and a
// bundle is read whole into memory to be checked.
const MaxBundleSize = 4 << 20

// ReadBundle reads the bundle kept in the CAS as blob d, verified against its digest, and refuses
// one over MaxBundleSize without reading it.
func ReadBundle(ctx context.Context, store *cas.Store, d digest.Digest) ([]byte, error) {
	if d.Validate() != nil {
		return nil, errs.New(errs.InvalidLock, "%q is not a digest", d)
	}
	// Sized before it is hashed: a verified read maps and hashes the whole blob, and whatever
	// murmur.lock names as a bundle may be any blob of the CAS, a payload of gigabytes included.
	sized, err := store.ReaderAt(ctx, d)
	if err != nil {
		return nil, err
	}
	size := sized.Size()
	sized.Close()
	if size > MaxBundleSize {
		return nil, oversized(d, size)
	}
	r, err := store.VerifiedReaderAt(ctx, d)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if r.Size() > MaxBundleSize {
		return nil, oversized(d, r.Size())
	}
	return io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
}

func oversized(d digest.Digest, size int64) error {
	return errs.New(errs.ProvenanceUnverifiable, "blob %s is %d bytes, over the %d a bundle may have, so it is not a bundle mur kept; check what names it as a bundle (murmur.lock's provenance bundle:)", d, size, MaxBundleSize)
}

// SHA512Of is the SHA-512 of blob d: GitHub attestations name their subject by it as well as by
// SHA-256, and a bundle is checked against both.
func SHA512Of(ctx context.Context, store *cas.Store, d digest.Digest) ([]byte, error) {
	r, err := store.ReaderAt(ctx, d)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	h := sha512.New()
	if _, err := io.Copy(h, io.NewSectionReader(r, 0, r.Size())); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// RecordedBundles are the bundles the CAS's pull records verified for d, read back from the CAS:
// what `mur push` and the write-through mirror copy with the artifact, and what a pull of a blob
// the CAS holds re-verifies offline, so that murmur.lock records the same provenance whether or
// not the cache was warm.
func RecordedBundles(ctx context.Context, store *cas.Store, d digest.Digest) [][]byte {
	recs, err := store.Records(d)
	if err != nil {
		return nil
	}
	seen := map[digest.Digest]bool{}
	var out [][]byte
	for _, r := range recs {
		if r.Provenance == nil || seen[r.Provenance.Bundle] {
			continue
		}
		seen[r.Provenance.Bundle] = true
		if b, err := ReadBundle(ctx, store, r.Provenance.Bundle); err == nil {
			out = append(out, b)
		}
	}
	return out
}
