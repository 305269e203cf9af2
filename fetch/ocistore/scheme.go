package ocistore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/murmur-nexus/mur/internal/atomicfile"
)

// A loopback registry with no plain_http setting may speak either scheme. go-containerregistry
// asks HTTPS first and HTTP only once the TLS hello failed (or 300 ms later): a plain-HTTP
// registry then costs two round trips (the connection, and the hello its server answers with
// 400) before the ping that counts is even sent. Here the ping is sent over both schemes at once
// and the first good answer wins, and a registry that answered over plain HTTP is remembered in
// the home, as docker remembers insecure registries, so that from the next command on its ping
// goes straight to HTTP and no TLS hello is sent at all. Off loopback nothing changes: plain
// HTTP only when the user chose it (httpsOnlyTransport).

// Schemes remembers, across commands, which loopback registries answered over plain HTTP. It is
// a hint: a registry that stopped speaking plain HTTP is asked over both schemes again, and a
// file that can't be read or written only costs a TLS hello. Safe for concurrent use; nil
// remembers nothing.
type Schemes struct {
	path string

	mu     sync.Mutex
	loaded bool
	plain  map[string]bool // HOST:PORT
}

// NewSchemes returns the memory kept in the file at path ($MURMUR_HOME/registries), read when
// first needed.
func NewSchemes(path string) *Schemes { return &Schemes{path: path} }

// schemesFileMax bounds what is read of the file: a few hundred registries' lines.
const schemesFileMax = 64 << 10

func (s *Schemes) load() {
	if s.loaded {
		return
	}
	s.loaded, s.plain = true, map[string]bool{}
	f, err := os.Open(s.path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(&limitedFile{f: f, left: schemesFileMax})
	for sc.Scan() {
		host, scheme, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if ok && scheme == "http" {
			s.plain[host] = true
		}
	}
}

type limitedFile struct {
	f    *os.File
	left int64
}

func (l *limitedFile) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, os.ErrClosed
	}
	p = p[:min(int64(len(p)), l.left)]
	n, err := l.f.Read(p)
	l.left -= int64(n)
	return n, err
}

// plainHTTP reports whether host answered over plain HTTP last time.
func (s *Schemes) plainHTTP(host string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.load()
	return s.plain[host]
}

// remember records which scheme host answered over, writing the file when that changed.
func (s *Schemes) remember(host string, plain bool) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.load()
	if s.plain[host] == plain {
		return
	}
	if plain {
		s.plain[host] = true
	} else {
		delete(s.plain, host)
	}
	hosts := make([]string, 0, len(s.plain))
	for h := range s.plain {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	var b bytes.Buffer
	b.WriteString("# Loopback registries that answered over plain HTTP; mur asks them over HTTP first.\n")
	for _, h := range hosts {
		b.WriteString(h + " http\n")
	}
	// Only into an existing home: a pull that could not create it has failed already.
	if _, err := os.Stat(filepath.Dir(s.path)); err == nil {
		_ = atomicfile.WriteFile(s.path, b.Bytes(), 0o600)
	}
}

// schemeRace sends a loopback registry's ping (GET /v2/ over HTTPS, as go-containerregistry
// sends it first) over both schemes at once, or over HTTP alone when Schemes remembers that the
// registry speaks it. go-containerregistry then sends its own HTTP ping when the HTTPS one failed
// (or was slow): that one is answered with what the race's HTTP attempt met, and never sent
// again. Every other request passes unchanged: after the ping, the scheme is settled
// (schemeTransport).
type schemeRace struct {
	inner   http.RoundTripper
	host    string
	schemes *Schemes

	mu   sync.Mutex
	last *pinged // the latest ping over HTTPS, raced
}

// pinged is what a raced ping learned of plain HTTP, once done is closed.
type pinged struct {
	done      chan struct{}
	plainErr  error          // why plain HTTP did not answer well; nil when it did or was not asked
	plainResp *http.Response // plain HTTP's own answer, body unread, when it is the registry's word
}

// errPingAnswered answers go-containerregistry's own HTTP ping when the race already settled.
var errPingAnswered = errors.New("the registry's ping was already answered")

func isPing(req *http.Request) bool {
	return req.Method == http.MethodGet && strings.TrimSuffix(req.URL.Path, "/") == "/v2"
}

type raced struct {
	scheme string
	url    string // where it was sent
	resp   *http.Response
	err    error
	cancel context.CancelFunc // ends the attempt; the winner's runs when its body is closed
}

