package ocistore

import (
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/murmur-nexus/mur/internal/errs"
)

// newBaseTransport bounds every phase that net/http leaves unbounded by default: go-containerregistry's
// DefaultTransport has no ResponseHeaderTimeout, so a registry that accepts and then stalls would
// hang a pull forever.
func newBaseTransport(timeout time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   50,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		ExpectContinueTimeout: time.Second,
		// Blobs are already compressed zips; asking for gzip would only cost CPU.
		DisableCompression: true,
		// A blob's body is read straight into the download's 1 MiB chunks, past this buffer,
		// so it serves headers and small answers; each connection makes its own, and a
		// project's fan-out opens dozens. Requests are small: the write buffer stays default.
		ReadBufferSize: 32 << 10,
	}
}

// httpsOnlyTransport refuses plain HTTP to anything but the loopback interface.
// go-containerregistry would also use plain HTTP for private (RFC 1918) addresses and *.local
// names, where credentials would cross a network in the clear.
type httpsOnlyTransport struct {
	inner http.RoundTripper
	host  string // the registry's HOST[:PORT]; redirects to storage elsewhere are left alone
}

func (t *httpsOnlyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && req.URL.Host == t.host && !isLoopback(req.URL.Hostname()) {
		req = req.Clone(req.Context())
		req.URL.Scheme = "https"
	}
	return t.inner.RoundTrip(req)
}

// credentialGuard holds credentials to the registry they are for. Plain HTTP carries them only
// to the store's own registry (a loopback one, or one the user chose plain HTTP for): a token
// realm that the registry names on another host or port must be HTTPS, since
// go-containerregistry would send it the docker config's password in the clear (it refuses
// loopback and private IP literals there, but not "localhost" or a name).
type credentialGuard struct {
	inner http.RoundTripper
	host  string // the registry's HOST[:PORT]
}

func (t *credentialGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && req.URL.Host != t.host && carriesCredentials(req) {
		return nil, errs.New(errs.Denied, "refusing to send the registry credentials for %s over plain HTTP to %s; over plain HTTP mur sends them only to the registry itself, so serve that endpoint over HTTPS", t.host, req.URL.Host)
	}
	resp, err := t.inner.RoundTrip(req)
	if err != nil || req.URL.Host != t.host {
		return resp, err
	}
	if realm := plainRealmElsewhere(resp, t.host); realm != "" {
		resp.Body.Close()
		return nil, errs.New(errs.Denied, "the registry at %s names its token service %s, on another host or port over plain HTTP, where the docker config's credentials would travel in the clear; mur refuses it: a token realm on another host or port must be HTTPS, so fix the registry's auth configuration", t.host, realm)
	}
	return resp, nil
}

// carriesCredentials reports whether req holds what a token exchange sends: an Authorization
// header, or the form of an OAuth2 token request (go-containerregistry posts a password or a
// refresh token in the body).
func carriesCredentials(req *http.Request) bool {
	return req.Header.Get("Authorization") != "" ||
		(req.Method == http.MethodPost && strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded"))
}

// plainRealmElsewhere is the realm of a Bearer challenge in resp when it is plain HTTP on another
// host or port than host, else "".
func plainRealmElsewhere(resp *http.Response, host string) string {
	for _, h := range resp.Header.Values("WWW-Authenticate") {
		scheme, params, _ := strings.Cut(strings.TrimSpace(h), " ")
		if !strings.EqualFold(scheme, "bearer") {
			continue
		}
		for _, p := range strings.Split(params, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if !ok || !strings.EqualFold(strings.TrimSpace(k), "realm") {
				continue
			}
			realm := strings.Trim(strings.TrimSpace(v), `"`)
			u, err := url.Parse(realm)
			if err != nil || !strings.EqualFold(u.Scheme, "https") && u.Host != host {
				return realm
			}
		}
	}
	return ""
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
