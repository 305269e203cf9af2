package artifact

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zip"
	"github.com/klauspost/compress/zstd"
)

// Zstandard entries. A packed artifact's payload may be stored, deflated or, since issue 34,
// compressed with zstd under zip method 93. Decoding is bounded as inflating is: no more output
// than the entry declares (and so than the decompression ceiling), the size and CRC-32 checked at
// its end. On top of that a zstd frame states how much memory decoding it takes (its window), so
// a frame asking for more than ZstdMaxWindow is refused before a byte of it is decoded.

// MethodZstd is zip method 93, Zstandard, the number WinZip registered and 7-Zip, libarchive and
// `mur pack --compression zstd` write. APPNOTE's older method 20 is deprecated, no archiver
// still writes it, and mur refuses it like any other method it does not read.
const MethodZstd uint16 = zstd.ZipMethodWinZip

// ZstdMaxWindow is the largest zstd window mur decodes with. A decoder allocates about one
// window of history, so this is what a hostile frame can make it take; 8 MiB is the window of
// every klauspost/compress level and of the reference zstd's levels up to 19 (only --ultra
// levels and --long ask for more, and an artifact gains nothing from them).
const ZstdMaxWindow = 8 << 20

// MethodName words a zip method in messages.
func MethodName(method uint16) string {
	switch method {
	case zip.Store:
		return "stored"
	case zip.Deflate:
		return "deflate"
	case MethodZstd:
		return "zstd"
	}
	return fmt.Sprintf("method %d", method)
}

// Readable reports whether mur reads entries of a zip method.
func Readable(method uint16) bool {
	return method == zip.Store || method == zip.Deflate || method == MethodZstd
}

// NewDecompressor returns a reader of the compressed data of an entry of method (Deflate or
// MethodZstd) that starts at br's next byte, or nil for any other method. It reads no byte of
// br past the entry's compressed data, which is how a reader following a zip's local entries in
// order (CheckStream, the download's stream stage) finds the next one. declared is the most the
// entry may decompress to, or -1 when that is not known yet: a zstd frame that says it holds
// more is refused at its header. Close gives the decompressor back for reuse.
func NewDecompressor(method uint16, br *bufio.Reader, declared int64) io.ReadCloser {
	entryReads.Add(1)
	switch method {
	case zip.Deflate:
		return NewInflater(br) // a *bufio.Reader is an io.ByteReader: flate reads no byte past its stream
	case MethodZstd:
		return newZstdReader(br, declared)
	}
	return nil
}

// zstdDecoders are reused: a decoder's history buffer (a window and two blocks) is the
// allocation that counts, and a decoder from the pool already has one. BenchmarkDecode measures
// the difference.
var zstdDecoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil,
		// One goroutine: decoding runs in the caller's, as inflating does, so that the semaphores
		// and worker counts that bound mur's CPU use bound it too.
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(ZstdMaxWindow),
		// For a stream, MaxMemory also caps the window; unlike MaxWindow it applies to a
		// single-segment frame, whose window is its whole content.
		zstd.WithDecoderMaxMemory(ZstdMaxWindow))
	if err != nil {
		panic(err) // the options are constants
	}
	return d
}}

// zstdDecompressor is the zip.Decompressor of method 93 that Read registers on the archives it
// opens: the zip's own reader then checks the entry's size and CRC-32 as it does for deflate.
func zstdDecompressor(r io.Reader) io.ReadCloser { return newZstdReader(r, -1) }

// newZstdReader decodes the zstd frames at the start of r. A *bufio.Reader is read no byte past
// the last frame; any other reader is buffered here, which over-reads, as a zip entry's
// io.SectionReader allows.
func newZstdReader(r io.Reader, declared int64) *zstdReader {
	z := &zstdReader{}
	br, ok := r.(*bufio.Reader)
	if !ok || br.Size() < zstdMaxHeader {
		br, z.release = NewStreamReader(r)
	}
	z.frames = zstdFrames{r: br, max: declared}
	z.dec = zstdDecoders.Get().(*zstd.Decoder)
	if err := z.dec.Reset(&z.frames); err != nil {
		z.fail(err)
	}
	return z
}

// zstdReader is a pooled decoder reading the frames of one entry.
type zstdReader struct {
	dec     *zstd.Decoder // nil once closed, or after the decoder failed
	frames  zstdFrames
	release func() // gives back the buffer newZstdReader made, if it made one
	err     error
}

var errZstdClosed = errors.New("zstd reader used after Close")

func (z *zstdReader) Read(p []byte) (n int, err error) {
	if z.err != nil {
		return 0, z.err
	}
	if z.dec == nil {
		return 0, errZstdClosed
	}
	defer z.recover(&err)
	n, err = z.dec.Read(p)
	if err == io.EOF && z.frames.err != nil {
		// The decoder took the walker's refusal for the end of its input, where a frame would
		// start; it is not one.
		err = z.frames.err
	}
	if err != nil && err != io.EOF {
		err = z.fail(err)
	}
	return n, err
}

