package artifact

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
