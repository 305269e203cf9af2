package store

import (
	"context"
	"io"
	"os"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// FileStore is a Store of one packed file on disk, so that `mur pull ./x.mur.zip` goes through
// the same checks, ingest, lock and staging as any other pull. Its artifact's scope is local.
type FileStore struct {
	path string
	desc Descriptor
}

// OpenFile reads the packed manifest of path and hashes the file.
func OpenFile(path string) (*FileStore, error) {
	a, c, err := artifact.Open(path)
	if err != nil {
		return nil, err
	}
	c.Close()
	d, n, err := artifact.HashFile(path)
	if err != nil {
		return nil, err
	}
	return &FileStore{path: path, desc: Descriptor{
		Name:     ref.Name{Scope: ref.ScopeLocal, Name: a.Manifest.Name},
		Version:  a.Manifest.Version,
		Platform: ref.PlatformAny,
		Digest:   d,
		Size:     n,
		Origin:   "file:" + path,
	}}, nil
}

// Descriptor is the file's artifact.
func (s *FileStore) Descriptor() Descriptor { return s.desc }

func (s *FileStore) String() string { return s.desc.Origin }

// Resolve answers only for the file's own name and version.
func (s *FileStore) Resolve(ctx context.Context, name ref.Name, version, platform string) (Descriptor, error) {
	if name != s.desc.Name || (version != ref.Latest && version != s.desc.Version) {
		return Descriptor{}, errs.New(errs.NotFound, "%s holds %s@%s, not %s@%s", s.path, s.desc.Name, s.desc.Version, name, version)
	}
	return s.desc, nil
}

// Open opens the file when d is the digest OpenFile hashed. It does not hash the file again: the
// pull hashes what it reads, so a file that changed since is refused there.
func (s *FileStore) Open(ctx context.Context, name ref.Name, d digest.Digest) (io.ReadCloser, error) {
	if d != s.desc.Digest {
		return nil, errs.New(errs.NotFound, "%s has digest %s, not %s", s.path, s.desc.Digest, d)
	}
	f, err := os.Open(s.path)
	if err != nil {
		return nil, errs.Wrap(err, errs.NotFound, "can't read %s: %v", s.path, err)
	}
	return f, nil
}

// Push is refused: a file reference is read, never written.
func (s *FileStore) Push(ctx context.Context, desc Descriptor, payload io.Reader) error {
	return errs.New(errs.Usage, "%s is a file, not a store; push to an oci:// or oci-layout: store", s.path)
}
