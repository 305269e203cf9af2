// Package github is mur's source for the GitHub releases of a scope (SPEC section 8): a small REST
// client, the murmur-index.json format, and a fetch.Source that checks every payload against the
// index, GitHub's own asset digest, the packed manifest and the scope's owner pin.
//
// The client sends the token only to URLs under the API base. A public repository's assets come
// through their browser_download_url on GitHub's web host, which spends no API quota; a private
// repository's through the API's asset endpoint. Both answer with a redirect to a storage host
// whose URL carries its own signature, so mur follows redirects itself and sends the token on no
// hop that leaves the API base.
package github

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/murmur-nexus/mur/fetch/internal/retry"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/termtext"
)

// DefaultBaseURL is GitHub's REST API.
const DefaultBaseURL = "https://api.github.com"

// Defaults for ClientOptions.
const (
	DefaultRetries = 3
	DefaultTimeout = 30 * time.Second
)

const (
	apiVersion  = "2022-11-28"
	acceptJSON  = "application/vnd.github+json"
	acceptBytes = "application/octet-stream"
	userAgent   = "mur (+https://github.com/murmur-nexus/mur)"
	maxJSON     = 8 << 20 // no API answer mur reads comes near this
	maxRedirect = 5
)

// ClientOptions configure a Client.
type ClientOptions struct {
	// BaseURL is the REST API's root (MUR_GITHUB_API_BASE); empty means DefaultBaseURL.
	BaseURL string
	// Token is sent as a bearer token to URLs under BaseURL only (GITHUB_TOKEN); empty sends none.
	Token string
	// HTTPClient carries the requests; nil means a fresh client. Its redirect policy is
	// replaced: the Client follows redirects itself.
	HTTPClient *http.Client
	// Retries is how many times a transient failure (5xx, reset, timeout) is retried: 0 means
	// DefaultRetries, a negative number none.
	Retries int
	// Timeout bounds each attempt's wait for an answer and every silence within a body, so a
	// large download is never cut off while bytes are flowing. 0 means DefaultTimeout.
	Timeout time.Duration
}

// ClientOptionsFromEnv reads MUR_GITHUB_API_BASE and GITHUB_TOKEN.
func ClientOptionsFromEnv() ClientOptions {
	return ClientOptions{
		BaseURL: strings.TrimSpace(os.Getenv("MUR_GITHUB_API_BASE")),
		Token:   strings.TrimSpace(os.Getenv("GITHUB_TOKEN")),
	}
}

// Client talks to GitHub's REST API. It is safe for concurrent use, and remembers ETags and the
// answers they validate for its whole life, so repeated look-ups cost a 304 at most.
type Client struct {
	base    *url.URL
	token   string
	hc      *http.Client
	retries int
	timeout time.Duration
	backoff time.Duration // first retry's delay; doubles for each further retry

	mu     sync.Mutex
	etags  map[string]cachedAnswer // by URL
	assets map[string][]byte       // small assets (the index) by id, size and GitHub's digest
}

type cachedAnswer struct {
	etag string
	body []byte
}