// WriteTo spares io.Copy a copy: the decoder writes straight from its history.
func (z *zstdReader) WriteTo(w io.Writer) (n int64, err error) {
	if z.err != nil {
		return 0, z.err
	}
	if z.dec == nil {
		return 0, errZstdClosed
	}
	defer z.recover(&err)
	ew := &errWriter{w: w}
	n, err = z.dec.WriteTo(ew)
	if err == nil && z.frames.err != nil {
		err = z.frames.err // as in Read
	}
	switch {
	case err == nil:
	case ew.err != nil:
		// The writer's own error (a ceiling reached, a full disk): passed on as it is.
		z.err = err
		z.Close()
	default:
		err = z.fail(err)
	}
	return n, err
}

// errWriter remembers the error of its writer, to tell it from the decoder's.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		e.err = err
	}
	return n, err
}

// fail makes err the reader's error for good, worded as bad zstd data unless the frame walker
// already said what is wrong, and retires the decoder.
func (z *zstdReader) fail(err error) error {
	switch {
	case z.frames.err != nil:
		err = z.frames.err
	case err == io.ErrUnexpectedEOF:
		err = fmt.Errorf("the zstd data ends in the middle of a frame: %w", err)
	default:
		err = fmt.Errorf("bad zstd data: %w", err)
	}
	z.err = err
	z.Close()
	return err
}

// recover turns a panic of the decoder into an error. Hostile bytes are decoded in-process; a
// decoder bug they reach must refuse that artifact, not end a pull of twenty. The decoder is not
// given back: its state is unknown.
func (z *zstdReader) recover(err *error) {
	if r := recover(); r != nil {
		z.dec = nil
		z.err = fmt.Errorf("bad zstd data: the decoder failed on it (%v)", r)
		*err = z.err
		z.Close()
	}
}

// Close gives the decoder back; safe more than once.
func (z *zstdReader) Close() error {
	if z.dec != nil {
		// Reset(nil) drops the decoder's reference to this entry's reader and keeps its buffers.
		if z.dec.Reset(nil) == nil {
			zstdDecoders.Put(z.dec)
		}
		z.dec = nil
	}
	if z.release != nil {
		z.release()
		z.release = nil
	}
	if z.err == nil {
		z.err = errZstdClosed
	}
	return nil
}

// ZstdUnsupported is zstd data that may well be valid but that mur does not decode: a refusal
// says so, and that a repack fixes it, rather than that the artifact is damaged.
type ZstdUnsupported struct{ What string }

func (e *ZstdUnsupported) Error() string { return e.What }

// RepackZstd is what to do about ZstdUnsupported data.
const RepackZstd = "ask its publisher to pack it with 'mur pack --compression zstd', which stays within mur's limits"

// Frame layout, as RFC 8878 section 3.1.1 gives it.
const (
	zstdMagic         = 0xfd2fb528
	zstdSkippableMask = 0xfffffff0
	zstdSkippable     = 0x184d2a50
	zstdMaxHeader     = 18 // magic 4, descriptor 1, window 1, dictionary ID 4, content size 8
	zstdBlockHeader   = 3
	zstdChecksum      = 4
)

// zstdFrames passes the decoder the zstd frames at the start of r and nothing after them: it
// walks the frame headers and block headers (which give every length) itself, and reports io.EOF
// where the frames end, at the first bytes that start no frame. That is what lets a stream reader
// find the zip's next local header after a zstd entry whose size only its data descriptor gives,
// as flate's end-of-stream mark does for deflate. Walking the headers also lets it refuse, before
// the decoder allocates anything, a frame whose window is over ZstdMaxWindow, a frame that needs
// a dictionary (a zip entry has nowhere to carry one), and frames that declare more content than
// the entry. Skippable frames are read past here and never reach the decoder.
type zstdFrames struct {
	r        *bufio.Reader
	max      int64 // the most content the frames may declare; -1 for unknown
	declared int64 // content declared by the frames so far
	frames   int   // frames begun, skippable ones included
	left     int64 // bytes of the current header, block or checksum still to pass on
	inFrame  bool  // the next header is a block's
	checksum bool  // the current frame ends with a checksum
	err      error // what the walk found wrong; sticks
}

func (z *zstdFrames) Read(p []byte) (int, error) {
	if z.err != nil {
		return 0, z.err
	}
	for z.left == 0 {
		if err := z.next(); err != nil {
			if err != io.EOF {
				z.err = err
			}
			return 0, err
		}
	}
	if int64(len(p)) > z.left {
		p = p[:z.left]
	}
	n, err := z.r.Read(p)
	z.left -= int64(n)
	switch {
	case err == io.EOF && z.left > 0:
		z.err = errZstdCut
		err = z.err
	case err == io.EOF:
		err = nil // the next call tells whether another frame follows
	case err != nil:
		z.err = err
	}
	return n, err
}

