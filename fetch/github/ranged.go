package github

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/internal/errs"
)

// AssetRanger serves release asset a of owner/repo in parts, for the pull's resumable and
// parallel downloads (fetch.Ranger). Its first Open asks the way DownloadAsset does: the
// browser_download_url (no API quota) unless needsToken, else or when that link fails before any
// byte, the API's asset endpoint. Both redirect to a signed storage URL, which later Opens reuse,
// so that the pieces of a large asset cost no further redirect (and, for a private repository, no
// further API call). Signed URLs expire: a storage answer that refuses the URL (400, 401, 403,
// 404 or 410), or no answer at all, makes the Open ask for a fresh redirect, once.
func (c *Client) AssetRanger(owner, repo string, a Asset, needsToken bool) fetch.Ranger {
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

func (r *assetRanger) Open(ctx context.Context, off, end int64, validator string) (fetch.Part, error) {
	hdr := http.Header{}
	if off != 0 || end >= 0 {
		hdr.Set("Range", fmt.Sprintf("bytes=%d-%d", off, end))
		if validator != "" {
			hdr.Set("If-Range", validator)
		}
	}
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
			return fetch.Part{}, errs.Wrap(err, errs.Network, "fetching %s was abandoned: %v", r.what, err)
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

// resolve asks the download link, else the API, and remembers the storage URL it led to.
func (r *assetRanger) resolve(ctx context.Context, off, end int64, hdr http.Header) (fetch.Part, error) {
	r.mu.Lock()
	tryWeb := !r.needsToken && !r.webFailed
	r.mu.Unlock()
	if link, ok := r.c.downloadLink(r.a); ok && tryWeb {
		resp, err := r.c.getEvery(ctx, link, acceptBytes, nil, hdr)
		if err == nil {
			if r.usable(resp, off, end) {
				r.remember(resp)
				return r.part(resp, off, end)
			}
			resp.Body.Close()
		}
		if ctx.Err() != nil {
			return fetch.Part{}, errs.Wrap(ctx.Err(), errs.Network, "fetching %s was abandoned: %v", r.what, ctx.Err())
		}
		// Why no longer matters: the API answers instead, and its error is the one to report.
		r.mu.Lock()
		r.webFailed = true
		r.mu.Unlock()
	}
	u := r.c.apiURL("repos", r.owner, r.repo, "releases", "assets", strconv.FormatInt(r.a.ID, 10))
	var part fetch.Part
	err := r.c.retry(ctx, u, func(ctx context.Context) (bool, error) {
		resp, err := r.c.getEvery(ctx, u, acceptBytes, nil, hdr)
		if err != nil {
			return true, err
		}
		switch resp.StatusCode {
		case http.StatusOK, http.StatusPartialContent, http.StatusRequestedRangeNotSatisfiable:
		default:
			again, err := r.c.checkStatus(resp, r.what)
			resp.Body.Close()
			if err == nil {
				err = errs.New(errs.Network, "%s answered %d %s for %s", redact(u), resp.StatusCode, http.StatusText(resp.StatusCode), r.what)
			}
			return again, err
		}
		p, err := r.part(resp, off, end)
		if err != nil {
			return false, err
		}
		r.remember(resp)
		part = p
		return false, nil
	})
	return part, err
}

// usable reports whether a download link's answer is the asset: not a login page, nor an answer
// of another length. Only then is it worth more than asking the API.
func (r *assetRanger) usable(resp *http.Response, off, end int64) bool {
	mediaType := strings.ToLower(strings.TrimSpace(strings.Split(resp.Header.Get("Content-Type"), ";")[0]))
	switch {
	case mediaType == "text/html":
		return false
	case resp.StatusCode == http.StatusOK:
		return r.a.Size <= 0 || resp.ContentLength < 0 || resp.ContentLength == r.a.Size
	case resp.StatusCode == http.StatusPartialContent, resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		return off != 0 || end >= 0
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

// part turns an answer into a fetch.Part: 206 with exactly the range asked for, or 200 with the
// whole asset.
func (r *assetRanger) part(resp *http.Response, off, end int64) (fetch.Part, error) {
	where := redact(resp.Request.URL.String())
	etag := strings.TrimSpace(resp.Header.Get("ETag"))
	if strings.HasPrefix(etag, "W/") || len(etag) < 2 || etag[0] != '"' || etag[len(etag)-1] != '"' {
		etag = ""
	}
	ranged := off != 0 || end >= 0
	switch {
	case resp.StatusCode == http.StatusPartialContent && ranged:
		want := fmt.Sprintf("bytes %d-%d/%d", off, end, r.a.Size)
		got := strings.TrimSpace(resp.Header.Get("Content-Range"))
		if got != want || (resp.ContentLength >= 0 && resp.ContentLength != end-off+1) {
			resp.Body.Close()
			return fetch.Part{}, errs.Wrap(fmt.Errorf("%w: asked for %s, got Content-Range %q", fetch.ErrNoRanges, want, got), errs.Network,
				"%s answered a request for bytes %d-%d of %s with Content-Range %q", where, off, end, r.what, got)
		}
		return fetch.Part{Body: &assetBody{body: resp.Body, want: end - off + 1, what: r.what, where: where}, Validator: etag}, nil
	case resp.StatusCode == http.StatusOK:
		return fetch.Part{Body: &assetBody{body: resp.Body, want: resp.ContentLength, what: r.what, where: where}, Whole: true, Validator: etag}, nil
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		resp.Body.Close()
		return fetch.Part{}, errs.Wrap(fmt.Errorf("%w: bytes %d-%d: HTTP 416", fetch.ErrNoRanges, off, end), errs.Network,
			"%s refused bytes %d-%d of %s (HTTP 416)", where, off, end, r.what)
	}
	defer resp.Body.Close()
	if _, err := r.c.checkStatus(resp, r.what); err != nil {
		return fetch.Part{}, err
	}
	return fetch.Part{}, errs.New(errs.Network, "%s answered %d %s for %s", where, resp.StatusCode, http.StatusText(resp.StatusCode), r.what)
}

// assetBody is an answer's body that ends with an error when it breaks off before the length
// announced, and refuses bytes past it.
type assetBody struct {
	body  io.ReadCloser
	want  int64 // -1 when unknown
	got   int64
	what  string
	where string
}

func (b *assetBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.got += int64(n)
	if b.want >= 0 && b.got > b.want {
		return n, errs.New(errs.Integrity, "%s sent more of %s than the %d bytes it announced", b.where, b.what, b.want)
	}
	switch {
	case err == io.EOF && b.want >= 0 && b.got < b.want:
		return n, errs.Wrap(io.ErrUnexpectedEOF, errs.Network, "the download of %s from %s broke off after %d of %d bytes", b.what, b.where, b.got, b.want)
	case err != nil && err != io.EOF:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return n, errs.Wrap(err, errs.Network, "the download of %s from %s broke off after %d bytes: %v", b.what, b.where, b.got, err)
	}
	return n, err
}

func (b *assetBody) Close() error { return b.body.Close() }