// NewClient returns a Client. A BaseURL that doesn't parse as an absolute http(s) URL makes every
// request fail with errs.InvalidConfig.
func NewClient(opt ClientOptions) *Client {
	base := strings.TrimRight(opt.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		u = nil
	}
	hc := &http.Client{}
	if opt.HTTPClient != nil {
		copied := *opt.HTTPClient
		hc = &copied
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c := &Client{
		base:    u,
		token:   opt.Token,
		hc:      hc,
		retries: opt.Retries,
		timeout: opt.Timeout,
		backoff: 250 * time.Millisecond,
		etags:   map[string]cachedAnswer{},
		assets:  map[string][]byte{},
	}
	if c.retries == 0 {
		c.retries = DefaultRetries
	} else if c.retries < 0 {
		c.retries = 0
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	inner := hc.Transport
	if inner == nil {
		inner = http.DefaultTransport
	}
	hc.Transport = retry.IdleTimeout(inner, c.timeout)
	if u == nil {
		c.base = &url.URL{Scheme: "invalid", Opaque: base}
	}
	return c
}

// Repository is the part of GET /repos/{owner}/{repo} that mur reads.
type Repository struct {
	ID       int64  `json:"id"`
	FullName string `json:"full_name"`
	Owner    struct {
		Login string `json:"login"`
		ID    int64  `json:"id"`
		Type  string `json:"type"`
	} `json:"owner"`
	Private    bool   `json:"private"`
	Visibility string `json:"visibility"` // "public", "private", or "internal" (an enterprise's own)
}

// NeedsToken reports whether the repository's assets are out of reach of an anonymous
// download link: a private or internal repository's are served through the API only.
func (r *Repository) NeedsToken() bool {
	return r.Private || (r.Visibility != "" && r.Visibility != "public")
}

// Release is the part of a release that mur reads.
type Release struct {
	ID         int64   `json:"id"`
	TagName    string  `json:"tag_name"`
	Draft      bool    `json:"draft"`
	Prerelease bool    `json:"prerelease"`
	Assets     []Asset `json:"assets"`
}

// Asset is one file attached to a release.
type Asset struct {
	ID                 int64  `json:"id"`
	Name               string `json:"name"`
	Size               int64  `json:"size"`
	Digest             string `json:"digest"` // "sha256:<hex>", or "" for assets GitHub never hashed
	ContentType        string `json:"content_type"`
	URL                string `json:"url"`
	BrowserDownloadURL string `json:"browser_download_url"`
}

// Asset finds the release's asset called name.
func (r *Release) Asset(name string) (Asset, bool) {
	for _, a := range r.Assets {
		if a.Name == name {
			return a, true
		}
	}
	return Asset{}, false
}

// Repo reads the repository's ids.
func (c *Client) Repo(ctx context.Context, owner, repo string) (*Repository, error) {
	var r Repository
	u := c.apiURL("repos", owner, repo)
	if err := c.getJSON(ctx, u, "repository "+owner+"/"+repo, &r); err != nil {
		return nil, err
	}
	if r.ID == 0 || r.Owner.ID == 0 {
		return nil, errs.New(errs.Network, "GitHub's answer for repository %s/%s (%s) has no repository or owner id; retry later", owner, repo, u)
	}
	return &r, nil
}

// LatestRelease reads the most recent release that is neither a draft nor a prerelease.
func (c *Client) LatestRelease(ctx context.Context, owner, repo string) (*Release, error) {
	var r Release
	if err := c.getJSON(ctx, c.apiURL("repos", owner, repo, "releases", "latest"), "published release in "+owner+"/"+repo, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ReleaseByTag reads the release tagged tag. Drafts are invisible (errs.NotFound).
func (c *Client) ReleaseByTag(ctx context.Context, owner, repo, tag string) (*Release, error) {
	var r Release
	if err := c.getJSON(ctx, c.apiURL("repos", owner, repo, "releases", "tags", tag), "release "+tag+" in "+owner+"/"+repo, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// DownloadAsset copies the bytes of release asset a of owner/repo to w and returns how many it
// copied. Unless needsToken, it first opens the asset's browser_download_url: a link on GitHub's
// web host, not the API, so it spends no API quota. It falls back to the API's asset endpoint
// (Accept: application/octet-stream, with the token) for a private repository, an asset without a
// usable link, and a link that fails before its first byte reached w. Either way the redirect to
// storage is followed without any credential. When limit is positive at most limit+1 bytes are
// copied, so the caller notices an overlong body without reading all of it. A body that breaks
// off after its first byte reached w is an errs.Network error, since w can't be rewound.
func (c *Client) DownloadAsset(ctx context.Context, owner, repo string, a Asset, needsToken bool, limit int64, w io.Writer) (int64, error) {
	what := assetWhat(owner, repo, a)
	var written int64
	err := c.askAsset(ctx, assetAsk{owner: owner, repo: repo, a: a, web: !needsToken,
		// A login page (an enterprise in private mode) or an answer of the wrong length is not the
		// asset; the API may know better, and nothing has reached w yet.
		linkOK: func(resp *http.Response) bool {
			return resp.StatusCode == http.StatusOK && mediaType(resp) != "text/html" && (a.Size <= 0 || resp.ContentLength < 0 || resp.ContentLength == a.Size)
		},
		use: func(resp *http.Response, fromLink bool) (bool, error) {
			defer resp.Body.Close()
			if !fromLink {
				if again, err := c.checkStatus(resp, what); err != nil {
					return again, err
				}
			}
			var body io.Reader = resp.Body
			if limit > 0 {
				body = io.LimitReader(body, limit+1)
			}
			n, readErr, writeErr := copyCounting(w, body)
			written += n
			switch {
			case writeErr != nil:
				return false, errs.Wrap(writeErr, errs.IO, "writing %s: %v", what, writeErr)
			case readErr != nil && written == 0 && fromLink:
				return false, fmt.Errorf("%w: %v", errTryTheAPI, readErr)
			case readErr != nil && written == 0:
				return true, readErr
			case readErr != nil:
				return false, errs.Wrap(readErr, errs.Network, "the download of %s from %s broke off after %d bytes: %v; retry the command", what, redact(resp.Request.URL.String()), written, readErr)
			}
			return false, nil
		},
	})
	return written, err
}

// downloadLink is a's browser_download_url when mur may use it: an absolute http(s) URL, and
// https unless the API base itself is plain http, so a link never downgrades the transport that
// an index without GitHub's digest relies on.
func (c *Client) downloadLink(a Asset) (string, bool) {
	u, err := url.Parse(a.BrowserDownloadURL)
	if err != nil {
		return "", false
	}
	if u.Scheme != "https" && (u.Scheme != "http" || c.base.Scheme != "http") {
		return "", false
	}
	return u.String(), true
}

// copyCounting is io.Copy that tells read failures from write failures.
func copyCounting(w io.Writer, r io.Reader) (n int64, readErr, writeErr error) {
	buf := make([]byte, 256<<10)
	for {
		m, err := r.Read(buf)
		if m > 0 {
			k, werr := w.Write(buf[:m])
			n += int64(k)
			if werr == nil && k < m {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				return n, nil, werr
			}
		}
		if err == io.EOF {
			return n, nil, nil
		}
		if err != nil {
			return n, err, nil
		}
	}
}

// smallAsset downloads an asset of at most limit bytes into memory, checks it against GitHub's
// digest where there is one, and remembers it by that digest for the Client's life.
func (c *Client) smallAsset(ctx context.Context, owner, repo string, a Asset, needsToken bool, limit int64) ([]byte, error) {
	key := fmt.Sprintf("%s/%s/%d/%d/%s", owner, repo, a.ID, a.Size, a.Digest)
	if a.Digest != "" {
		c.mu.Lock()
		data, ok := c.assets[key]
		c.mu.Unlock()
		if ok {
			return data, nil
		}
	}
	if a.Size > limit {
		return nil, errs.New(errs.IndexMismatch, "asset %s in %s/%s is %d bytes, more than the %d mur reads; the publisher must fix it", a.Name, owner, repo, a.Size, limit)
	}
	var buf bytes.Buffer
	if _, err := c.DownloadAsset(ctx, owner, repo, a, needsToken, limit, &buf); err != nil {
		return nil, err
	}
	if int64(buf.Len()) > limit {
		return nil, errs.New(errs.Integrity, "asset %s in %s/%s is longer than the %d bytes mur reads; the publisher must fix it", a.Name, owner, repo, limit)
	}
	if err := checkGitHubDigest(a, owner, repo, buf.Bytes()); err != nil {
		return nil, err
	}
	if a.Digest != "" {
		c.mu.Lock()
		c.assets[key] = buf.Bytes()
		c.mu.Unlock()
	}
	return buf.Bytes(), nil
}

func (c *Client) apiURL(segments ...string) string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(c.base.String(), "/"))
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// getJSON reads an API answer into v, revalidating a remembered answer with If-None-Match.
func (c *Client) getJSON(ctx context.Context, u, what string, v any) error {
	var body []byte
	err := c.retry(ctx, u, func(ctx context.Context) (bool, error) {
		c.mu.Lock()
		cached, hasCached := c.etags[u]
		c.mu.Unlock()
		hdr := http.Header{}
		if hasCached {
			hdr.Set("If-None-Match", cached.etag)
		}
		resp, err := c.get(ctx, u, acceptJSON, hdr)
		if err != nil {
			return true, err
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusNotModified && hasCached {
			body = cached.body
			return false, nil
		}
		if retry, err := c.checkStatus(resp, what); err != nil {
			return retry, err
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxJSON+1))
		if err != nil {
			return true, err
		}
		if len(data) > maxJSON {
			return false, errs.New(errs.Network, "GitHub's answer for %s (%s) is over %d bytes; mur expected a small JSON document", what, u, maxJSON)
		}
		if etag := resp.Header.Get("ETag"); etag != "" {
			c.mu.Lock()
			c.etags[u] = cachedAnswer{etag: etag, body: data}
			c.mu.Unlock()
		}
		body = data
		return false, nil
	})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return errs.Wrap(err, errs.Network, "GitHub's answer for %s (%s) is not the JSON mur expected: %v; check MUR_GITHUB_API_BASE", what, u, err)
	}
	return nil
}

// retry runs op until it succeeds, fails for good, or has failed transiently retries+1 times.
func (c *Client) retry(ctx context.Context, u string, op func(context.Context) (retry bool, err error)) error {
	if c.base.Scheme == "invalid" {
		return errs.New(errs.InvalidConfig, "the GitHub API base %q is not an absolute http or https URL; fix MUR_GITHUB_API_BASE", c.base.Opaque)
	}
	policy := retry.Policy{Retries: c.retries, Backoff: c.backoff}
	err := policy.Do(ctx, func(int) error {
		again, err := op(ctx)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return retry.Permanent(errs.Wrap(ctx.Err(), errs.Network, "GET %s was abandoned: %v", redact(u), ctx.Err()))
		case isGuess(ctx) && unanswered(err):
			// A guessed source that does not answer is not asked again (guess.go).
			return retry.Permanent(errs.Wrap(err, errs.Network, "GET %s failed: %v", redact(u), err))
		case noSuchHost(err):
			// The name does not exist (no network, or a scope nobody mapped to a reachable
			// host): asking the resolver again a moment later only delays the error.
			return retry.Permanent(errs.Wrap(err, errs.Network, "GET %s failed: %v; check the network, or MUR_GITHUB_API_BASE", redact(u), err))
		case !again:
			var tokErr *errs.Error
			if errors.As(err, &tokErr) {
				return retry.Permanent(err)
			}
			return retry.Permanent(errs.Wrap(err, errs.Network, "GET %s failed: %v", redact(u), err))
		}
		return err
	})
	var ex *retry.Exhausted
	var ab *retry.Abandoned
	switch {
	case errors.As(err, &ex):
		return errs.Wrap(ex.Last, errs.Network, "GET %s failed %d times (last: %v); check the network, or githubstatus.com, and retry", redact(u), ex.Attempts, ex.Last)
	case errors.As(err, &ab):
		return errs.Wrap(ab.Cause, errs.Network, "GET %s was abandoned (%v) while retrying after: %v", redact(u), ab.Cause, ab.Last)
	}
	return err
}

// get sends a GET and follows redirects itself, sending the Authorization header only while the
// request stays under the API base, and never from https down to plain http.
func (c *Client) get(ctx context.Context, u, accept string, extra http.Header) (*http.Response, error) {
	return c.getEvery(ctx, u, accept, extra, nil)
}

// getEvery is get that also sends every hop the headers in everyHop, which must carry no
// credential: Range and If-Range, which must reach the storage host a download redirects to.
func (c *Client) getEvery(ctx context.Context, u, accept string, extra, everyHop http.Header) (*http.Response, error) {
	for hops := 0; ; hops++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, errs.Wrap(err, errs.InvalidConfig, "can't request %s: %v; check MUR_GITHUB_API_BASE", u, err)
		}
		req.Header.Set("User-Agent", userAgent)
		if c.onAPIBase(req.URL) {
			req.Header.Set("Accept", accept)
			req.Header.Set("X-GitHub-Api-Version", apiVersion)
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			for k, vs := range extra {
				req.Header[k] = vs
			}
		} else if accept == acceptBytes {
			req.Header.Set("Accept", accept)
		}
		for k, vs := range everyHop {
			req.Header[k] = vs
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			return nil, err
		}
		switch resp.StatusCode {
		case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		default:
			return resp, nil
		}
		loc := resp.Header.Get("Location")
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if loc == "" {
			return nil, fmt.Errorf("%s answered %d without a Location", redact(u), resp.StatusCode)
		}
		next, err := req.URL.Parse(loc)
		if err != nil {
			return nil, fmt.Errorf("%s redirected to %q: %v", redact(u), loc, err)
		}
		if next.Scheme != "https" && next.Scheme != "http" {
			return nil, fmt.Errorf("%s redirected to a %s URL", redact(u), next.Scheme)
		}
		if req.URL.Scheme == "https" && next.Scheme == "http" {
			return nil, fmt.Errorf("%s redirected from https to plain http (%s)", redact(u), redact(next.String()))
		}
		if hops >= maxRedirect {
			return nil, fmt.Errorf("%s redirected more than %d times", redact(u), maxRedirect)
		}
		u = next.String()
	}
}

// onAPIBase reports whether the token may travel to u: the API base's scheme and host, and a
// path under the base's. An enterprise server's web pages share the API's host, under another
// path (/api/v3 is the API), and a download link there must not carry the token.
func (c *Client) onAPIBase(u *url.URL) bool {
	if !strings.EqualFold(u.Scheme, c.base.Scheme) || !strings.EqualFold(u.Host, c.base.Host) {
		return false
	}
	base := strings.TrimRight(c.base.Path, "/")
	p := path.Clean("/" + u.Path)
	return base == "" || p == base || strings.HasPrefix(p, base+"/")
}

// checkStatus turns an unsuccessful answer into an error and says whether to retry it.
func (c *Client) checkStatus(resp *http.Response, what string) (retry bool, err error) {
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return false, nil
	}
	where := redact(resp.Request.URL.String())
	if err := c.rateLimited(resp, where); err != nil {
		return false, err
	}
	msg := githubMessage(resp)
	switch {
	case code == http.StatusNotFound:
		hint := "check the name"
		if c.token == "" {
			hint += "; for a private repository, set GITHUB_TOKEN"
		} else {
			hint += " and that GITHUB_TOKEN may read the repository"
		}
		return false, errs.New(errs.NotFound, "GitHub has no %s (%s answered 404); %s", what, where, hint)
	case code == http.StatusUnauthorized:
		return false, errs.New(errs.Denied, "GitHub refused the token for %s (%s answered 401%s); check GITHUB_TOKEN", what, where, msg)
	case code == http.StatusForbidden:
		return false, errs.New(errs.Denied, "GitHub refused access to %s (%s answered 403%s); check GITHUB_TOKEN's permissions", what, where, msg)
	case code >= 500 || code == http.StatusRequestTimeout:
		return true, fmt.Errorf("%s answered %d %s%s", hostOf(resp.Request.URL), code, http.StatusText(code), msg)
	}
	return false, errs.New(errs.Network, "%s answered %d %s%s for %s", where, code, http.StatusText(code), msg, what)
}

