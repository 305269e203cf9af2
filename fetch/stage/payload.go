package stage

import (
	"context"
	"hash"
	"hash/crc32"
	"io"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
)

// openPacked opens the packed artifact d in the CAS (artifact.OpenBlob, the one way): the blob,
// and its directory and manifest read from it. The caller closes the blob. The blob is not
// re-hashed here: it was verified when it was committed, and `mur run` verifies it again before
// running it.
func OpenPacked(ctx context.Context, store *cas.Store, d digest.Digest) (*artifact.Archive, cas.ReaderAt, error) {
	return artifact.OpenBlob(store.ReaderAt(ctx, d))
}

// ReadBlob reads a packed artifact back from the CAS (OpenPacked): its directory and manifest,
// and with inflate the payload too, unless it is a component (which mur never runs and so never
// compiles). The payload is mapped from a file on the CAS's disk (artifact.MapPayload), not held
// on the heap: a precompile of a payload of hundreds of MiB costs the process no more memory
// than the kernel can drop. release unmaps it; call it once done with the bytes, even when
// there are none. Once ctx has ended it leaves the mapping to the process's end: a compile that
// ctx cut short may still be reading the bytes (the command returns without waiting for it).
func ReadBlob(ctx context.Context, store *cas.Store, d digest.Digest, inflate bool) (a *artifact.Archive, wasm []byte, release func(), err error) {
	release = func() {}
	a, blob, err := OpenPacked(ctx, store, d)
	if err != nil {
		return nil, nil, release, err
	}
	defer blob.Close()
	if !inflate || a.Component {
		return a, nil, release, nil
	}
	wasm, unmap, err := a.MapPayload(store.TempDir())
	if err != nil {
		return a, nil, release, err
	}
	return a, wasm, func() {
		if ctx.Err() == nil {
			unmap()
		}
	}, nil
}

// checkPayload streams the payload of a to its end, so that everything the zip says of it holds
// before the blob becomes visible: it decompresses (for a deflate or zstd entry) without passing
// the decompression ceiling or its declared size, and has the size and CRC-32 the zip records. A
// zip's reader checks a CRC only when the entry declares a nonzero one and only for what is
// read through it; this check makes no exception. key, when not nil, is fed the payload.
func CheckPayload(a *artifact.Archive, key hash.Hash) error {
	rc, err := a.OpenPayload()
	if err != nil {
		return err
	}
	defer rc.Close()
	h := crc32.NewIEEE()
	var w io.Writer = h
	if key != nil {
		w = io.MultiWriter(h, key)
	}
	n, err := io.Copy(w, rc)
	if err != nil {
		return err
	}
	return payloadMatches(a, n, crcString(h.Sum32()))
}

// payloadMatches holds a payload that was read (size bytes, checksum crc) to what the zip
// records for it.
func payloadMatches(a *artifact.Archive, size int64, crc string) error {
	if size != a.PayloadSize {
		return errs.New(errs.InvalidArtifact, "the payload %q is %d bytes, but the zip records %d; the artifact is damaged, %s", a.PayloadName, size, a.PayloadSize, reportIt)
	}
	if want := crcString(a.PayloadCRC32()); crc != want {
		return errs.New(errs.InvalidArtifact, "the payload %q has checksum %s, but the zip records %s; the artifact is damaged, %s", a.PayloadName, crc, want, reportIt)
	}
	return nil
}

const reportIt = "so it can't be installed; report it to its publisher"
