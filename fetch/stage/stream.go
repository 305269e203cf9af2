package stage

import (
	"bufio"
	"encoding/binary"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zip"
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/bufpool"
	"github.com/murmur-nexus/mur/internal/ref"
)

// Single-pass staging. A packed artifact's local entries come before its central directory, so
// the payload's bytes pass by while the blob downloads: a streamStage writes them (inflated for a
// deflated entry, decoded for a zstd one) into an unnamed file (O_TMPFILE) in the project's
// folder as they arrive, instead of reading the whole blob back once it is in. An unnamed file is
// nothing anyone sees, and a pull killed during its download leaves nothing behind: the kernel
// frees it. It trusts nothing it sees on the way. Once the blob is in and verified, adopt holds
// what was streamed to what the zip's central directory says of the payload (which entry, where
// its data starts, how it is stored, how many bytes it spans, its size and CRC-32), and only then
// links the file into a staging folder. Anything that does not match, any zip the stream could
// not follow, or a file system without O_TMPFILE falls back to staging from the blob as before.
// The staged folder becomes visible only as any staging does: after the commit, in finish.

// streamChunk is how much of the download a streamStage holds at most, per buffer.
const (
	streamChunk   = 1 << 20
	streamBuffers = 4
)

// A pull that stages nothing (outside a project, or another platform's payload) follows the
// stream all the same, with no file: the payload is checked as it arrives (verified), instead of
// being read back and inflated again once the blob is in.

// streamStage follows a blob's bytes from its first one, as an io.Writer beside the CAS ingest.
type Stream struct {
	tools *Tools // nil when the payload is only checked
	name  ref.Name
	d     digest.Digest
	file  *os.File // the unnamed file the payload is written to; nil when it is only checked
	// charged counts what the stream wrote to file against the pull's budget, until its folder
	// takes it over or the stream is abandoned; nil without a budget.
	charged *charged
	key     hash.Hash // fed the payload, when the compiled cache wants its key; may be nil
	full    chan []byte
	free    chan []byte
	seen    int64 // bytes written to it
	made    int   // buffers made so far
	bufSize int   // their size: streamChunk, or the blob's size rounded up when smaller
	size    int64 // the blob's size, -1 when not known
	off     atomic.Bool

	slots   chan struct{} // inflateSlots when the stream began
	done    chan struct{}
	result  streamResult
	discard sync.Once
}

// streamResult is what the stream staged: the entry whose data starts at dataOffset, stored with
// zip method method (stored, deflate or zstd), whose data spanned consumed bytes, decompressed
// to size bytes with checksum crc.
type streamResult struct {
	ok         bool
	name       string
	dataOffset int64
	method     uint16
	consumed   int64
	size       int64
	crc        uint32
}

// inflateSlots bounds the streams that decompress at once (deflate or zstd alike) to
// GOMAXPROCS. A project pull downloads many blobs at once, more than there are cores, and each
// stream decompresses its payload as it arrives: unbounded, they would share the cores with the
// hashing and the downloads themselves, and every one would finish later. A stream holds a slot
// only while it has bytes to decompress: waiting for the network, it gives the slot back
// (chanReader), so a slow download never keeps a core's worth of work waiting.
var inflateSlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))

// inflating counts the streams holding a slot, and inflateHook, when a test sets it, is called
// with that count each time a stream takes one: tests tell by it that the bound holds.
var (
	inflating   atomic.Int32
	inflateHook atomic.Pointer[func(busy int32)]
)

// slot is a stream's hold on one of inflateSlots, taken and given back as it decompresses.
type slot struct {
	slots chan struct{}
	held  bool
}

func (l *slot) take() {
	if l == nil || l.held {
		return
	}
	l.slots <- struct{}{}
	l.held = true
	n := inflating.Add(1)
	if hook := inflateHook.Load(); hook != nil {
		(*hook)(n)
	}
}

func (l *slot) give() {
	if l == nil || !l.held {
		return
	}
	l.held = false
	inflating.Add(-1)
	<-l.slots
}

// newStreamStage opens an unnamed file in the project's folder, or none when tools is nil, and
// starts following the stream. It returns nil when the file can't be made (no O_TMPFILE there);
// the pull then stages from the blob.
func NewStream(tools *Tools, name ref.Name, d digest.Digest, key hash.Hash) *Stream {
	var f *os.File
	if tools != nil {
		var err error
		if f, err = atomicfile.OpenUnnamed(tools.Project, 0o644); err != nil {
			return nil
		}
	}
	s := &Stream{tools: tools, name: name, d: d, file: f, key: key, full: make(chan []byte, streamBuffers), free: make(chan []byte, streamBuffers),
		slots: inflateSlots, done: make(chan struct{}), bufSize: streamChunk, size: -1}
	go s.follow()
	return s
}

// Expect tells the stream the blob's size, n bytes (-1: not known), before its first Write, so
// that its buffers are no larger than the blob.
func (s *Stream) Expect(n int64) { s.size, s.bufSize = n, bufpool.Class(n, streamChunk) }

