package ocistore

import (
	"net"
	"net/http"
	"time"
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
		// Larger socket reads mean fewer syscalls on a 256 MiB blob.
		ReadBufferSize:  256 << 10,
		WriteBufferSize: 256 << 10,
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

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
