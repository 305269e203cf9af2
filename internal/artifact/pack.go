package artifact

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zip"
	"github.com/klauspost/compress/zstd"

	"github.com/murmur-nexus/mur/internal/errs"
)

// runtimes lists the runtime values Pack accepts. Read accepts any string, so that an older mur
// can still pull an artifact of a runtime it does not know.
var runtimes = []string{"tool", "driver", "hook", "skill", "capsule"}

// packLevel is fixed, because the compressed bytes, and so the artifact's digest, depend on it.
const packLevel = 6

// Compression is how Pack compresses the payload.
type Compression string

const (
	// Deflate is the default: every zip reader there is opens it.
	Deflate Compression = "deflate"
	// Zstd packs the payload with zstd (zip method 93): smaller, and faster to read back, but
	// only some zip tools open it (Info-ZIP's unzip 6.0 and Python's zipfile do not).
	Zstd Compression = "zstd"
)

// ParseCompression reads the value of `mur pack --compression`; "" is Deflate.
func ParseCompression(s string) (Compression, error) {
	switch c := Compression(strings.ToLower(strings.TrimSpace(s))); c {
	case "", Deflate:
		return Deflate, nil
	case Zstd:
		return c, nil
	}
	return "", errs.New(errs.Usage, "--compression is %q; use deflate (the default, which every unzip opens) or zstd (smaller and faster to read, but not every zip tool opens it)", s)
}

// zstdPackOptions are fixed, as packLevel is. The best level costs the publisher about 0.4 s on
// a 2.5 MB Go payload, once, and packs it 7% smaller than the next level down (12% smaller than
// deflate), for every download; decoding is as fast whatever the level. One goroutine, because the
// output of concurrent encoding is not promised to be the same from run to run. The window is
// the one readers decode with (ZstdMaxWindow); the encoder narrows it to the payload's size.
func zstdPackOptions() []zstd.EOption {
	return []zstd.EOption{
		zstd.WithEncoderLevel(zstd.SpeedBestCompression),
		zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(ZstdMaxWindow),
		zstd.WithEncoderCRC(true),
	}
}

// PackOptions are the choices of `mur pack`.
type PackOptions struct {
	// Compression of the payload; "" is Deflate. murmur.yaml is deflated whatever this says: it
	// is a few hundred bytes that zstd would not shrink further, and a deflated manifest can
	// be read with any zip tool, even from an artifact whose payload that tool can't open.
	Compression Compression
}

// The zip epoch, 1980-01-01 00:00, in MS-DOS date and time fields.
const (
	dosEpochDate = 1<<5 | 1
	dosEpochTime = 0
)

// Pack writes the packed artifact of dir to w: dir's murmur.yaml and its payload (capsule.wasm,
// or else the one root-level *.wasm), nothing else. It checks everything Read checks before it
// writes a byte, and a few things more (the payload is a wasm binary, runtime is a known one).
// On error, w may hold a partial zip; callers write to a temporary file.
func Pack(dir string, w io.Writer) (Manifest, error) { return PackWith(dir, w, PackOptions{}) }

// PackWith is Pack with options.
func PackWith(dir string, w io.Writer, opt PackOptions) (Manifest, error) {
	compression, err := ParseCompression(string(opt.Compression))
	if err != nil {
		return Manifest{}, err
	}
	limit, err := MaxDecompressed()
	if err != nil {
		return Manifest{}, err
	}
	data, err := readPackManifest(filepath.Join(dir, ManifestName))
	if err != nil {
		return Manifest{}, err
	}
	m, err := ParseManifest(data)
	if err != nil {
		return Manifest{}, errs.Wrap(err, errs.InvalidArtifact, "%s: %s", dir, errs.Message(err))
	}
	if m.Runtime != "" && !contains(runtimes, m.Runtime) {
		return Manifest{}, invalid("%s: runtime %q is not one of %s; fix runtime in %s", filepath.Join(dir, ManifestName), m.Runtime, strings.Join(runtimes, ", "), ManifestName)
	}
	payloadName, err := findPayload(dir)
	if err != nil {
		return Manifest{}, err
	}
	if _, err := checkName(payloadName); err != nil {
		return Manifest{}, errs.Wrap(err, errs.InvalidArtifact, "%s: the payload's file name %q can't be packed: %s; rename it to %s", dir, payloadName, errs.Message(err), PreferredPayload)
	}
	payloadPath := filepath.Join(dir, payloadName)
	f, err := os.Open(payloadPath)
	if err != nil {
		return Manifest{}, errs.Wrap(err, errs.IO, "can't open the payload %s: %v", payloadPath, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Manifest{}, errs.Wrap(err, errs.IO, "can't stat the payload %s: %v", payloadPath, err)
	}
	if fi.Size() > limit {
		return Manifest{}, invalid("the payload %s is %d bytes, over the ceiling of %d bytes that readers enforce; raise %s if it is genuine", payloadPath, fi.Size(), limit, EnvMaxDecompressed)
	}
	var head [8]byte
	n, err := io.ReadFull(f, head[:])
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return Manifest{}, errs.Wrap(err, errs.IO, "can't read the payload %s: %v", payloadPath, err)
	}
	if !isWasm(head[:n]) {
		return Manifest{}, invalid("the payload %s is not a WebAssembly binary (it does not start with \\0asm); build it with a wasm target such as GOOS=wasip1 GOARCH=wasm", payloadPath)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Manifest{}, errs.Wrap(err, errs.IO, "can't read the payload %s: %v", payloadPath, err)
	}

	zw := zip.NewWriter(w)
	zw.RegisterCompressor(zip.Deflate, newPackFlate)
	mw, err := zw.CreateHeader(fixedHeader(ManifestName))
	if err != nil {
		return Manifest{}, writeErr(err)
	}
	if _, err := mw.Write(data); err != nil {
		return Manifest{}, writeErr(err)
	}
	ph := fixedHeader(payloadName)
	if compression == Zstd {
		ph.Method = MethodZstd
		size := fi.Size()
		zw.RegisterCompressor(MethodZstd, func(out io.Writer) (io.WriteCloser, error) {
			return newPackZstd(out, size)
		})
	}
	pw, err := zw.CreateHeader(ph)
	if err != nil {
		return Manifest{}, writeErr(err)
	}
	copied, err := io.Copy(pw, io.LimitReader(f, limit+1))
	if err != nil {
		return Manifest{}, writeErr(err)
	}
	if copied != fi.Size() {
		return Manifest{}, errs.New(errs.IO, "the payload %s changed while it was packed (%d bytes, then %d); pack again once it is built", payloadPath, fi.Size(), copied)
	}
	if err := zw.Close(); err != nil {
		return Manifest{}, writeErr(err)
	}
	return m, nil
}