// buffer takes a free buffer, or makes one while fewer than streamBuffers exist: a small blob
// needs only one.
func (s *Stream) buffer() []byte {
	select {
	case b := <-s.free:
		return b
	default:
	}
	if s.made < streamBuffers {
		s.made++
		return *bufpool.Get(s.bufSize)
	}
	return <-s.free
}

// Write hands p to the stream's goroutine; once the stream has staged the payload or given up,
// it only counts.
func (s *Stream) Write(p []byte) (int, error) {
	n := len(p)
	s.seen += int64(n)
	for len(p) > 0 && !s.off.Load() {
		buf := s.buffer()
		m := copy(buf, p)
		s.full <- buf[:m]
		p = p[m:]
	}
	return n, nil
}

// finish ends the stream and returns what it staged.
func (s *Stream) finish() streamResult {
	close(s.full)
	<-s.done
	return s.result
}

// abandon drops what was streamed; safe after finish and more than once.
func (s *Stream) abandon() {
	s.discard.Do(func() {
		s.off.Store(true)
		select {
		case <-s.done:
		default:
			s.finish()
		}
		if s.charged != nil {
			s.charged.b.release(s.charged.handOver())
		}
		if s.file != nil {
			s.file.Close()
		}
		// Once the stream has ended, every buffer is back in free: none is written to again.
		for len(s.free) > 0 {
			b := <-s.free
			bufpool.Put(&b)
		}
	})
}

// Abandon is abandon, for the download engine, which stops following the bytes once they no
// longer arrive in order from the blob's first.
func (s *Stream) Abandon() { s.abandon() }

// adopt returns a staged folder holding what was streamed if it is the payload of a, the blob of
// size bytes, else nil. Every check staging from the blob makes is made here too, on what the
// stream wrote.
func (s *Stream) Adopt(a *artifact.Archive, size int64) *Prepared {
	defer s.abandon()
	r, ok := s.followed(a, size)
	if !ok || s.file == nil {
		return nil
	}
	st, err := openStageDir(*s.tools, s.name, s.d, 0)
	if err != nil {
		return nil
	}
	st.reserved = s.charged.handOver() // all of the payload, or complete refuses it
	// The unnamed file gets its name only now. linkat through /proc needs no privilege, unlike
	// AT_EMPTY_PATH; a project on two file systems (tools/ a mount point) falls back.
	if err := atomicfile.LinkUnnamed(s.file, st.hold, r.name); err != nil {
		st.Discard()
		return nil
	}
	if err := st.complete(a, r.size, r.crc); err != nil {
		// The payload is not what the zip records: staging from the blob words the refusal.
		st.Discard()
		return nil
	}
	return st
}

// followed ends the stream and returns what it followed, if that is the payload of a, the blob of
// size bytes: the entry the zip's central directory names, starting where it says, stored or
// compressed with the method it says, within the bytes it says.
func (s *Stream) followed(a *artifact.Archive, size int64) (streamResult, bool) {
	r := s.finish()
	offset, method, csize, ok := a.PayloadEntry()
	if !ok || !r.ok || s.seen != size || r.name != a.PayloadName || r.dataOffset != offset ||
		r.method != method || r.consumed > csize || (method == zip.Store && r.consumed != csize) {
		return streamResult{}, false
	}
	return r, true
}

// verified reports whether the stream checked the payload of a, the blob of size bytes, as
// checkPayload would: followed to its end within the decompression ceiling, with the size and
// CRC-32 the zip records. false means it could not vouch for it (the stream gave up, followed
// something else, or found it damaged): checkPayload then reads it from the blob, and words
// any refusal.
func (s *Stream) Verified(a *artifact.Archive, size int64) bool {
	defer s.abandon()
	r, ok := s.followed(a, size)
	return ok && payloadMatches(a, r.size, crcString(r.crc)) == nil
}