// errZstdCut is zstd data that ends inside a frame. It is not io.ErrUnexpectedEOF, which the
// decoder takes for a clean end when it comes where a frame would start.
var errZstdCut = errors.New("the zstd data ends in the middle of a frame")

// next reads the next header and sets left to the bytes it passes on: the header and what it
// announces.
func (z *zstdFrames) next() error {
	if z.inFrame {
		h, err := z.peek(zstdBlockHeader)
		if err != nil {
			return err
		}
		v := uint32(h[0]) | uint32(h[1])<<8 | uint32(h[2])<<16
		last, kind, size := v&1 != 0, (v>>1)&3, int64(v>>3)
		switch kind {
		case 1: // RLE: one byte, repeated size times
			size = 1
		case 3:
			return errors.New("bad zstd data: a block of the reserved type 3")
		}
		z.left = zstdBlockHeader + size
		if last {
			z.inFrame = false
			if z.checksum {
				z.left += zstdChecksum
			}
		}
		return nil
	}
	for {
		m, err := z.r.Peek(4)
		if len(m) < 4 {
			if z.frames == 0 && len(m) > 0 {
				return fmt.Errorf("bad zstd data: %d bytes, too short for a frame", len(m))
			}
			if err != nil && err != io.EOF {
				return err
			}
			return io.EOF // no frame at all is zero bytes of content; the size check decides
		}
		magic := binary.LittleEndian.Uint32(m)
		switch {
		case magic == zstdMagic:
			return z.frameHeader()
		case magic&zstdSkippableMask == zstdSkippable:
			h, err := z.peek(8)
			if err != nil {
				return err
			}
			skip := 8 + int64(binary.LittleEndian.Uint32(h[4:]))
			if n, err := z.r.Discard(int(skip)); int64(n) != skip {
				if err == io.EOF {
					err = errZstdCut
				}
				return err
			}
			// Counted: what follows it may be the bytes after the data, as after any frame.
			z.frames++
		case z.frames == 0:
			return fmt.Errorf("bad zstd data: it starts with %08x, not a zstd frame's magic number %08x", magic, uint32(zstdMagic))
		default:
			return io.EOF // the bytes after the last frame: a data descriptor, the next entry
		}
	}
}

// frameHeader checks the frame header at r's next byte.
func (z *zstdFrames) frameHeader() error {
	h, err := z.peek(5)
	if err != nil {
		return err
	}
	fhd := h[4]
	single := fhd&0x20 != 0
	if fhd&0x08 != 0 {
		return errors.New("bad zstd data: a frame header with its reserved bit set")
	}
	didSize := [4]int{0, 1, 2, 4}[fhd&3]
	fcsSize := [4]int{0, 2, 4, 8}[fhd>>6]
	if fcsSize == 0 && single {
		fcsSize = 1
	}
	n := 5 + didSize + fcsSize
	if !single {
		n++ // the window descriptor
	}
	if h, err = z.peek(n); err != nil {
		return err
	}
	at := 5
	var window uint64
	if !single {
		wd := h[at]
		at++
		exp := 10 + uint(wd>>3)
		window = 1<<exp + (1<<exp)/8*uint64(wd&7)
	}
	var did uint32
	for i := range didSize {
		did |= uint32(h[at+i]) << (8 * i)
	}
	at += didSize
	content := int64(-1) // unknown
	switch fcsSize {
	case 1:
		content = int64(h[at])
	case 2:
		content = int64(binary.LittleEndian.Uint16(h[at:])) + 256
	case 4:
		content = int64(binary.LittleEndian.Uint32(h[at:]))
	case 8:
		if c := binary.LittleEndian.Uint64(h[at:]); c <= 1<<62 {
			content = int64(c)
		} else {
			content = 1 << 62
		}
	}
	if single {
		window = uint64(content)
	}
	switch {
	case did != 0:
		return &ZstdUnsupported{fmt.Sprintf("its zstd data needs dictionary %d, which a zip entry can't carry", did)}
	case window > ZstdMaxWindow:
		return &ZstdUnsupported{fmt.Sprintf("its zstd data needs a %d-byte window, over the %d bytes mur decodes with (zstd's --ultra levels and --long ask for more)", window, ZstdMaxWindow)}
	case content >= 0 && z.max >= 0 && content > z.max-z.declared:
		return fmt.Errorf("bad zstd data: its frames declare %d bytes of content, more than the %d of the entry", z.declared+content, z.max)
	}
	if content > 0 {
		z.declared += content
	}
	z.frames++
	z.checksum = fhd&0x04 != 0
	z.inFrame = true
	z.left = int64(n)
	return nil
}

// peek returns the next n bytes, or errZstdCut: a header cut short is damaged data.
func (z *zstdFrames) peek(n int) ([]byte, error) {
	b, err := z.r.Peek(n)
	if len(b) < n {
		if err == nil || err == io.EOF {
			err = errZstdCut
		}
		return nil, err
	}
	return b, nil
}
