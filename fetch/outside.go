package fetch

import (
	"context"
	"io"
	"path/filepath"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// WriteZip copies the blob d out of the CAS into dir as file (oras pull -o): the .mur.zip itself,
// byte for byte, written atomically. It returns the file's path.
func WriteZip(ctx context.Context, store *cas.Store, d digest.Digest, dir, file string) (string, error) {
	if file == "" || filepath.Base(file) != file {
		return "", errs.New(errs.Usage, "can't write %q into %s: not a plain file name", file, dir)
	}
	r, err := store.ReaderAt(ctx, d)
	if err != nil {
		return "", err
	}
	defer r.Close()
	path := filepath.Join(dir, file)
	f, err := atomicfile.Create(dir, path, 0o644)
	if err != nil {
		return "", errs.Wrap(err, errs.IO, "can't write into %s: %v", dir, err)
	}
	defer f.Abort()
	h := digest.SHA256.Digester()
	if _, err := io.Copy(io.MultiWriter(f, h.Hash()), io.NewSectionReader(r, 0, r.Size())); err != nil {
		return "", errs.Wrap(err, errs.IO, "copying %s to %s: %v", d, path, err)
	}
	if h.Digest() != d {
		return "", errs.New(errs.Integrity, "the CAS blob %s no longer hashes to its name, so %s was not written; run 'mur cache verify'", d, path)
	}
	if err := f.Commit(); err != nil {
		return "", errs.Wrap(err, errs.IO, "can't write %s: %v", path, err)
	}
	return path, nil
}

// ZipName is the file name `mur pull -o` gives a payload, as oras names a layer by its title:
// name-version.mur.zip, with the platform for a platform-specific payload.
func ZipName(name ref.Name, version, platform string) string {
	if platform == "" || platform == ref.PlatformAny {
		return name.Name + "-" + version + ".mur.zip"
	}
	return name.Name + "-" + version + "-" + platform + ".mur.zip"
}
