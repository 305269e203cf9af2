package artifact

import "io"

// PackedOverhead is what a packed artifact may hold beyond its payload's ceiling: murmur.yaml at
// its largest, and the zip's headers and central directory, with room to spare.
const PackedOverhead = MaxManifestBytes + 4<<20

// MaxPacked bounds the download of a packed artifact whose size no one declared (a blob fetched
// by a pinned digest alone): the decompression ceiling in force plus PackedOverhead. A stored
// payload packs to about its own size; one that deflates packs smaller.
func MaxPacked() (int64, error) {
	limit, err := MaxDecompressed()
	if err != nil {
		return 0, err
	}
	return limit + PackedOverhead, nil
}

// Blob is a packed artifact's blob opened for reading: cas.ReaderAt has this shape.
type Blob interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// OpenBlob is the one way to read a packed artifact back from the CAS: it takes what the CAS
// opening returned (cas.Store.ReaderAt, or VerifiedReaderAt to re-hash first), as in
// OpenBlob(store.ReaderAt(ctx, d)), and reads the blob's directory and manifest. The caller
// closes the blob; on an error it is closed here.
func OpenBlob[B Blob](blob B, err error) (*Archive, B, error) {
	var none B
	if err != nil {
		return nil, none, err
	}
	a, err := Read(blob, blob.Size())
	if err != nil {
		blob.Close()
		return nil, none, err
	}
	return a, blob, nil
}
