// Package github is mur's source for the GitHub releases of a scope (SPEC section 8): a small REST
// client, the murmur-index.json format, and a fetch.Source that checks every payload against the
// index, GitHub's own asset digest, the packed manifest and the scope's owner pin.
//
// The client sends the token only to URLs under the API base. A public repository's assets come
// through their browser_download_url on GitHub's web host, which spends no API quota; a private
// repository's through the API's asset endpoint. Both answer with a redirect to a storage host
// whose URL carries its own signature, so mur follows redirects itself and sends the token on no
// hop that leaves the API base.
//
// # Files
//
//   - client.go: the Client and the API's repository and release answers; client_http.go: its
//     requests (retries, statuses, rate limits, the token kept to the API base);
//     client_download.go: an asset's bytes, download link first, then the API (assetpolicy.go).
//   - assetranger.go: an asset served in parts for resumable and parallel downloads.
//   - index.go, build.go: murmur-index.json, read and built; source.go: the fetch.Source;
//     guess.go: a scope mapped nowhere, whose guessed source is asked once, without retries;
//     attestations.go: GitHub's artifact attestations.
package github

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/murmur-nexus/mur/fetch/internal/retry"
	"github.com/murmur-nexus/mur/internal/errs"
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

	// oneTry marks a guessed source's client (guess.go): a request that gets no answer at all
	// is not retried.
	oneTry bool
	cache  *answers
}

// answers are what a Client remembers of GitHub's answers, shared by its copies.
type answers struct {
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
		cache:   &answers{etags: map[string]cachedAnswer{}, assets: map[string][]byte{}},
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
