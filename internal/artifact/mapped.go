package artifact

import (
	"errors"
	"hash/crc32"
	"io"
	"os"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
)

// Payloads in memory. A payload may decompress to hundreds of MiB from a download of kilobytes,
// and compiling or running it needs all of it at once. ReadPayload puts it on the heap; a pull
// that precompiled four such payloads held 2 GB. MapPayload instead writes it to a file no one
// sees and maps that: the kernel holds the pages, drops them under pressure and reads them
// back, and the process's heap holds only the copy's buffer.

// CopyPayload writes the payload, decompressed, to w, and holds what it wrote to the size and
// CRC-32 the zip records (a zip's reader checks a CRC only when the entry records a nonzero one).
func (a *Archive) CopyPayload(w io.Writer) (int64, error) {
	rc, err := a.OpenPayload()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	crc := crc32.NewIEEE()
	n, err := io.Copy(io.MultiWriter(w, crc), rc)
	switch {
	case err != nil:
		return n, err
	case n != a.PayloadSize:
		return n, invalid("the payload %q is %d bytes, but the zip records %d; the artifact is damaged: download it again or %s", a.PayloadName, n, a.PayloadSize, remedy)
	case crc.Sum32() != a.payload.CRC32:
		return n, invalid("the payload %q has checksum crc32:%08x, but the zip records crc32:%08x; the artifact is damaged: download it again or %s", a.PayloadName, crc.Sum32(), a.payload.CRC32, remedy)
	}
	return n, nil
}

// MapPayload decompresses the payload into a file in dir that has no name, or one removed as
// soon as it is mapped, and maps it read-only: the bytes a compiler or a run reads, without
// holding them on the heap. dir should be on a disk, not in memory (the CAS's, not /tmp, which
// may be a tmpfs). release unmaps them; the bytes must not be used after it. A file that can't
// be mapped is read into memory instead (atomicfile.Map), as on Windows.
func (a *Archive) MapPayload(dir string) (wasm []byte, release func(), err error) {
	f, err := atomicfile.OpenUnnamed(dir, 0o600)
	if err != nil {
		if f, err = os.CreateTemp(dir, atomicfile.TempPrefix+"payload-"); err != nil {
			return nil, nil, errs.Wrap(err, errs.IO, "can't make a file for the payload %q in %s: %v", a.PayloadName, dir, err)
		}
		defer os.Remove(f.Name()) // a mapping outlives its name; on Windows Map has read it
	}
	defer f.Close() // and its file
	n, err := a.CopyPayload(f)
	var e *errs.Error
	if err != nil && !errors.As(err, &e) {
		err = errs.Wrap(err, errs.IO, "can't write the payload %q to %s: %v", a.PayloadName, dir, err) // the disk's
	}
	if err != nil {
		return nil, nil, err
	}
	b, unmap, err := atomicfile.Map(f, n)
	if err != nil {
		return nil, nil, errs.Wrap(err, errs.IO, "can't map the payload %q: %v", a.PayloadName, err)
	}
	return b, func() { unmap() }, nil
}
