package github

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/murmur-nexus/mur/fetch/internal/download"
	"github.com/murmur-nexus/mur/internal/errs"
)

// AssetRanger serves release asset a of owner/repo in parts, for the pull's resumable and
// parallel downloads (download.Ranger). Its first Open asks the way DownloadAsset does: the
// browser_download_url (no API quota) unless needsToken, else or when that link fails before any
// byte, the API's asset endpoint. Both redirect to a signed storage URL, which later Opens reuse,
// so that the pieces of a large asset cost no further redirect (and, for a private repository, no
// further API call). Signed URLs expire: a storage answer that refuses the URL (400, 401, 403,
// 404 or 410), or no answer at all, makes the Open ask for a fresh redirect, once.
func (c *Client) AssetRanger(owner, repo string, a Asset, needsToken bool) download.Ranger {
	what := fmt.Sprintf("asset %s in %s/%s", a.Name, owner, repo)
	return &assetRanger{c: c, owner: owner, repo: repo, a: a, needsToken: needsToken, what: what}
}

type assetRanger struct {
	c           *Client
	owner, repo string
	a           Asset
	needsToken  bool
	what        string

	mu        sync.Mutex
	storage   string // the signed URL the last redirect led to
	webFailed bool   // the download link failed before its first byte: use the API
}

func (r *assetRanger) Open(ctx context.Context, off, end int64, validator string) (download.Part, error) {
	hdr := http.Header{}
	download.Header(hdr, off, end, validator)
	r.mu.Lock()
	cached := r.storage
	r.mu.Unlock()
	if cached != "" {
		resp, err := r.c.getEvery(ctx, cached, acceptBytes, nil, hdr)
		if err == nil {
			if !refusedLink(resp.StatusCode) {
				return r.part(resp, off, end)
			}
			resp.Body.Close()
		} else if ctx.Err() != nil {
			return download.Part{}, errs.Wrap(err, errs.Network, "fetching %s was abandoned: %v", r.what, err)
		}
		// Expired, or gone silent: a fresh redirect, from where the first one came.
		r.mu.Lock()
		if r.storage == cached {
			r.storage = ""
		}
		r.mu.Unlock()
	}
	return r.resolve(ctx, off, end, hdr)
}

// refusedLink reports whether a storage host's status says the signed URL no longer opens.
func refusedLink(code int) bool {
	switch code {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusGone:
		return true
	}
	return false
}

// resolve asks the download link, else the API (askAsset), and remembers the storage URL it led
// to.
func (r *assetRanger) resolve(ctx context.Context, off, end int64, hdr http.Header) (download.Part, error) {
	r.mu.Lock()
	web := !r.needsToken && !r.webFailed
	r.mu.Unlock()
	var part download.Part
	err := r.c.askAsset(ctx, assetAsk{owner: r.owner, repo: r.repo, a: r.a, web: web, hdr: hdr,
		linkOK: func(resp *http.Response) bool { return r.usable(resp, off, end) },
		linkFailed: func() {
			r.mu.Lock()
			r.webFailed = true
			r.mu.Unlock()
		},
		use: func(resp *http.Response, fromLink bool) (bool, error) {
			if !fromLink {
				switch resp.StatusCode {
				case http.StatusOK, http.StatusPartialContent, http.StatusRequestedRangeNotSatisfiable:
				default:
					again, err := r.c.checkStatus(resp, r.what)
					resp.Body.Close()
					if err == nil {
						err = errs.New(errs.Network, "%s answered %d %s for %s", redact(resp.Request.URL.String()), resp.StatusCode, http.StatusText(resp.StatusCode), r.what)
					}
					return again, err
				}
			}
			p, err := r.part(resp, off, end)
			if err != nil {
				return false, err
			}
			r.remember(resp)
			part = p
			return false, nil
		},
	})
	return part, err
}

// usable reports whether a download link's answer is the asset: not a login page, nor an answer
// of another length. Only then is it worth more than asking the API.
func (r *assetRanger) usable(resp *http.Response, off, end int64) bool {
	switch {
	case mediaType(resp) == "text/html":
		return false
	case resp.StatusCode == http.StatusOK:
		return r.a.Size <= 0 || resp.ContentLength < 0 || resp.ContentLength == r.a.Size
	case resp.StatusCode == http.StatusPartialContent, resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		return download.Ranged(off, end)
	}
	return false
}

// remember keeps the storage URL an answer came from, for the next pieces. An answer from the
// API itself (GitHub may stream an asset directly) is asked again each time.
func (r *assetRanger) remember(resp *http.Response) {
	final := resp.Request.URL
	if r.c.onAPIBase(final) {
		return
	}
	r.mu.Lock()
	r.storage = final.String()
	r.mu.Unlock()
}

// part turns an answer into a download.Part: 206 with exactly the range asked for, or 200 with
// the whole asset (download.Answer); any other status is worded as GitHub's.
func (r *assetRanger) part(resp *http.Response, off, end int64) (download.Part, error) {
	what := r.what + " from " + redact(resp.Request.URL.String())
	if part, handled, err := download.Answer(resp, off, end, r.a.Size, what, nil); handled {
		return part, err
	}
	defer resp.Body.Close()
	if _, err := r.c.checkStatus(resp, r.what); err != nil {
		return download.Part{}, err
	}
	return download.Part{}, errs.New(errs.Network, "%s answered %d %s for %s", redact(resp.Request.URL.String()), resp.StatusCode, http.StatusText(resp.StatusCode), r.what)
}
