package githubtest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// statusWriter remembers the status of the answer, for Requests.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// begin records the request and applies the switches every request is subject to. It reports
// whether the handler should go on to answer normally.
func (s *Server) begin(server string, w *statusWriter, r *http.Request) (done func(), proceed bool) {
	s.mu.Lock()
	idx := len(s.requests)
	s.requests = append(s.requests, Request{
		Server: server, Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(),
	})
	stall := s.stall
	fail := s.alwaysFail
	if fail == 0 {
		fail = s.failOn[server]
	}
	if fail == 0 && s.failNext > 0 {
		s.failNext--
		fail = s.failStatus
	}
	limit, reset, retryAfter := 0, s.limitReset, s.retryAfter
	charged := false
	if server == API {
		limit = s.limitStatus
		if limit == 0 && s.apiLimit > 0 {
			now := time.Now()
			if s.apiReset.IsZero() || now.After(s.apiReset) {
				s.apiUsed, s.apiReset = 0, now.Add(time.Hour)
			}
			if s.apiUsed >= s.apiLimit {
				limit, reset = http.StatusForbidden, s.apiReset
			} else {
				s.apiUsed++
				charged = true
			}
			w.Header().Set("X-RateLimit-Limit", strconv.Itoa(s.apiLimit))
			w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(s.apiLimit-s.apiUsed))
			w.Header().Set("X-RateLimit-Used", strconv.Itoa(s.apiUsed))
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(s.apiReset.Unix(), 10))
			w.Header().Set("X-RateLimit-Resource", "core")
		}
	}
	apiLimit := s.apiLimit
	s.mu.Unlock()
	done = func() {
		s.mu.Lock()
		s.requests[idx].Status = w.status
		if charged && w.status == http.StatusNotModified && r.Header.Get("Authorization") != "" && s.apiUsed > 0 {
			s.apiUsed-- // GitHub: a conditional request answered 304 is free when authorized
		}
		s.mu.Unlock()
	}
	if stall > 0 {
		select {
		case <-time.After(stall):
		case <-r.Context().Done():
			return done, false
		}
	}
	if limit != 0 {
		if limit == http.StatusForbidden {
			allowed := 60
			if apiLimit > 0 {
				allowed = apiLimit
			}
			w.Header().Set("X-RateLimit-Limit", strconv.Itoa(allowed))
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Used", strconv.Itoa(allowed))
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
			w.Header().Set("X-RateLimit-Resource", "core")
			writeError(w, limit, "API rate limit exceeded for 127.0.0.1. (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)")
		} else {
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
			writeError(w, limit, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.")
		}
		return done, false
	}
	if fail != 0 {
		msg := http.StatusText(fail)
		s.mu.Lock()
		if s.failMessage != "" {
			msg = s.failMessage
		}
		s.mu.Unlock()
		writeError(w, fail, msg)
		return done, false
	}
	return done, true
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{
		"message":           msg,
		"documentation_url": "https://docs.github.com/rest",
		"status":            strconv.Itoa(status),
	})
}

func (s *Server) serveAPI(rw http.ResponseWriter, r *http.Request) {
	w := &statusWriter{ResponseWriter: rw}
	done, ok := s.begin(API, w, r)
	defer done()
	if !ok {
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	if w.Header().Get("X-RateLimit-Limit") == "" {
		w.Header().Set("X-RateLimit-Limit", "60")
		w.Header().Set("X-RateLimit-Remaining", "59")
	}

	s.mu.Lock()
	token := s.token
	s.mu.Unlock()
	if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}

	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 3 || parts[0] != "repos" {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	s.mu.Lock()
	rp := s.repos[strings.ToLower(parts[1]+"/"+parts[2])]
	s.mu.Unlock()
	if rp == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	rest := parts[3:]
	switch {
	case len(rest) == 0:
		s.mu.Lock()
		body := s.repoJSON(rp)
		s.mu.Unlock()
		s.writeJSON(w, r, body)
	case len(rest) == 2 && rest[0] == "releases" && rest[1] == "latest":
		s.mu.Lock()
		rel := rp.latest()
		var body any
		if rel != nil {
			body = s.releaseJSON(rp, rel)
		}
		s.mu.Unlock()
		if rel == nil {
			writeError(w, http.StatusNotFound, "Not Found")
			return
		}
		s.writeJSON(w, r, body)
	case len(rest) >= 3 && rest[0] == "releases" && rest[1] == "tags":
		tag := strings.Join(rest[2:], "/")
		s.mu.Lock()
		rel := rp.release(tag)
		var body any
		if rel != nil && !rel.draft {
			body = s.releaseJSON(rp, rel)
		}
		s.mu.Unlock()
		if body == nil {
			writeError(w, http.StatusNotFound, "Not Found")
			return
		}
		s.writeJSON(w, r, body)
	case len(rest) == 2 && rest[0] == "attestations":
		s.serveAttestations(w, r, rp, rest[1])
	case len(rest) == 3 && rest[0] == "releases" && rest[1] == "assets":
		id, err := strconv.ParseInt(rest[2], 10, 64)
		s.mu.Lock()
		a := s.assets[id]
		if a != nil && !strings.EqualFold(a.owner+"/"+a.repo, rp.owner+"/"+rp.name) {
			a = nil
		}
		var body any
		if a != nil {
			body = s.assetJSON(a)
		}
		s.mu.Unlock()
		if err != nil || a == nil {
			writeError(w, http.StatusNotFound, "Not Found")
			return
		}
		if acceptsOctetStream(r.Header.Get("Accept")) {
			s.redirectToStorage(w, a)
			return
		}
		s.writeJSON(w, r, body)
	default:
		writeError(w, http.StatusNotFound, "Not Found")
	}
}

func acceptsOctetStream(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(mt), "application/octet-stream") {
			return true
		}
	}
	return false
}

