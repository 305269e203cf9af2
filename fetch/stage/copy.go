package stage

import (
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/bufpool"
	"github.com/murmur-nexus/mur/internal/safefile"
)

// Staged files are a derived view of a verified blob, so they are written without fsync: a
// crash can leave one short, which the size check on the next pull and `mur verify` notice, and
// restaging restores. The blob itself, in the CAS, is durable.
func writeStaged(dir *os.Root, file string, r io.Reader, crc, key hash.Hash) (int64, error) {
	f, err := dir.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY|safefile.NoFollow, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := copyFull(sums(f, crc, key), r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// sums is w, with what is written to it also summed into crc and, when not nil, key.
func sums(w io.Writer, crc, key hash.Hash) io.Writer {
	if key == nil {
		return io.MultiWriter(w, crc)
	}
	return io.MultiWriter(w, crc, key)
}

// copyBuffer is what a payload is copied through on its way to tools/.
const copyBuffer = 256 << 10

// copyFull copies r to w in writes of a full copyBuffer (the last one excepted): an inflating
// reader returns a few KiB per read, and a write system call for each would cost more than the
// bytes, on a virtual machine most of all.
func copyFull(w io.Writer, r io.Reader) (int64, error) {
	pooled := bufpool.Get(copyBuffer)
	defer bufpool.Put(pooled)
	buf := *pooled
	var total int64
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			m, werr := w.Write(buf[:n])
			total += int64(m)
			if werr != nil {
				return total, werr
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

func crcString(c uint32) string { return fmt.Sprintf("crc32:%08x", c) }

// copyStored copies an uncompressed payload out of the packed file in the kernel
// (copy_file_range), and computes its checksum from the source range, which the copy has just
// brought into the page cache: a stored entry has no deflate stream to check it on the way.
func copyStored(dir *os.Root, file string, src cas.ReaderAt, off, n int64, crc, key hash.Hash) (int64, error) {
	dst, err := dir.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY|safefile.NoFollow, 0o644)
	if err != nil {
		return 0, err
	}
	var copied int64
	if rc, ok := src.(cas.RangeCopier); ok {
		copied, err = rc.CopyRange(dst, off, n)
	} else {
		copied, err = io.Copy(dst, io.NewSectionReader(src, off, n))
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil && copied != n {
		err = fmt.Errorf("copied %d of %d bytes", copied, n)
	}
	if err != nil {
		return 0, err
	}
	h := io.Writer(crc)
	if key != nil {
		h = io.MultiWriter(crc, key)
	}
	if _, err := io.Copy(h, io.NewSectionReader(src, off, n)); err != nil {
		return 0, err
	}
	return n, nil
}

func checksumFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return crcString(h.Sum32()), nil
}
