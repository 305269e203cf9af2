// Package artifact reads and writes packed artifacts, the `.mur.zip` files of SPEC section 2.
//
// Every packed artifact is hostile input until Read has accepted it. Read checks the whole
// central directory (names, types, duplicates, counts, declared sizes), parses murmur.yaml and
// locates the payload, but it never decompresses the payload: the payload is only streamed by
// OpenPayload, which enforces the decompression ceiling on the bytes it actually produces,
// because a zip header's declared size can lie. Entries other than murmur.yaml and the payload
// are checked by name and declared size only; mur never reads them.
//
// Pack is the publisher's side. Its output is byte-for-byte reproducible for a given build of
// mur: fixed entry order (murmur.yaml, then the payload), fixed timestamps (1980-01-01 00:00, the
// zip epoch), fixed modes (0644) and a fixed deflate level (or, with --compression zstd, fixed
// zstd settings). A different version of the compression library may compress differently, so
// reproducibility is promised per mur release.
package artifact

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/klauspost/compress/zip"
	"go.yaml.in/yaml/v3"

	"github.com/murmur-nexus/mur/internal/yamlnode"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// Limits of SPEC section 2.
const (
	// DefaultMaxDecompressed is the ceiling on any entry's decompressed size, unless
	// MURMUR_MAX_ARTIFACT_DECOMPRESSED_BYTES overrides it.
	DefaultMaxDecompressed = 500 << 20
	// MaxEntries is the most entries an archive may hold.
	MaxEntries = 10000
	// MaxManifestBytes is the largest murmur.yaml accepted.
	MaxManifestBytes = 1 << 20
)

// EnvMaxDecompressed names the environment variable that overrides DefaultMaxDecompressed.
const EnvMaxDecompressed = "MURMUR_MAX_ARTIFACT_DECOMPRESSED_BYTES"

// ManifestName is the packed manifest's entry name, and PreferredPayload the payload name that
// wins over any other root-level *.wasm.
const (
	ManifestName     = "murmur.yaml"
	PreferredPayload = "capsule.wasm"
)

// Manifest is the packed murmur.yaml. Its capabilities, and any other key, are ignored: a
// publisher grants itself nothing.
type Manifest struct {
	Name        string // the bare name: the name segment of the scoped name
	Version     string
	Runtime     string // tool, driver, hook, skill or capsule; may be empty
	Description string
}

// Archive is a packed artifact that Read has accepted.
type Archive struct {
	Manifest      Manifest
	ManifestBytes []byte // murmur.yaml exactly as packed
	PayloadName   string // the payload's entry name, e.g. capsule.wasm
	PayloadSize   int64  // uncompressed, as declared (and enforced while streaming)
	Component     bool   // the payload is a wasm component, not a core module

	payload *zip.File
	files   []*zip.File // every entry, for CheckStream
	size    int64       // of the packed file
	limit   int64
}

// MaxDecompressed is the decompression ceiling in force: DefaultMaxDecompressed, or the value of
// MURMUR_MAX_ARTIFACT_DECOMPRESSED_BYTES when it is set.
func MaxDecompressed() (int64, error) {
	v := strings.TrimSpace(os.Getenv(EnvMaxDecompressed))
	if v == "" {
		return DefaultMaxDecompressed, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, errs.New(errs.InvalidConfig, "%s is %q; expected a positive number of bytes such as %d, or unset it for the default", EnvMaxDecompressed, v, int64(DefaultMaxDecompressed))
	}
	return n, nil
}

// invalid is the error of every refusal: what is wrong, and what to do.
func invalid(format string, args ...any) error {
	return errs.New(errs.InvalidArtifact, format, args...)
}

const remedy = "ask its publisher for an artifact built with 'mur pack'"