// redirectToStorage answers with a signed storage link for a, as both the API and the web host do.
func (s *Server) redirectToStorage(w http.ResponseWriter, a *asset) {
	s.mu.Lock()
	base := s.baseLocked(Storage)
	ttl := s.linkTTL
	s.mu.Unlock()
	date := strconv.FormatInt(time.Now().UnixNano(), 10)
	expires := strconv.FormatInt(int64(ttl/time.Millisecond), 10)
	q := "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=fake&X-Amz-Date=" + date + "&X-Amz-Expires=" + expires + "&X-Amz-Signature=" +
		s.sign(a.id, date, expires) + "&response-content-disposition=attachment%3B%20filename%3D" + url.QueryEscape(a.name)
	w.Header().Set("Location", base+"/objects/"+strconv.FormatInt(a.id, 10)+"?"+q)
	w.WriteHeader(http.StatusFound)
}

// sign is the signature of a storage link: the object, when it was signed (nanoseconds) and for
// how long (milliseconds; real links count seconds, which tests can't wait for).
func (s *Server) sign(id int64, date, expires string) string {
	m := hmac.New(sha256.New, s.secret)
	fmt.Fprintf(m, "%d\n%s\n%s", id, date, expires)
	return hex.EncodeToString(m.Sum(nil))
}

// writeJSON answers with body and an ETag, or 304 when the client already holds that ETag.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, body any) {
	data, err := json.Marshal(body)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	sum := sha256.Sum256(data)
	etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "public, max-age=60, s-maxage=60")
	for _, cand := range strings.Split(r.Header.Get("If-None-Match"), ",") {
		cand = strings.TrimSpace(cand)
		if cand == "*" || strings.TrimPrefix(cand, "W/") == strings.TrimPrefix(etag, "W/") {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(data)
	}
}

type ownerJSON struct {
	Login string `json:"login"`
	ID    int64  `json:"id"`
	Type  string `json:"type"`
}

type repoJSON struct {
	ID         int64     `json:"id"`
	Name       string    `json:"name"`
	FullName   string    `json:"full_name"`
	Owner      ownerJSON `json:"owner"`
	Private    bool      `json:"private"`
	Visibility string    `json:"visibility"`
	URL        string    `json:"url"`
}

type assetJSON struct {
	ID                 int64   `json:"id"`
	Name               string  `json:"name"`
	Label              *string `json:"label"`
	State              string  `json:"state"`
	ContentType        string  `json:"content_type"`
	Size               int64   `json:"size"`
	Digest             *string `json:"digest"`
	URL                string  `json:"url"`
	BrowserDownloadURL string  `json:"browser_download_url"`
}

type releaseJSON struct {
	ID         int64       `json:"id"`
	TagName    string      `json:"tag_name"`
	Name       string      `json:"name"`
	Draft      bool        `json:"draft"`
	Prerelease bool        `json:"prerelease"`
	URL        string      `json:"url"`
	Assets     []assetJSON `json:"assets"`
}

func (s *Server) repoJSON(r *repo) repoJSON {
	j := repoJSON{
		ID:         r.repoID,
		Name:       r.name,
		FullName:   r.owner + "/" + r.name,
		Owner:      ownerJSON{Login: r.owner, ID: r.ownerID, Type: "Organization"},
		Visibility: "public",
		URL:        s.api.URL + "/repos/" + r.owner + "/" + r.name,
	}
	if s.token != "" {
		j.Private, j.Visibility = true, "private"
	}
	return j
}

func (s *Server) assetJSON(a *asset) assetJSON {
	j := assetJSON{
		ID:                 a.id,
		Name:               a.name,
		State:              "uploaded",
		ContentType:        a.contentType,
		Size:               a.size,
		URL:                fmt.Sprintf("%s/repos/%s/%s/releases/assets/%d", s.api.URL, a.owner, a.repo, a.id),
		BrowserDownloadURL: s.baseLocked(Web) + downloadPath(a),
	}
	if a.digest != "" {
		d := a.digest
		j.Digest = &d
	}
	return j
}

func (s *Server) releaseJSON(r *repo, rel *release) releaseJSON {
	j := releaseJSON{
		ID:         rel.id,
		TagName:    rel.tag,
		Name:       rel.tag,
		Draft:      rel.draft,
		Prerelease: rel.prerelease,
		URL:        fmt.Sprintf("%s/repos/%s/%s/releases/%d", s.api.URL, r.owner, r.name, rel.id),
		Assets:     []assetJSON{},
	}
	for _, a := range rel.assets {
		j.Assets = append(j.Assets, s.assetJSON(a))
	}
	return j
}

// downloadPath is where the web host serves a: /{owner}/{repo}/releases/download/{tag}/{name}.
func downloadPath(a *asset) string {
	var b strings.Builder
	b.WriteString("/" + url.PathEscape(a.owner) + "/" + url.PathEscape(a.repo) + "/releases/download")
	for _, seg := range strings.Split(a.tag, "/") {
		b.WriteString("/" + url.PathEscape(seg))
	}
	b.WriteString("/" + url.PathEscape(a.name))
	return b.String()
}
