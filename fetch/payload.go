package fetch

import (
	"context"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact"
)

// readBlob is the one way the fetch verbs read a packed artifact back from the CAS: its directory
// and manifest, and with inflate the payload too, unless it is a component (which mur never runs
// and so never compiles). The blob is not re-hashed here: it was verified when it was committed,
// and `mur run` verifies it again before running it.
func readBlob(ctx context.Context, store *cas.Store, d digest.Digest, inflate bool) (*artifact.Archive, []byte, error) {
	blob, err := store.ReaderAt(ctx, d)
	if err != nil {
		return nil, nil, err
	}
	defer blob.Close()
	a, err := artifact.Read(blob, blob.Size())
	if err != nil || !inflate || a.Component {
		return a, nil, err
	}
	wasm, err := a.ReadPayload()
	return a, wasm, err
}
