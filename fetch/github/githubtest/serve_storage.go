package githubtest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

func (s *Server) serveWeb(rw http.ResponseWriter, r *http.Request) {
	w := &statusWriter{ResponseWriter: rw}
	done, ok := s.begin(Web, w, r)
	defer done()
	if !ok {
		return
	}
	// Only the API may ever see GITHUB_TOKEN; github.com's download links need none.
	if r.Header.Get("Authorization") != "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("githubtest: a credential reached the web host; only the API may see GITHUB_TOKEN\n"))
		return
	}
	notFound := func() {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("<!DOCTYPE html><html><title>Page not found · GitHub</title></html>"))
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if (r.Method != http.MethodGet && r.Method != http.MethodHead) || len(parts) < 6 || parts[2] != "releases" || parts[3] != "download" {
		notFound()
		return
	}
	tag, name := strings.Join(parts[4:len(parts)-1], "/"), parts[len(parts)-1]
	s.mu.Lock()
	var found *asset
	if rp := s.repos[strings.ToLower(parts[0]+"/"+parts[1])]; rp != nil && s.token == "" {
		if rel := rp.release(tag); rel != nil && !rel.draft {
			for _, a := range rel.assets {
				if a.name == name {
					found = a
				}
			}
		}
	}
	s.mu.Unlock()
	if found == nil {
		notFound()
		return
	}
	s.redirectToStorage(w, found)
}

func (s *Server) serveStorage(rw http.ResponseWriter, r *http.Request) {
	w := &statusWriter{ResponseWriter: rw}
	done, ok := s.begin(Storage, w, r)
	defer done()
	if !ok {
		return
	}
	// Real release storage is a pre-signed S3-style URL: a second credential is an error.
	if r.Header.Get("Authorization") != "" {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidArgument</Code>` +
			`<Message>Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified</Message></Error>`))
		return
	}
	if rest, isBundle := strings.CutPrefix(r.URL.Path, "/attestations/"); isBundle {
		s.serveAttestationBundle(w, r, rest)
		return
	}
	idText, ok := strings.CutPrefix(r.URL.Path, "/objects/")
	id, err := strconv.ParseInt(idText, 10, 64)
	q := r.URL.Query()
	date, expires := q.Get("X-Amz-Date"), q.Get("X-Amz-Expires")
	if !ok || err != nil || !hmac.Equal([]byte(q.Get("X-Amz-Signature")), []byte(s.sign(id, date, expires))) {
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>SignatureDoesNotMatch</Code></Error>`))
		return
	}
	signedAt, _ := strconv.ParseInt(date, 10, 64)
	ttl, _ := strconv.ParseInt(expires, 10, 64)
	s.mu.Lock()
	a := s.assets[id]
	var data []byte
	var etag string
	if a != nil {
		data = a.data
		sum := sha256.Sum256(data)
		etag = `"` + hex.EncodeToString(sum[:16]) + `"`
	}
	stallBody := s.stallBody
	expired := time.Unix(0, signedAt).Add(time.Duration(ttl)*time.Millisecond).Before(time.Now()) || !time.Unix(0, signedAt).After(s.expiredTill)
	s.mu.Unlock()
	if expired {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>`))
		return
	}
	if a == nil {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("ETag", etag)
	w.Header().Set("Accept-Ranges", "bytes")
	// Storage honours one range, as S3 and Azure do; If-Range with another ETag gets the whole
	// new object.
	status := http.StatusOK
	if start, end, ok := parseRange(r.Header.Get("Range"), int64(len(data))); ok && (r.Header.Get("If-Range") == "" || r.Header.Get("If-Range") == etag) {
		if start < 0 {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(data)))
		data, status = data[start:end+1], http.StatusPartialContent
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	if stallBody > 0 {
		half := len(data) / 2
		_, _ = w.Write(data[:half])
		w.Flush()
		select {
		case <-time.After(stallBody):
		case <-r.Context().Done():
			return
		}
		data = data[half:]
	}
	_, _ = w.Write(data)
}

// parseRange reads a single byte range, "bytes=a-b", "bytes=a-" or "bytes=-n", against an object
// of size bytes. ok is false for no range or a form storage ignores (several ranges); start is
// -1 for a range that lies outside the object.
func parseRange(h string, size int64) (start, end int64, ok bool) {
	spec, found := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, 0, false
	}
	a, b, found := strings.Cut(spec, "-")
	if !found {
		return 0, 0, false
	}
	var err error
	switch {
	case a == "":
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, false
		}
		return max(size-n, 0), size - 1, true
	default:
		if start, err = strconv.ParseInt(a, 10, 64); err != nil || start < 0 {
			return 0, 0, false
		}
		end = size - 1
		if b != "" {
			if end, err = strconv.ParseInt(b, 10, 64); err != nil || end < start {
				return 0, 0, false
			}
			end = min(end, size-1)
		}
	}
	if start >= size {
		return -1, -1, true
	}
	return start, end, true
}