// Compressors are kept for the next pack, as archive/zip keeps its flate writers: setting one up
// costs more than packing a small payload (a best-level zstd encoder's tables are megabytes), and
// a publisher's index, or a test suite, packs many. Reset makes a kept one what a new one would
// be, so the bytes, and the artifact's digest, are the same.
var (
	packFlates sync.Pool // *flate.Writer at packLevel
	packZstds  sync.Pool // *zstd.Encoder with zstdPackOptions
)

type pooledFlate struct{ *flate.Writer }

func newPackFlate(out io.Writer) (io.WriteCloser, error) {
	if fw, ok := packFlates.Get().(*flate.Writer); ok {
		fw.Reset(out)
		return pooledFlate{fw}, nil
	}
	fw, err := flate.NewWriter(out, packLevel)
	if err != nil {
		return nil, err
	}
	return pooledFlate{fw}, nil
}

func (p pooledFlate) Close() error {
	err := p.Writer.Close()
	p.Writer.Reset(io.Discard) // holds no reference to the artifact's writer while kept
	packFlates.Put(p.Writer)
	return err
}

type pooledZstd struct{ *zstd.Encoder }

func newPackZstd(out io.Writer, size int64) (io.WriteCloser, error) {
	enc, ok := packZstds.Get().(*zstd.Encoder)
	if !ok {
		var err error
		if enc, err = zstd.NewWriter(nil, zstdPackOptions()...); err != nil {
			return nil, err
		}
	}
	// The frame then records the payload's size, and its window shrinks to fit it: a reader
	// decodes a small payload with a small buffer. A payload that changes size while it is
	// packed fails Close, as the size check in PackWith would.
	enc.ResetContentSize(out, size)
	return pooledZstd{enc}, nil
}

func (p pooledZstd) Close() error {
	err := p.Encoder.Close()
	p.Encoder.Reset(nil)
	packZstds.Put(p.Encoder)
	return err
}

func writeErr(err error) error {
	return errs.Wrap(err, errs.IO, "can't write the packed artifact: %v", err)
}

// fixedHeader leaves Modified zero so that no extended-timestamp field is written, and sets the
// MS-DOS fields to the zip epoch instead.
func fixedHeader(name string) *zip.FileHeader {
	h := &zip.FileHeader{Name: name, Method: zip.Deflate, ModifiedDate: dosEpochDate, ModifiedTime: dosEpochTime}
	h.SetMode(0o644)
	return h
}

func readPackManifest(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errs.Wrap(err, errs.InvalidArtifact, "%s does not exist; a packed artifact needs a murmur.yaml with name and version beside its wasm payload", p)
		}
		return nil, errs.Wrap(err, errs.IO, "can't open %s: %v", p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, errs.Wrap(err, errs.IO, "can't stat %s: %v", p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, invalid("%s is not a regular file", p)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxManifestBytes+1))
	if err != nil {
		return nil, errs.Wrap(err, errs.IO, "can't read %s: %v", p, err)
	}
	if len(data) > MaxManifestBytes {
		return nil, invalid("%s is over the limit of %d bytes; keep it to the fields mur reads", p, MaxManifestBytes)
	}
	return data, nil
}

// findPayload applies the payload rule to a folder. Symlinks are followed: a link to a build
// output is packed as the file it points at.
func findPayload(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", errs.Wrap(err, errs.NotFound, "folder %s does not exist; give the folder that holds murmur.yaml and the wasm payload", dir)
		}
		return "", errs.Wrap(err, errs.IO, "can't list %s: %v", dir, err)
	}
	var found []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".wasm") {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if e.Name() == PreferredPayload {
			return PreferredPayload, nil
		}
		found = append(found, e.Name())
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", invalid("%s has no wasm payload: expected %s or exactly one *.wasm beside murmur.yaml", dir, PreferredPayload)
	}
	sort.Strings(found)
	return "", invalid("%s has %d wasm files (%s) and no %s; rename the payload to %s or keep only one", dir, len(found), quoteAll(found), PreferredPayload, PreferredPayload)
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