// Read validates a packed artifact of the given size and locates its payload. It reads the
// central directory, murmur.yaml and the first bytes of the payload; memory use does not depend
// on the payload's size.
func Read(r io.ReaderAt, size int64) (*Archive, error) {
	limit, err := MaxDecompressed()
	if err != nil {
		return nil, err
	}
	if size < 0 {
		return nil, invalid("the packed artifact has a negative size %d", size)
	}
	zr, err := zip.NewReader(r, size)
	if errors.Is(err, zip.ErrInsecurePath) && zr != nil {
		// Only reported under GODEBUG=zipinsecurepath=0; checkEntry says which entry and why.
		err = nil
	}
	if err != nil {
		return nil, errs.Wrap(notZip{err}, errs.InvalidArtifact, "the packed artifact (%d bytes) is not a readable zip archive, or it is truncated (%v); download it again or %s", size, err, remedy)
	}
	// Per archive, not for the whole process: mur's zips read zstd, anyone else's reader is left
	// as it was.
	zr.RegisterDecompressor(MethodZstd, zstdDecompressor)
	if len(zr.File) > MaxEntries {
		return nil, invalid("the packed artifact holds %d entries, over the limit of %d; a packed artifact needs only murmur.yaml and its payload", len(zr.File), MaxEntries)
	}
	var (
		seen       = make(map[string]string, len(zr.File))
		manifest   *zip.File
		candidates []*zip.File
	)
	for _, f := range zr.File {
		clean, err := checkEntry(f, limit)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[clean]; dup {
			return nil, invalid("the packed artifact holds entry %q twice (as %q and %q); %s", clean, prev, f.Name, remedy)
		}
		seen[clean] = f.Name
		if isDir(f) {
			continue
		}
		if clean == ManifestName {
			manifest = f
		}
		if !strings.Contains(clean, "/") && strings.HasSuffix(clean, ".wasm") {
			candidates = append(candidates, f)
		}
	}
	if manifest == nil {
		return nil, invalid("the packed artifact has no %s at its root (found %s); %s", ManifestName, listNames(zr.File), remedy)
	}
	a := &Archive{limit: limit, files: zr.File, size: size}
	if a.ManifestBytes, err = readManifestEntry(manifest); err != nil {
		return nil, err
	}
	if a.Manifest, err = ParseManifest(a.ManifestBytes); err != nil {
		return nil, err
	}
	if a.payload, err = choosePayload(candidates, zr.File); err != nil {
		return nil, err
	}
	a.PayloadName = path.Clean(a.payload.Name)
	a.PayloadSize = int64(a.payload.UncompressedSize64)
	if m := a.payload.Method; !Readable(m) {
		return nil, invalid("the payload %q uses zip compression method %d; mur reads stored, deflated and zstd (method %d) entries only, so repack it with 'mur pack'", a.PayloadName, m, MethodZstd)
	}
	if err := a.sniff(); err != nil {
		return nil, err
	}
	return a, nil
}

// Open reads the packed artifact at path. The caller closes the returned Closer when done with
// the payload.
func Open(path string) (*Archive, io.Closer, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, errs.Wrap(err, errs.NotFound, "packed artifact %s does not exist; check the path, or build it with 'mur pack'", path)
		}
		return nil, nil, errs.Wrap(err, errs.IO, "can't open packed artifact %s: %v", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, errs.Wrap(err, errs.IO, "can't stat packed artifact %s: %v", path, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, invalid("%s is not a regular file; expected a .mur.zip built with 'mur pack'", path)
	}
	a, err := Read(f, fi.Size())
	if err != nil {
		f.Close()
		var e *errs.Error
		if errors.As(err, &e) {
			return nil, nil, &errs.Error{Token: e.Token, Msg: path + ": " + e.Msg, Err: e.Err}
		}
		return nil, nil, err
	}
	return a, f, nil
}

// checkEntry refuses hostile entries and returns the entry's cleaned name.
func checkEntry(f *zip.File, limit int64) (string, error) {
	name := f.Name
	clean, err := checkName(name)
	if err != nil {
		return "", err
	}
	// Mode reads the type bits only for Unix creators; a hostile archive may set them with any
	// creator byte, so the raw bits are checked as well.
	const sIFMT, sIFREG, sIFDIR, sIFLNK = 0xf000, 0x8000, 0x4000, 0xa000
	raw := (f.ExternalAttrs >> 16) & sIFMT
	typ := f.Mode().Type()
	if typ&fs.ModeSymlink != 0 || raw == sIFLNK {
		return "", invalid("the packed artifact holds symlink entry %q; symlinks are refused, so %s", name, remedy)
	}
	if typ&^fs.ModeDir != 0 || (raw != 0 && raw != sIFREG && raw != sIFDIR) {
		return "", invalid("the packed artifact holds entry %q that is neither a file nor a folder (mode %v); %s", name, typ, remedy)
	}
	if f.UncompressedSize64 > uint64(limit) {
		return "", invalid("entry %q of the packed artifact declares %d bytes decompressed, over the ceiling of %d bytes; raise %s if it is genuine", name, f.UncompressedSize64, limit, EnvMaxDecompressed)
	}
	return clean, nil
}

