package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/murmur-nexus/mur/fetch/internal/retry"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/termtext"
)

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
		c.cache.mu.Lock()
		cached, hasCached := c.cache.etags[u]
		c.cache.mu.Unlock()
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
			c.cache.mu.Lock()
			c.cache.etags[u] = cachedAnswer{etag: etag, body: data}
			c.cache.mu.Unlock()
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
		case c.oneTry && unanswered(err):
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