// follow reads the stream's local entries up to the first root-level *.wasm and writes that one
// out. Whatever it can't follow ends it, without an error: adopt then finds no result.
func (s *Stream) follow() {
	defer close(s.done)
	cr := &chanReader{full: s.full, free: s.free}
	defer func() {
		s.off.Store(true)
		for buf := range s.full { // the writer may be blocked on a full channel
			s.free <- buf[:cap(buf)]
		}
		// The one being read when the payload ended goes back too: bufpool's memory is not
		// the collector's to reclaim (abandon gives every buffer in free back to the pool).
		if cr.buf != nil {
			s.free <- cr.buf[:cap(cr.buf)]
			cr.buf = nil
		}
	}()
	// Expect comes before any Write: once the first bytes are here, the blob's size is known.
	if _, err := cr.Read(nil); err != nil {
		return
	}
	br, release := artifact.NewStreamReaderFor(cr, s.size)
	defer release()
	pos := func() int64 { return cr.n - int64(br.Buffered()) }
	limit, err := artifact.MaxDecompressed()
	if err != nil {
		return
	}
	for {
		var h [30]byte
		if _, err := io.ReadFull(br, h[:]); err != nil || binary.LittleEndian.Uint32(h[:4]) != 0x04034b50 {
			return
		}
		flags := binary.LittleEndian.Uint16(h[6:])
		method := binary.LittleEndian.Uint16(h[8:])
		csize := int64(binary.LittleEndian.Uint32(h[18:]))
		nameLen := int(binary.LittleEndian.Uint16(h[26:]))
		extraLen := int(binary.LittleEndian.Uint16(h[28:]))
		nb := make([]byte, nameLen)
		if _, err := io.ReadFull(br, nb); err != nil {
			return
		}
		if _, err := br.Discard(extraLen); err != nil {
			return
		}
		descriptor := flags&0x8 != 0
		if !artifact.Readable(method) || method == zip.Store && (descriptor || csize == 0xffffffff) {
			return // a stored entry of unknown length, or a method mur does not read
		}
		name := string(nb)
		start := pos()
		if clean := path.Clean(name); !strings.Contains(clean, "/") && strings.HasSuffix(clean, ".wasm") && name == clean {
			s.stage(br, cr, name, start, method, csize, limit, pos)
			return
		}
		// Another entry (murmur.yaml comes first): read past it.
		if method != zip.Store {
			if !s.skip(br, cr, method) || pos()-start > artifact.MaxManifestBytes+1 {
				return
			}
		} else if _, err := br.Discard(int(csize)); err != nil {
			return
		}
		if descriptor {
			var sig [4]byte
			if _, err := io.ReadFull(br, sig[:]); err != nil {
				return
			}
			skip := 12
			if binary.LittleEndian.Uint32(sig[:]) != 0x08074b50 {
				skip = 8 // no signature: the four bytes were the CRC
			}
			if _, err := br.Discard(skip); err != nil {
				return
			}
		}
	}
}

// skip decompresses the entry of method whose data starts at br's next byte to nothing, no
// further than a manifest's limit, and reports whether it ended there.
func (s *Stream) skip(br *bufio.Reader, cr *chanReader, method uint16) bool {
	defer s.decompressing(cr)()
	dec := artifact.NewDecompressor(method, br, artifact.MaxManifestBytes)
	defer dec.Close()
	_, err := io.Copy(io.Discard, io.LimitReader(dec, artifact.MaxManifestBytes+1))
	return err == nil
}

// decompressing takes a slot for the decompression that follows, and lends it to cr, which gives
// it back while it waits for the download; done gives it back for good.
func (s *Stream) decompressing(cr *chanReader) (done func()) {
	l := &slot{slots: s.slots}
	l.take()
	cr.slot = l
	return func() {
		cr.slot = nil
		l.give()
	}
}

// stage writes the entry whose data starts at start into the unnamed file, or only sums it.
func (s *Stream) stage(br *bufio.Reader, cr *chanReader, name string, start int64, method uint16, csize, limit int64, pos func() int64) {
	var f io.Writer = io.Discard
	if s.file != nil {
		f = s.file
		if b := s.tools.Budget; b != nil {
			s.charged = &charged{w: s.file, b: b}
			f = s.charged
		}
	}
	crc := crc32.NewIEEE()
	var src io.Reader = io.LimitReader(br, csize)
	if method != zip.Store {
		defer s.decompressing(cr)()
		// Reads no byte past the entry's data, whose length only the data descriptor after it
		// gives. The declared size is not known yet: the ceiling bounds the output, and the
		// central directory's size is held to it in adopt.
		dec := artifact.NewDecompressor(method, br, limit)
		defer dec.Close()
		src = dec
	}
	n, err := copyFull(sums(f, crc, s.key), io.LimitReader(src, limit+1))
	if err != nil || n > limit {
		return
	}
	s.result = streamResult{ok: true, name: name, dataOffset: start, method: method, consumed: pos() - start, size: n, crc: crc.Sum32()}
}

// chanReader reads the buffers a streamStage was handed, and gives each back once read.
type chanReader struct {
	full <-chan []byte
	free chan<- []byte
	cur  []byte
	buf  []byte
	n    int64 // bytes read
	slot *slot // the stream's decompression slot, if it holds one
}

func (c *chanReader) Read(p []byte) (int, error) {
	for len(c.cur) == 0 {
		if c.buf != nil {
			c.free <- c.buf[:cap(c.buf)]
			c.buf = nil
		}
		var b []byte
		var ok bool
		select {
		case b, ok = <-c.full:
		default:
			// Nothing downloaded yet to decompress: the slot goes back while the network
			// catches up, and is taken again once there is work for it.
			c.slot.give()
			if b, ok = <-c.full; ok {
				c.slot.take()
			}
		}
		if !ok {
			return 0, io.EOF
		}
		c.buf, c.cur = b, b
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	c.n += int64(n)
	return n, nil
}
