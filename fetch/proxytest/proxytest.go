// Package proxytest is a loopback HTTP proxy for tests that puts a bad network between mur and a
// server: it counts the body bytes it serves, adds a round trip's latency, caps each connection's
// bandwidth, hides Range support, and cuts, stalls, silences or hangs up on answers. Tests of
// fetch, fetch/ocistore, fetch/github and the end-to-end suite all put it in front of their
// fakes:
//
//	p := proxytest.Start(t, reg.Addr(), proxytest.Options{Fault: proxytest.Cut, After: 1 << 20, Times: 1})
//	// point mur at p.Addr() instead of reg.Addr(), pull, then:
//	p.BytesServed("/v2/murmur/acme/big/blobs/")
//	p.Set(proxytest.Options{}) // the next phase: a clean network
//
// It works at the HTTP level, one response at a time. Plain HTTP/1.1 carries one response per
// connection at a time, so a per-response cap or fault is a per-connection one. Redirects pass
// through unchanged: a redirect to another host leaves the proxy behind (put a second proxy in
// front of that host). The Host header is kept, so a server that builds absolute URLs from it
// (docker-registry's upload locations) sends the client back through the proxy.
package proxytest

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fault is what goes wrong with an answer.
type Fault int

const (
	// NoFault forwards answers whole.
	NoFault Fault = iota
	// Cut sends the status, headers and After body bytes, then drops the connection, as a reset
	// link does. The client sees a body that ends early.
	Cut
	// Stall sends the status, headers and After body bytes, then nothing more, holding the
	// connection open until the client gives up or the proxy closes.
	Stall
	// Silence accepts the request and sends nothing at all, not even a status, until the client
	// gives up or the proxy closes.
	Silence
	// Hangup drops the connection as soon as the request arrives, without an answer.
	Hangup
)

func (f Fault) String() string {
	switch f {
	case NoFault:
		return "none"
	case Cut:
		return "cut"
	case Stall:
		return "stall"
	case Silence:
		return "silence"
	case Hangup:
		return "hangup"
	}
	return "unknown"
}

// Options say how the proxy misbehaves. The zero value forwards everything faithfully.
type Options struct {
	// PathContains limits everything below to requests whose path contains it ("/blobs/" for
	// registry blobs); "" means every request. Counting always covers every request.
	PathContains string
	// BytesPerSecond, when positive, paces each response body to that rate.
	BytesPerSecond int64
	// IgnoreRange removes Range and If-Range from requests, so the server answers with whole
	// bodies, as one that does not support ranges does.
	IgnoreRange bool
	// Fault is inflicted on matching answers, After body bytes into them (Cut and Stall); an
	// answer no longer than that is sent whole.
	Fault Fault
	After int64
	// Times bounds how many answers the fault hits from the moment these Options take effect;
	// 0 means every matching answer.
	Times int
	// OnFault, when set, is called as each fault is inflicted, before the client can see it: a
	// test's event for "the download just broke off" that needs no clock.
	OnFault func()
	// RTT, when positive, is the round trip of the network between client and upstream (see
	// latency.go): a new connection costs one RTT before its first request arrives, a request
	// arrives RTT/2 after it was sent, and each chunk of the answer RTT/2 after the upstream gave
	// it, in order, with no bandwidth cap. It applies to every request, whatever PathContains.
	RTT time.Duration
}

// Proxy is a running proxy on 127.0.0.1. It is safe for concurrent use.
type Proxy struct {
	upstream  *url.URL
	srv       *httptest.Server
	transport *http.Transport
	ctx       context.Context // ends on Close, which ends every stall and pending request
	cancel    context.CancelFunc
	clock     clock
	stamped   func(delayedChunk)
	closeOnce sync.Once

	mu     sync.Mutex
	opt    Options
	hits   int // faults inflicted under opt
	faults int // faults inflicted in the proxy's life
	conns  int
	paths  map[string]*pathStats
	log    []Logged
	// accepted numbers the connections for the log; unlike conns, ResetLog leaves it.
	accepted int
}

type pathStats struct {
	requests int
	bytes    int64
}

// Start runs a proxy to upstream, an http:// URL or a host:port, and closes it when the test
// ends.
func Start(t testing.TB, upstream string, opt Options) *Proxy {
	t.Helper()
	return start(t, upstream, opt, realClock{}, nil)
}

// start is Start on a clock of the caller's; stamped, when not nil, hears of every body chunk
// the latency delays (see latency.go), so that tests can follow it.
func start(t testing.TB, upstream string, opt Options, clk clock, stamped func(delayedChunk)) *Proxy {
	t.Helper()
	if !strings.Contains(upstream, "://") {
		upstream = "http://" + upstream
	}
	u, err := url.Parse(upstream)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		t.Fatalf("proxytest: upstream %q is not an http URL or host:port", upstream)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		upstream: u,
		// Its own transport: no environment proxy, and no transparent gzip, which would change
		// the bytes counted and the headers passed on.
		transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			DisableCompression:  true,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     30 * time.Second,
		},
		ctx:     ctx,
		cancel:  cancel,
		clock:   clk,
		stamped: stamped,
		opt:     opt,
		paths:   map[string]*pathStats{},
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	p.srv.Config.ConnContext = p.connContext
	p.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			p.mu.Lock()
			p.conns++
			p.mu.Unlock()
		}
	}
	p.srv.Start()
	t.Cleanup(p.Close)
	return p
}

// URL is the proxy's base URL, http://127.0.0.1:PORT.
func (p *Proxy) URL() string { return p.srv.URL }

// Addr is the proxy's host:port, for configuration that takes a registry address.
func (p *Proxy) Addr() string { return strings.TrimPrefix(p.srv.URL, "http://") }

// Set replaces the options from the next request on; answers already under way keep theirs. It
// restarts the count that Times bounds.
func (p *Proxy) Set(opt Options) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.opt, p.hits = opt, 0
}

// Options are the options in effect.
func (p *Proxy) Options() Options {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.opt
}

// BytesServed is the number of body bytes sent to clients for requests whose path starts with
// pathPrefix ("" for all).
func (p *Proxy) BytesServed(pathPrefix string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for path, s := range p.paths {
		if strings.HasPrefix(path, pathPrefix) {
			n += s.bytes
		}
	}
	return n
}

// Requests is the number of requests received whose path starts with pathPrefix ("" for all).
func (p *Proxy) Requests(pathPrefix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for path, s := range p.paths {
		if strings.HasPrefix(path, pathPrefix) {
			n += s.requests
		}
	}
	return n
}

// Served is the body bytes sent so far, by request path.
func (p *Proxy) Served() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int64, len(p.paths))
	for path, s := range p.paths {
		out[path] = s.bytes
	}
	return out
}

// Faults is the number of answers cut, stalled, silenced or hung up on so far.
func (p *Proxy) Faults() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults
}

// Connections is the number of client connections accepted so far.
func (p *Proxy) Connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns
}

// Close stops the proxy: stalled and pending answers end, every connection closes, and Close
// returns once every handler has.
func (p *Proxy) Close() {
	p.closeOnce.Do(func() {
		p.cancel()
		p.srv.CloseClientConnections()
		p.srv.Close()
		p.transport.CloseIdleConnections()
	})
}

// hops are the hop-by-hop headers, which describe one connection and are never forwarded.
var hops = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}
