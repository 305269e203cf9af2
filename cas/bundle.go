package cas

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// Bundles are cache bundles: a zstd-compressed tar of the blobs a lock needs
// and their pull records, for CI caches and air-gapped transfer. Import is hostile-input safe:
// every blob goes through the CAS's verified ingest, so nothing unverified becomes visible.

const (
	bundleBlobPrefix  = "blobs/sha256/"
	bundleRecordsName = "records.jsonl"
	// MaxBundleBlobBytes bounds one blob in a bundle, as the packed-artifact ceiling bounds a payload.
	MaxBundleBlobBytes = 1 << 30
	// maxBundleRecordsBytes bounds the records file, which is read into memory.
	maxBundleRecordsBytes = 64 << 20
	// bundleDecoderMemory bounds the zstd decoder whatever the bundle claims its window is.
	bundleDecoderMemory = 64 << 20
)

// Export writes the blobs named by digests, and their records, to w. A digest missing from
// the CAS is an error: a bundle that silently lacks a pinned blob would fail later, offline.
func (store *Store) Export(ctx context.Context, digests []digest.Digest, w io.Writer) (int, error) {
	zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return 0, err
	}
	tw := tar.NewWriter(zw)
	epoch := time.Unix(0, 0).UTC()
	want := map[digest.Digest]bool{}
	for _, d := range digests {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if want[d] {
			continue
		}
		want[d] = true
		blob, err := store.VerifiedReaderAt(ctx, d)
		if err != nil {
			return 0, errs.Wrap(err, errs.TokenOf(err), "can't export %s: %s; run 'mur warm' or 'mur verify --repair' first", d, errs.Message(err))
		}
		hdr := &tar.Header{Name: bundleBlobPrefix + d.Encoded(), Mode: 0o444, Size: blob.Size(), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			blob.Close()
			return 0, err
		}
		_, err = io.Copy(tw, io.NewSectionReader(blob, 0, blob.Size()))
		blob.Close()
		if err != nil {
			return 0, err
		}
	}
	recs, err := store.Records("")
	if err != nil {
		return 0, err
	}
	var rb bytes.Buffer
	enc := json.NewEncoder(&rb)
	for _, r := range recs {
		if want[r.Digest] {
			enc.Encode(r)
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: bundleRecordsName, Mode: 0o444, Size: int64(rb.Len()), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return 0, err
	}
	if _, err := tw.Write(rb.Bytes()); err != nil {
		return 0, err
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	return len(want), zw.Close()
}

// ImportReport says what an import admitted.
type ImportReport struct {
	Blobs   int `json:"blobs"`
	Already int `json:"already_present"`
	Records int `json:"records"`
	// RecordsAlready are the bundle's records the home held already (an import repeated).
	RecordsAlready int `json:"records_already_present"`
}

// Import verifies and admits every blob of a bundle. It refuses unknown paths, oversized
// entries and digest mismatches; blobs admitted before a refusal are whole and verified, and
// stay (they are content-addressed, so they can't be wrong). check, when not nil, looks at each
// new blob once it hashes to its name and before it is visible; its refusal refuses the bundle
// there. The caller supplies it because what a blob must hold (a packed artifact's entries, whose
// CRC-32 mur verify no longer re-checks) is not the CAS's to know.
func (store *Store) Import(ctx context.Context, r io.Reader, name string, check func(blob ReaderAt) error) (*ImportReport, error) {
	zr, err := zstd.NewReader(bufio.NewReaderSize(r, 1<<20), zstd.WithDecoderMaxMemory(bundleDecoderMemory), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, errs.Wrap(err, errs.InvalidBundle, "%s is not a zstd stream: %v", name, err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	rep := &ImportReport{}
	for {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return rep, nil
		}
		if err != nil {
			return rep, errs.Wrap(err, errs.InvalidBundle, "%s is damaged or truncated after %d blobs: %v; export it again", name, rep.Blobs+rep.Already, err)
		}
		switch {
		case hdr.Name == bundleRecordsName && hdr.Typeflag == tar.TypeReg:
			n, dup, err := importRecords(store, tr, hdr.Size, name)
			if err != nil {
				return rep, err
			}
			rep.Records += n
			rep.RecordsAlready += dup
		case strings.HasPrefix(hdr.Name, bundleBlobPrefix) && hdr.Typeflag == tar.TypeReg:
			d, err := ref.DigestFromHex(strings.TrimPrefix(hdr.Name, bundleBlobPrefix))
			if err != nil {
				return rep, errs.New(errs.InvalidBundle, "%s holds %q, which is not blobs/sha256/<64 lowercase hex>; refusing the bundle", name, hdr.Name)
			}
			if hdr.Size < 0 || hdr.Size > MaxBundleBlobBytes {
				return rep, errs.New(errs.InvalidBundle, "%s: entry %s claims %d bytes, over the %d-byte ceiling; refusing it", name, hdr.Name, hdr.Size, MaxBundleBlobBytes)
			}
			if store.Has(d) {
				rep.Already++
				continue
			}
			src := &readErr{r: tr}
			var refused error
			var inspect func(ReaderAt) error
			if check != nil {
				inspect = func(blob ReaderAt) error { refused = check(blob); return refused }
			}
			if _, err := store.IngestChecked(ctx, src, hdr.Size, d, inspect); err != nil {
				if src.err != nil {
					return rep, errs.Wrap(src.err, errs.InvalidBundle, "%s is damaged or truncated inside %s: %v; nothing of that blob was admitted; export it again", name, hdr.Name, src.err)
				}
				if refused != nil && !errors.Is(refused, errs.InvalidArtifact) {
					// Not the blob's fault (a setting the check needs is wrong): it is not blamed.
					return rep, errs.Wrap(refused, errs.TokenOf(refused), "%s: entry %s can't be checked: %s; nothing of that blob was admitted", name, hdr.Name, errs.Message(refused))
				}
				if refused != nil {
					return rep, errs.Wrap(refused, errs.InvalidBundle, "%s: entry %s hashes to its name but is a damaged packed artifact (%s); nothing of that blob was admitted, and the blobs before it stay. A pull refuses such an artifact too, so the bundle was made around mur's checks or forged: pull the artifact from its store instead", name, hdr.Name, errs.Message(refused))
				}
				if errors.Is(err, errs.Integrity) {
					return rep, errs.Wrap(err, errs.InvalidBundle, "%s: entry %s does not hash to its name (%s); nothing of it was admitted; the bundle is damaged or forged", name, hdr.Name, errs.Message(err))
				}
				return rep, errs.Wrap(err, errs.TokenOf(err), "%s: entry %s: %s", name, hdr.Name, errs.Message(err))
			}
			rep.Blobs++
		default:
			return rep, errs.New(errs.InvalidBundle, "%s holds %q (type %q), which a mur bundle never has; refusing the bundle", name, hdr.Name, string(hdr.Typeflag))
		}
	}
}

func importRecords(store *Store, r io.Reader, size int64, name string) (added, already int, err error) {
	if size > maxBundleRecordsBytes {
		return 0, 0, errs.New(errs.InvalidBundle, "%s: records.jsonl is %d bytes, over %d; refusing it", name, size, maxBundleRecordsBytes)
	}
	b, rerr := io.ReadAll(io.LimitReader(r, size))
	if rerr != nil {
		err = rerr
		return 0, 0, errs.Wrap(err, errs.InvalidBundle, "%s: records.jsonl is truncated: %v", name, err)
	}
	// Importing the same bundle twice, or a bundle back into the home it came from, adds no
	// record twice: a record is the same pull when it is equal but for the "(imported)" mark.
	have, err := store.Records("")
	if err != nil {
		return 0, 0, err
	}
	seen := map[string]bool{}
	for _, r := range have {
		seen[recordKey(r)] = true
	}
	var add []Record
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil {
			return 0, 0, errs.New(errs.InvalidBundle, "%s: records.jsonl has a line that is not a record: %v", name, err)
		}
		if rec.Digest != "" {
			if _, err := ref.ParseDigest(rec.Digest.String()); err != nil {
				return 0, 0, errs.New(errs.InvalidBundle, "%s: a record names digest %q: %s", name, rec.Digest, errs.Message(err))
			}
		}
		rec.Outcome = Outcome(strings.TrimSpace(string(rec.Outcome)))
		if rec.Source != "" && !strings.Contains(rec.Source, "(imported)") {
			rec.Source = fmt.Sprintf("%s (imported)", rec.Source)
		}
		k := recordKey(rec)
		if seen[k] {
			already++
			continue
		}
		seen[k] = true
		add = append(add, rec)
	}
	if err := store.AppendRecords(add); err != nil {
		return 0, 0, err
	}
	return len(add), already, nil
}

// recordKey identifies a pull record whether or not it was imported.
func recordKey(r Record) string {
	r.Source = strings.TrimSuffix(r.Source, " (imported)")
	r.Time = r.Time.UTC()
	b, _ := json.Marshal(r)
	return string(b)
}

// readErr remembers a failure of the bundle itself, so that it is not blamed on the CAS.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}
