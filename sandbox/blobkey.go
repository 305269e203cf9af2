package sandbox

import (
	"encoding/hex"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/safefile"
)

// Blob keys. A pull learns the compiled cache's key of a payload (wazero's module ID: the
// SHA-256 of the wasm, then a flag) by hashing the payload as it streams. The key is remembered
// by the blob's digest, beside the kept payloads, so that the next pull of the same blob into an
// empty CAS (a CI job, a new project) or `mur ls` asks the compiled cache without hashing the
// payload again: 20 payloads of 2.6 MB cost about 50 ms of CPU to hash.
//
// A remembered key is a hint, never trusted with code: wazero names the module it loads from the
// bytes it is given, so a wrong key can only make a pull skip a precompile (the run compiles
// instead) or precompile again. It lives in the compiled cache, whose folder is checked as the
// compiled code's is, and goes with its blob (PrunePayloads, Evict).

const blobKeySuffix = ".key"

func blobKeyPath(cacheDir string, d digest.Digest) string {
	return filepath.Join(PayloadDir(cacheDir), d.Encoded()+blobKeySuffix)
}

// BlobKey returns the key remembered for the payload of blob d, if there is a whole one.
func (r *Runner) BlobKey(d digest.Digest) ([]byte, bool) {
	if r.entryDir == "" || d.Validate() != nil {
		return nil, false
	}
	// safefile: no symlink is followed, and a FIFO planted there is refused, not waited on.
	b, err := safefile.ReadFile(blobKeyPath(r.opt.CacheDir, d), 2*keySize)
	if err != nil || len(b) != 2*keySize {
		return nil, false // torn, or not a key
	}
	key, err := hex.DecodeString(string(b))
	if err != nil {
		return nil, false
	}
	return key, true
}

// keySize is the size of a module key (a SHA-256).
const keySize = 32

// RememberBlobKey records key as the key of blob d's payload. It is written in place, without a
// temporary file or an fsync: a torn or lost one is only a key to compute again.
func (r *Runner) RememberBlobKey(d digest.Digest, key []byte) {
	if r.entryDir == "" || len(key) != keySize || d.Validate() != nil {
		return
	}
	if err := os.MkdirAll(PayloadDir(r.opt.CacheDir), 0o700); err != nil {
		return
	}
	f, err := safefile.Open(blobKeyPath(r.opt.CacheDir, d), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return
	}
	f.WriteString(hex.EncodeToString(key))
	f.Close()
}
