// Package download is the engine that brings one blob into a CAS ingest, for registries and
// GitHub alike: the one reading of an HTTP Range answer (Answer), bodies held to their announced
// length and read ahead (Body), copies bounded by a declared size (CopyBounded, Stream), and the
// resumable, parallel fill of an ingest from a Ranger (Filler). It knows blobs, byte ranges and
// ingests, and nothing of artifacts, locks or pulls: package fetch decides what to download and
// what becomes visible.
package download

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/murmur-nexus/mur/internal/errs"
)

// Ranger serves one blob, in parts when its server honours Range.
type Ranger interface {
	// Open asks for bytes off to end of the blob, both inclusive. Off 0 and end -1 ask for the
	// whole blob, without a Range header. A validator that is not empty is sent as If-Range.
	// A 206 whose Content-Range is not exactly the range asked for, or a 416, is an error
	// wrapping ErrNoRanges; a 200 is the whole blob, and Part.Whole says so.
	Open(ctx context.Context, off, end int64, validator string) (Part, error)
}

// Part is one answer of a Ranger. Its body ends with an error carrying errs.Network when it
// breaks off before the length the server announced.
type Part struct {
	Body io.ReadCloser
	// Whole is set when the server sent the whole blob (200) instead of the range asked for:
	// it ignores Range, or If-Range found the blob changed.
	Whole bool
	// Validator is the server's strong ETag for the blob, "" when it gave none.
	Validator string
}

// ErrNoRanges marks an answer to a Range request that does not fit it.
var ErrNoRanges = errors.New("the server does not serve the byte ranges asked for")

// Fillable is a scratch a source can fill through a Ranger. The pull's scratch is one, whatever
// the source: a source that can open its blob as a Ranger fills through it and so resumes and
// parallelises as stores do; one that can't streams into the scratch's Write instead.
type Fillable interface {
	Fill(ctx context.Context, r Ranger) error
}

// Header sets the Range and If-Range headers that Open(off, end, validator) asks for. Closed
// ranges are always sent: some registries (go-containerregistry's own) accept no other form.
func Header(h http.Header, off, end int64, validator string) {
	if !Ranged(off, end) {
		return
	}
	h.Set("Range", fmt.Sprintf("bytes=%d-%d", off, end))
	if validator != "" {
		h.Set("If-Range", validator)
	}
}

// Ranged reports whether Open(off, end) asks for a range rather than the whole blob.
func Ranged(off, end int64) bool { return off != 0 || end >= 0 }

// Answer is the one reading of an answer to Open(off, end) of a blob of size bytes, named what in
// errors. A 206 counts only when its Content-Range is exactly the range asked for (and its length,
// when given, agrees); a 200 is the whole blob; a 416 means the server serves no such range. Only a
// strong ETag is kept as the validator. The body is held to the length announced (Body, with
// classify for its read errors). handled is false for any other status: the answer is the
// caller's, body and all, to word as its server's errors.
func Answer(resp *http.Response, off, end, size int64, what string, classify func(error) error) (part Part, handled bool, err error) {
	etag := StrongETag(resp.Header.Get("ETag"))
	switch {
	case resp.StatusCode == http.StatusPartialContent && Ranged(off, end):
		want := fmt.Sprintf("bytes %d-%d/%d", off, end, size)
		got := strings.TrimSpace(resp.Header.Get("Content-Range"))
		if got != want || (resp.ContentLength >= 0 && resp.ContentLength != end-off+1) {
			resp.Body.Close()
			return Part{}, true, errs.Wrap(fmt.Errorf("%w: asked for %s, got Content-Range %q and %d bytes", ErrNoRanges, want, got, resp.ContentLength),
				errs.Network, "%s: %s answered a request for bytes %d-%d with Content-Range %q", what, host(resp), off, end, got)
		}
		return Part{Body: NewBody(resp.Body, end-off+1, what, classify), Validator: etag}, true, nil
	case resp.StatusCode == http.StatusOK:
		// A whole answer of no announced length is held to the blob's declared size: one that
		// ends cleanly short of it broke off, and the fill continues after it.
		want := resp.ContentLength
		if want < 0 && size > 0 {
			want = size
		}
		return Part{Body: NewBody(resp.Body, want, what, classify), Whole: true, Validator: etag}, true, nil
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		// Its body is not worth reading: docker-registry announces the blob's length and sends a
		// line of text.
		resp.Body.Close()
		asked := fmt.Sprintf("bytes %d-%d", off, end)
		if !Ranged(off, end) {
			asked = "the whole" // a 416 to a request without Range
		}
		return Part{}, true, errs.Wrap(fmt.Errorf("%w: %s: HTTP 416", ErrNoRanges, asked),
			errs.Network, "%s: %s refused %s of a %d-byte blob (HTTP 416)", what, host(resp), asked, size)
	}
	return Part{}, false, nil
}

// host names the server that answered, without the path and query a signed URL keeps its
// secret in.
func host(resp *http.Response) string {
	if resp.Request != nil && resp.Request.URL != nil {
		return resp.Request.URL.Host
	}
	return "the server"
}

// StrongETag is etag when it can validate a range: weak ETags (W/…) and malformed ones can't.
func StrongETag(etag string) string {
	etag = strings.TrimSpace(etag)
	if etag == "" || strings.HasPrefix(etag, "W/") {
		return ""
	}
	if len(etag) < 2 || etag[0] != '"' || etag[len(etag)-1] != '"' {
		return ""
	}
	return etag
}
