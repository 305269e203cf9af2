package download

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
)

func response(status int, body string, hdr map[string]string, length int64) *http.Response {
	h := http.Header{}
	for k, v := range hdr {
		h.Set(k, v)
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: length,
		Request: &http.Request{URL: &url.URL{Scheme: "https", Host: "blobs.example", Path: "/x", RawQuery: "sig=secret"}}}
}

// The one reading of an answer to a Range request.
func TestAnswer(t *testing.T) {
	cases := []struct {
		name      string
		resp      *http.Response
		off, end  int64
		handled   bool
		noRanges  bool
		whole     bool
		validator string
	}{
		{"206 exactly as asked", response(206, "bcd", map[string]string{"Content-Range": "bytes 1-3/10", "ETag": `"v"`}, 3), 1, 3, true, false, false, `"v"`},
		{"206 one byte off", response(206, "cde", map[string]string{"Content-Range": "bytes 2-4/10"}, 3), 1, 3, true, true, false, ""},
		{"206 of another total", response(206, "bcd", map[string]string{"Content-Range": "bytes 1-3/11"}, 3), 1, 3, true, true, false, ""},
		{"206 of another length", response(206, "bc", map[string]string{"Content-Range": "bytes 1-3/10"}, 2), 1, 3, true, true, false, ""},
		{"206 to a request without Range", response(206, "bcd", map[string]string{"Content-Range": "bytes 1-3/10"}, 3), 0, -1, false, false, false, ""},
		{"200 is the whole blob", response(200, "abcdefghij", map[string]string{"ETag": `"v"`}, 10), 1, 3, true, false, true, `"v"`},
		{"a weak ETag does not count", response(200, "abcdefghij", map[string]string{"ETag": `W/"v"`}, 10), 1, 3, true, false, true, ""},
		{"a weak ETag on a 206 does not count", response(206, "bcd", map[string]string{"Content-Range": "bytes 1-3/10", "ETag": `W/"v"`}, 3), 1, 3, true, false, false, ""},
		{"an unquoted ETag on a 206 does not count", response(206, "bcd", map[string]string{"Content-Range": "bytes 1-3/10", "ETag": `v`}, 3), 1, 3, true, false, false, ""},
		{"an unquoted ETag does not count", response(200, "abcdefghij", map[string]string{"ETag": `v`}, 10), 1, 3, true, false, true, ""},
		{"416 means no ranges", response(416, "no", nil, 2), 1, 3, true, true, false, ""},
		{"404 is the caller's", response(404, "gone", nil, 4), 1, 3, false, false, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			part, handled, err := Answer(c.resp, c.off, c.end, 10, "blob x", nil)
			if handled != c.handled {
				t.Fatalf("handled %v", handled)
			}
			if !handled {
				return
			}
			if c.noRanges {
				if !errors.Is(err, ErrNoRanges) || errs.TokenOf(err) != errs.Network || strings.Contains(err.Error(), "secret") {
					t.Fatalf("err %v", err)
				}
				return
			}
			if err != nil || part.Whole != c.whole || part.Validator != c.validator {
				t.Fatalf("part %+v, %v", part, err)
			}
			if _, err := io.ReadAll(part.Body); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A whole answer that announces no length is held to the blob's declared size: one that ends
// cleanly short of it broke off, and the fill continues after what came.
func TestAnswerWholeOfNoLengthHeldToTheSize(t *testing.T) {
	part, handled, err := Answer(response(200, "abcdefg", nil, -1), 0, -1, 10, "blob x", nil)
	if !handled || err != nil || !part.Whole {
		t.Fatalf("handled %v, whole %v, err %v", handled, part.Whole, err)
	}
	got, err := io.ReadAll(part.Body)
	if string(got) != "abcdefg" || !errors.Is(err, io.ErrUnexpectedEOF) || errs.TokenOf(err) != errs.Network {
		t.Fatalf("read %q, %v; want the 7 bytes, then a break short of the 10 declared", got, err)
	}
}

// A body held to its length: short is a network failure to continue after, long is refused.
func TestBodyHeldToItsLength(t *testing.T) {
	for _, read := range []func(io.Reader) error{
		func(r io.Reader) error { _, err := io.ReadAll(r); return err },
		func(r io.Reader) error { _, err := r.(io.WriterTo).WriteTo(io.Discard); return err },
	} {
		short := NewBody(io.NopCloser(strings.NewReader("abc")), 5, "blob x", nil)
		if err := read(short); !errors.Is(err, io.ErrUnexpectedEOF) || errs.TokenOf(err) != errs.Network || !strings.Contains(err.Error(), "broke off after 3 of 5") {
			t.Fatalf("short: %v", err)
		}
		long := NewBody(io.NopCloser(strings.NewReader("abcdef")), 5, "blob x", nil)
		if err := read(long); errs.TokenOf(err) != errs.Integrity {
			t.Fatalf("long: %v", err)
		}
		exact := NewBody(io.NopCloser(strings.NewReader("abcde")), 5, "blob x", nil)
		if err := read(exact); err != nil {
			t.Fatalf("exact: %v", err)
		}
	}
	failing := NewBody(io.NopCloser(io.MultiReader(strings.NewReader("ab"), errReader2{})), -1, "blob x", func(err error) error {
		return errs.Wrap(err, errs.Denied, "classified")
	})
	if _, err := io.ReadAll(failing); errs.TokenOf(err) != errs.Denied {
		t.Fatalf("classify was not used: %v", err)
	}
}

type errReader2 struct{}

func (errReader2) Read([]byte) (int, error) { return 0, errors.New("reset by peer") }

func TestCopyBoundedStopsAtTheFirstByteTooMany(t *testing.T) {
	var dst bytes.Buffer
	n, err := CopyBounded(&dst, strings.NewReader("abcdef"), 4)
	if !errors.Is(err, ErrTooLong) || n != 4 || dst.String() != "abcd" {
		t.Fatalf("%d %q %v", n, dst.String(), err)
	}
	dst.Reset()
	if _, err := CopyBounded(&dst, strings.NewReader("abcd"), 4); err != nil || dst.String() != "abcd" {
		t.Fatalf("%q %v", dst.String(), err)
	}
}

// Only a strong ETag, quoted, can validate a range (RFC 9110 8.8.3, 13.1.5): a weak one (W/, which
// is case-sensitive) or a malformed one is no validator.
func TestStrongETag(t *testing.T) {
	for _, c := range []struct{ etag, want string }{
		{`"v1"`, `"v1"`},
		{` "v1" `, `"v1"`},
		{`""`, `""`},
		{`W/"v1"`, ""},
		{` W/"v1"`, ""},
		{`W/""`, ""},
		{`w/"v1"`, ""},
		{`v1`, ""},
		{`"v1`, ""},
		{`v1"`, ""},
		{`"`, ""},
		{"", ""},
	} {
		if got := StrongETag(c.etag); got != c.want {
			t.Errorf("StrongETag(%q) = %q, want %q", c.etag, got, c.want)
		}
	}
}

// httpRanger serves a blob the way a registry's Ranger does over HTTP, without the network: each
// Open is a request whose headers Header sets and whose answer Answer reads. The server honours
// Range, sends etag with every answer, and breaks its first whole answer off after breakAt bytes
// when that is set. It records the If-Range of every request that has one.
type httpRanger struct {
	data    []byte
	etag    string
	breakAt int
	mu      sync.Mutex
	broke   bool
	ifRange []string
	ranged  int
}

func (h *httpRanger) Open(ctx context.Context, off, end int64, validator string) (Part, error) {
	req := http.Header{}
	Header(req, off, end, validator)
	size := int64(len(h.data))
	hdr := map[string]string{"ETag": h.etag}
	h.mu.Lock()
	if v, ok := req["If-Range"]; ok {
		h.ifRange = append(h.ifRange, v...)
	}
	var resp *http.Response
	if req.Get("Range") == "" {
		body := h.data
		if h.breakAt > 0 && !h.broke {
			h.broke = true
			body = body[:h.breakAt] // announced whole, ends short: the connection broke
		}
		resp = response(200, string(body), hdr, size)
	} else {
		h.ranged++
		hdr["Content-Range"] = fmt.Sprintf("bytes %d-%d/%d", off, end, size)
		resp = response(206, string(h.data[off:end+1]), hdr, end-off+1)
	}
	h.mu.Unlock()
	part, handled, err := Answer(resp, off, end, size, "blob x", nil)
	if !handled {
		return Part{}, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return part, err
}

// A weak ETag never goes out as If-Range, neither on the pieces after a 206 that carried it nor
// on a broken stream's continuation after a 200 that did: a server compares If-Range strongly,
// so a weak one would have it answer every piece with the whole blob. A strong ETag does go out.
func TestIfRangeNeverCarriesAWeakETag(t *testing.T) {
	data, d := blob(1 << 20)
	pieces := Options{Connections: 2, ParallelMin: 1, Chunk: 64 << 10, Hooks: &Hooks{PiecesFirst: true}}
	for _, c := range []struct {
		name    string
		etag    string
		breakAt int
		opt     Options
		sent    string // the If-Range every ranged request after the first answer carries; "" none
	}{
		{"pieces, weak", `W/"v1"`, 0, pieces, ""},
		{"pieces, strong", `"v1"`, 0, pieces, `"v1"`},
		{"a broken stream, weak", `W/"v1"`, 300_000, Options{}, ""},
		{"a broken stream, strong", `"v1"`, 300_000, Options{}, `"v1"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &httpRanger{data: data, etag: c.etag, breakAt: c.breakAt}
			if _, err := fill(t, newStore(t), r, data, d, c.opt); err != nil {
				t.Fatal(err)
			}
			// The pieces' probe, made before any answer, is the one ranged request without it.
			want := r.ranged
			if c.breakAt == 0 {
				want--
			}
			if want < 1 {
				t.Fatalf("%d ranged requests: the test wants some made after an answer gave the ETag", r.ranged)
			}
			if c.sent == "" {
				want = 0
			}
			if len(r.ifRange) != want {
				t.Fatalf("If-Range sent %d times (%q) over %d ranged requests, want %d", len(r.ifRange), r.ifRange, r.ranged, want)
			}
			for _, v := range r.ifRange {
				if v != c.sent {
					t.Fatalf("If-Range %q sent, want %q", v, c.sent)
				}
			}
		})
	}
}