// checkName refuses entry names that could land outside the folder they are extracted to, on
// any operating system, and returns the cleaned name.
func checkName(name string) (string, error) {
	switch {
	case name == "":
		return "", invalid("the packed artifact holds an entry with an empty name; %s", remedy)
	case !utf8.ValidString(name):
		return "", invalid("the packed artifact holds entry %q whose name is not UTF-8; %s", name, remedy)
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "", invalid("the packed artifact holds entry %q whose name has control characters; %s", name, remedy)
	case strings.Contains(name, `\`):
		return "", invalid("the packed artifact holds entry %q with a backslash; zip names use '/', so %s", name, remedy)
	case strings.HasPrefix(name, "/"):
		return "", invalid("the packed artifact holds entry %q with an absolute name; entries must be relative, so %s", name, remedy)
	case len(name) >= 2 && name[1] == ':' && (name[0]|0x20 >= 'a' && name[0]|0x20 <= 'z'):
		return "", invalid("the packed artifact holds entry %q with a drive letter; entries must be relative, so %s", name, remedy)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == ".." {
			return "", invalid("the packed artifact holds entry %q that climbs out with '..'; %s", name, remedy)
		}
	}
	clean := path.Clean(name)
	if clean == "." {
		return "", invalid("the packed artifact holds entry %q that names its root; %s", name, remedy)
	}
	return clean, nil
}

func isDir(f *zip.File) bool { return strings.HasSuffix(f.Name, "/") || f.Mode().IsDir() }

// listNames names a few entries for an error message.
func listNames(files []*zip.File) string {
	if len(files) == 0 {
		return "no entries"
	}
	var names []string
	for i, f := range files {
		if i == 5 {
			names = append(names, fmt.Sprintf("and %d more", len(files)-5))
			break
		}
		names = append(names, strconv.Quote(f.Name))
	}
	return strings.Join(names, ", ")
}

func readManifestEntry(f *zip.File) ([]byte, error) {
	if f.UncompressedSize64 > MaxManifestBytes {
		return nil, invalid("%s of the packed artifact is %d bytes, over the limit of %d; keep it to the fields mur reads", ManifestName, f.UncompressedSize64, MaxManifestBytes)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, errs.Wrap(err, errs.InvalidArtifact, "%s of the packed artifact can't be opened (%v); %s", ManifestName, err, remedy)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, MaxManifestBytes+1))
	if err != nil {
		return nil, errs.Wrap(err, errs.InvalidArtifact, "%s of the packed artifact is damaged (%v); download it again or %s", ManifestName, err, remedy)
	}
	if len(data) > MaxManifestBytes {
		return nil, invalid("%s of the packed artifact is over the limit of %d bytes; keep it to the fields mur reads", ManifestName, MaxManifestBytes)
	}
	return data, nil
}

func choosePayload(candidates, all []*zip.File) (*zip.File, error) {
	for _, f := range candidates {
		if path.Clean(f.Name) == PreferredPayload {
			return f, nil
		}
	}
	switch len(candidates) {
	case 1:
		return candidates[0], nil
	case 0:
		return nil, invalid("the packed artifact has no wasm payload: expected %s or exactly one *.wasm at its root, found %s; %s", PreferredPayload, listNames(all), remedy)
	}
	var names []string
	for _, f := range candidates {
		names = append(names, strconv.Quote(f.Name))
	}
	sort.Strings(names)
	return nil, invalid("the packed artifact has %d wasm payloads at its root (%s) and no %s; name the payload %s or keep only one", len(candidates), strings.Join(names, ", "), PreferredPayload, PreferredPayload)
}

// sniff reads the payload's preamble to tell a component from a core module.
func (a *Archive) sniff() error {
	rc, err := a.openPayload() // eight bytes: not an entry read entryReads counts
	if err != nil {
		return err
	}
	defer rc.Close()
	var head [8]byte
	n, err := io.ReadFull(rc, head[:])
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return err
	}
	a.Component = IsComponent(head[:n])
	return nil
}

// OpenPayload streams the payload, decompressed (inflated, or zstd-decoded). A read fails with
// invalid-artifact as soon as the stream passes the decompression ceiling or its declared size,
// at bad compressed data, or at the end when its CRC-32 does not match.
func (a *Archive) OpenPayload() (io.ReadCloser, error) {
	entryReads.Add(1)
	return a.openPayload()
}

func (a *Archive) openPayload() (io.ReadCloser, error) {
	rc, err := a.payload.Open()
	if err != nil {
		return nil, errs.Wrap(err, errs.InvalidArtifact, "the payload %q of the packed artifact can't be opened (%v); download it again or %s", a.PayloadName, err, remedy)
	}
	return &limitedPayload{rc: rc, name: a.PayloadName, limit: a.limit, declared: a.PayloadSize, crc: a.payload.CRC32}, nil
}

// StoredPayload is where an uncompressed (stored) payload's bytes lie in the packed file, so
// that a caller holding a verified blob can copy them in the kernel without a decompressor. ok is
// false for a compressed (deflate or zstd) payload.
func (a *Archive) StoredPayload() (offset, size int64, ok bool) {
	if a.payload.Method != zip.Store {
		return 0, 0, false
	}
	off, err := a.payload.DataOffset()
	if err != nil || int64(a.payload.CompressedSize64) != a.PayloadSize {
		return 0, 0, false
	}
	return off, a.PayloadSize, true
}

// PayloadEntry is how the payload lies in the packed file: where its data starts, its zip method
// (0 stored, 8 deflate, 93 zstd) and how many bytes of the file its data spans. ok is false when
// its local header can't be read.
func (a *Archive) PayloadEntry() (dataOffset int64, method uint16, compressedSize int64, ok bool) {
	off, err := a.payload.DataOffset()
	if err != nil {
		return 0, 0, 0, false
	}
	return off, a.payload.Method, int64(a.payload.CompressedSize64), true
}

// PayloadCRC32 is the IEEE CRC-32 the zip records for the payload. It is as trustworthy as the
// packed file: once the file's SHA-256 is verified, so is this checksum of the payload.
func (a *Archive) PayloadCRC32() uint32 { return a.payload.CRC32 }

// ReadPayload reads the whole payload onto the heap; OpenPayload streams it, MapPayload maps it.
func (a *Archive) ReadPayload() ([]byte, error) {
	rc, err := a.OpenPayload()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var buf bytes.Buffer
	// The declared size may lie; grow past a modest bound only as bytes really arrive.
	buf.Grow(int(min(a.PayloadSize, 64<<20)) + bytes.MinRead)
	if _, err := buf.ReadFrom(rc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type limitedPayload struct {
	rc       io.ReadCloser
	name     string
	limit    int64
	declared int64  // the size the zip records, which the zip's reader holds the payload to
	crc      uint32 // the CRC-32 it records
	n        int64
	err      error
}

func (p *limitedPayload) Read(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	n, err := p.rc.Read(b)
	p.n += int64(n)
	if p.n > p.limit {
		p.err = invalid("the payload %q of the packed artifact decompresses to more than the ceiling of %d bytes; raise %s if it is genuine", p.name, p.limit, EnvMaxDecompressed)
		return 0, p.err
	}
	if err != nil && err != io.EOF {
		var unsupported *ZstdUnsupported
		switch {
		case errors.As(err, &unsupported):
			p.err = errs.Wrap(err, errs.InvalidArtifact, "the payload %q of the packed artifact can't be read: %v; %s", p.name, err, RepackZstd)
		case errors.Is(err, zip.ErrFormat):
			// What the zip's reader says when an entry decompresses past its recorded size.
			p.err = errs.Wrap(err, errs.InvalidArtifact, "the payload %q of the packed artifact decompresses past the %d bytes its zip records; the artifact is damaged: %s", p.name, p.declared, remedy)
		case errors.Is(err, zip.ErrChecksum):
			p.err = errs.Wrap(err, errs.InvalidArtifact, "the payload %q of the packed artifact does not have the checksum crc32:%08x its zip records; the artifact is damaged: download it again or %s", p.name, p.crc, remedy)
		default:
			p.err = errs.Wrap(err, errs.InvalidArtifact, "the payload %q of the packed artifact is damaged (%v); download it again or %s", p.name, err, remedy)
		}
		return n, p.err
	}
	return n, err
}

func (p *limitedPayload) Close() error { return p.rc.Close() }

// IsComponent reports whether header, the first bytes of a wasm binary, is the preamble of a
// component (version 0x0d, layer 1) rather than of a core module (version 1, layer 0).
func IsComponent(header []byte) bool {
	return len(header) >= 8 && string(header[:8]) == "\x00asm\x0d\x00\x01\x00"
}

// isWasm reports whether header starts with the wasm magic number.
func isWasm(header []byte) bool { return len(header) >= 4 && string(header[:4]) == "\x00asm" }

// ParseManifest parses and validates a packed murmur.yaml.
func ParseManifest(data []byte) (Manifest, error) {
	if len(data) > MaxManifestBytes {
		return Manifest{}, invalid("%s is %d bytes, over the limit of %d", ManifestName, len(data), MaxManifestBytes)
	}
	root, err := yamlnode.Decode(data)
	var de *yamlnode.DecodeError
	switch {
	case errors.As(err, &de) && de.Problem == yamlnode.NotUTF8:
		return Manifest{}, invalid("%s is not UTF-8; save it as UTF-8", ManifestName)
	case errors.As(err, &de) && de.Problem == yamlnode.SecondDocument:
		return Manifest{}, invalid("%s holds more than one YAML document; a manifest is a single one", ManifestName)
	case err != nil:
		return Manifest{}, errs.Wrap(err, errs.InvalidArtifact, "%s is not valid YAML: %v", ManifestName, errors.Unwrap(err))
	case root == nil:
		root = &yaml.Node{}
	}
	var m Manifest
	if root.Kind != yaml.MappingNode && root.Kind != 0 && !(root.Kind == yaml.ScalarNode && root.Tag == "!!null") {
		return Manifest{}, invalid("%s must be a mapping with name and version, found %s", ManifestName, yamlnode.Describe(root))
	}
	fields := map[string]*string{"name": &m.Name, "version": &m.Version, "runtime": &m.Runtime, "description": &m.Description}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		dst, ok := fields[k.Value]
		if !ok || k.Kind != yaml.ScalarNode {
			continue
		}
		if seen[k.Value] {
			return Manifest{}, invalid("%s line %d: key %q appears twice; keep one", ManifestName, k.Line, k.Value)
		}
		seen[k.Value] = true
		if v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		if v.Kind != yaml.ScalarNode {
			return Manifest{}, invalid("%s line %d: %s must be a string, found %s", ManifestName, v.Line, k.Value, yamlnode.Describe(v))
		}
		if v.Tag != "!!null" {
			*dst = v.Value
		}
	}
	if m.Name == "" {
		return Manifest{}, invalid("%s has no name; add the bare artifact name, e.g. name: grep", ManifestName)
	}
	if err := ref.ValidateSegment(m.Name); err != nil {
		return Manifest{}, errs.Wrap(err, errs.InvalidArtifact, "%s: name %s; use the bare name, e.g. name: grep", ManifestName, errs.Message(err))
	}
	if m.Version == "" {
		return Manifest{}, invalid("%s has no version; add one, e.g. version: \"1.0.0\"", ManifestName)
	}
	if err := ref.ValidateVersion(m.Version); err != nil {
		return Manifest{}, errs.Wrap(err, errs.InvalidArtifact, "%s: %s", ManifestName, errs.Message(err))
	}
	return m, nil
}