// good is an answer from a server that speaks the scheme it was asked in: a plain-HTTP server
// fails a TLS hello, and a TLS server answers plain HTTP with 400.
func (r raced) good() bool { return r.err == nil && r.resp.StatusCode != http.StatusBadRequest }

// failure says why an attempt that is not good failed.
func (r raced) failure() error {
	if r.err != nil {
		return r.err
	}
	return fmt.Errorf("GET %s: answered %s", r.url, r.resp.Status)
}

// close drops an attempt that lost or failed.
func (r raced) close() {
	if r.err == nil {
		r.resp.Body.Close()
	}
	r.cancel()
}

// keep hands the attempt's answer on; closing its body ends the attempt.
func (r raced) keep() (*http.Response, error) {
	if r.err != nil {
		r.cancel()
		return nil, r.err
	}
	r.resp.Body = &cancelBody{ReadCloser: r.resp.Body, cancel: r.cancel}
	return r.resp, nil
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

func (t *schemeRace) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != t.host || !isPing(req) {
		return t.inner.RoundTrip(req)
	}
	switch req.URL.Scheme {
	case "http":
		t.mu.Lock()
		last := t.last
		t.mu.Unlock()
		if last == nil {
			return t.inner.RoundTrip(req)
		}
		select {
		case <-last.done:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
		t.mu.Lock()
		resp := last.plainResp
		last.plainResp = nil // one reader: go-containerregistry's one HTTP ping
		t.mu.Unlock()
		if resp != nil {
			return resp, nil
		}
		if last.plainErr != nil {
			return nil, last.plainErr
		}
		return nil, errPingAnswered
	case "https":
		p := &pinged{done: make(chan struct{})}
		t.mu.Lock()
		t.last = p
		t.mu.Unlock()
		defer close(p.done)
		return t.ping(req, p)
	}
	return t.inner.RoundTrip(req)
}

// ping sends req, the HTTPS ping, as the race's rules say; p learns how plain HTTP fared.
func (t *schemeRace) ping(req *http.Request, p *pinged) (*http.Response, error) {
	if t.schemes.plainHTTP(t.host) {
		ctx, cancel := context.WithCancel(req.Context())
		r := t.over(req.Clone(ctx), "http", cancel)
		if r.good() {
			return r.keep()
		}
		// It stopped speaking plain HTTP (a TLS server answers it with 400), or is not there.
		resp, err := t.inner.RoundTrip(req)
		if err == nil && resp.StatusCode != http.StatusBadRequest {
			t.schemes.remember(t.host, false)
		}
		t.settlePlain(p, r, err != nil)
		return resp, err
	}
	results := make(chan raced, 2)
	cancels := map[string]context.CancelFunc{}
	for _, scheme := range []string{"https", "http"} {
		ctx, cancel := context.WithCancel(req.Context())
		cancels[scheme] = cancel
		go func() { results <- t.over(req.Clone(ctx), scheme, cancel) }()
	}
	var secure, plain raced
	for i := range 2 {
		r := <-results
		if r.good() {
			t.schemes.remember(t.host, r.scheme == "http")
			if i == 0 {
				for scheme, cancel := range cancels {
					if scheme != r.scheme {
						cancel() // the loser's answer is no longer wanted
					}
				}
				go func() { (<-results).close() }()
			}
			return r.keep()
		}
		if r.scheme == "https" {
			secure = r
		} else {
			plain = r
		}
	}
	// Neither answered well: HTTPS's answer is the one go-containerregistry reports, beside
	// the plain one it then asks for (and gets from p).
	t.settlePlain(p, plain, secure.err != nil)
	return secure.keep()
}

// settlePlain tells p how plain HTTP fared when it did not answer well. When TLS failed at the
// connection, the server speaks plain HTTP and its 400 is its real answer, with the body that
// says why: go-containerregistry's HTTP ping then gets that answer itself. Otherwise only the
// reason is kept.
func (t *schemeRace) settlePlain(p *pinged, plain raced, tlsFailed bool) {
	if tlsFailed && plain.err == nil {
		plain.resp.Body = &cancelBody{ReadCloser: plain.resp.Body, cancel: plain.cancel}
		p.plainResp = plain.resp
		return
	}
	p.plainErr = plain.failure()
	plain.close()
}

// over sends r, a ping of its own whose context cancel ends, in scheme.
func (t *schemeRace) over(r *http.Request, scheme string, cancel context.CancelFunc) raced {
	r.URL.Scheme = scheme
	resp, err := t.inner.RoundTrip(r)
	return raced{scheme: scheme, url: r.URL.Redacted(), resp: resp, err: err, cancel: cancel}
}
