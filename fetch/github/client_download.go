package github

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/murmur-nexus/mur/internal/errs"
)

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
		c.cache.mu.Lock()
		data, ok := c.cache.assets[key]
		c.cache.mu.Unlock()
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
		c.cache.mu.Lock()
		c.cache.assets[key] = buf.Bytes()
		c.cache.mu.Unlock()
	}
	return buf.Bytes(), nil
}