// rateLimited recognises GitHub's primary (403 or 429 with x-ratelimit-remaining: 0 and a reset
// time) and secondary (retry-after) rate limits.
func (c *Client) rateLimited(resp *http.Response, where string) error {
	code := resp.StatusCode
	if code != http.StatusForbidden && code != http.StatusTooManyRequests {
		return nil
	}
	retryAfter := strings.TrimSpace(resp.Header.Get("Retry-After"))
	remaining := strings.TrimSpace(resp.Header.Get("X-RateLimit-Remaining"))
	if retryAfter == "" && remaining != "0" && code != http.StatusTooManyRequests {
		return nil
	}
	when := "in a minute"
	if secs, err := strconv.Atoi(retryAfter); err == nil && secs >= 0 {
		when = fmt.Sprintf("in %d seconds (after %s)", secs, time.Now().Add(time.Duration(secs)*time.Second).UTC().Format(time.RFC3339))
	} else if t, err := http.ParseTime(retryAfter); err == nil {
		when = "after " + t.UTC().Format(time.RFC3339)
	} else if reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
		at := time.Unix(reset, 0)
		when = fmt.Sprintf("after %s (in %d seconds)", at.UTC().Format(time.RFC3339), max(0, int(time.Until(at).Seconds()+0.5)))
	}
	hint := "setting GITHUB_TOKEN raises the limit"
	if c.token != "" {
		hint = "GITHUB_TOKEN is set and its limit is used up too"
	}
	return errs.New(errs.RateLimited, "GitHub rate-limited %s (%d); retry %s; %s", where, code, when, hint)
}

// githubMessage is GitHub's own explanation from an error body, as ": message", or "".
func githubMessage(resp *http.Response) string {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(data, &e) == nil && e.Message != "" {
		return ": " + termtext.Foreign(e.Message)
	}
	return ""
}

// hostOf names the server that answered, for messages about transient failures.
func hostOf(u *url.URL) string { return u.Scheme + "://" + u.Host }

// redact drops the query, which for storage URLs is a signature.
func redact(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i]
	}
	return u
}

// noSuchHost reports whether err is the resolver's definite "no such host", as opposed to a
// resolver that timed out or failed for now.
func noSuchHost(err error) bool {
	var dns *net.DNSError
	return errors.As(err, &dns) && dns.IsNotFound
}
