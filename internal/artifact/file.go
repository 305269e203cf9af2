package artifact

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
)

// FileName is a packed artifact's conventional file name: the default output of `mur pack`, the
// OCI title annotation of a pushed layer and the asset name an index suggests.
func FileName(name, version string) string { return name + "-" + version + ".mur.zip" }

// HashFile is the identity of the packed file at path: the SHA-256 of the whole file and its size.
func HashFile(path string) (digest.Digest, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", 0, errs.Wrap(err, errs.NotFound, "packed artifact %s does not exist; check the path, or build it with 'mur pack'", path)
		}
		return "", 0, errs.Wrap(err, errs.IO, "can't read %s: %v", path, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, errs.Wrap(err, errs.IO, "can't read %s: %v", path, err)
	}
	return digest.NewDigestFromBytes(digest.SHA256, h.Sum(nil)), n, nil
}

// Packed describes a file PackFile wrote.
type Packed struct {
	Manifest Manifest
	File     string
	Digest   digest.Digest
	Size     int64
}

// PackFile packs dir into output atomically (PackWith, with opt), hashing the bytes as they are
// written. An empty output means FileName(name, version) in the current folder. A failure leaves
// no file behind.
func PackFile(dir, output string, opt PackOptions) (Packed, error) {
	if _, err := ParseCompression(string(opt.Compression)); err != nil {
		return Packed{}, err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Packed{}, errs.Wrap(err, errs.NotFound, "folder %s does not exist; give the folder that holds murmur.yaml and the wasm payload", dir)
		}
		return Packed{}, errs.Wrap(err, errs.IO, "can't read folder %s: %v", dir, err)
	}
	if !fi.IsDir() {
		return Packed{}, errs.New(errs.Usage, "%s is not a folder; give the folder that holds murmur.yaml and the wasm payload", dir)
	}
	var want *Manifest
	if output == "" {
		data, err := readPackManifest(filepath.Join(dir, ManifestName))
		if err != nil {
			return Packed{}, err
		}
		m, err := ParseManifest(data)
		if err != nil {
			return Packed{}, errs.Wrap(err, errs.TokenOf(err), "%s: %s", dir, errs.Message(err))
		}
		want = &m
		output = FileName(m.Name, m.Version)
	}
	if st, err := os.Stat(output); err == nil && st.IsDir() {
		return Packed{}, errs.New(errs.Usage, "output %s is a folder; give a file name such as %s", output, filepath.Join(output, FileName("name", "1.0.0")))
	}
	f, err := atomicfile.Create("", output, 0o644)
	if err != nil {
		return Packed{}, errs.Wrap(err, errs.IO, "can't create %s: %v; check that its folder exists and is writable", output, err)
	}
	defer f.Abort()
	h := sha256.New()
	counter := &countingWriter{w: io.MultiWriter(f, h)}
	bw := bufio.NewWriterSize(counter, 256<<10)
	m, err := PackWith(dir, bw, opt)
	if err != nil {
		return Packed{}, err
	}
	if want != nil && (m.Name != want.Name || m.Version != want.Version) {
		return Packed{}, errs.New(errs.IO, "%s changed while it was packed (%s %s, then %s %s); pack again", filepath.Join(dir, ManifestName), want.Name, want.Version, m.Name, m.Version)
	}
	if err := bw.Flush(); err != nil {
		return Packed{}, errs.Wrap(err, errs.IO, "can't write %s: %v", output, err)
	}
	if err := f.Commit(); err != nil {
		return Packed{}, errs.Wrap(err, errs.IO, "can't write %s: %v", output, err)
	}
	return Packed{Manifest: m, File: output, Digest: digest.NewDigestFromBytes(digest.SHA256, h.Sum(nil)), Size: counter.n}, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
