package registrytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
)

// The one login every Bearer registry here accepts at its token service.
const (
	User     = "alice"
	Password = "s3cret"
)

// Bearer is a registry that wants a Bearer token, as Docker Hub, GHCR and most hosted registries
// do: every request without a valid token gets 401 and a challenge naming the token service,
// which hands out a token for a repository's scope against the Basic login User/Password. The
// token service is served at the registry's own address (/token), so that a plain-HTTP realm is
// on the registry's host and port, the one place mur sends credentials over plain HTTP. It counts
// the requests it answers, by kind.
type Bearer struct {
	*Registry
	enforce bool // check tokens here (the in-process registry has no auth of its own)
	signer  *tokenSigner

	mu      sync.Mutex
	counts  Counts
	issued  map[string]bool
	expired map[string]bool
}

// Counts are the requests a Bearer registry answered, by kind. Ping is GET /v2/; Unauthorized
// counts the 401s it sent (the ping's included).
type Counts struct {
	Ping, Token, Manifest, Blob, Tags, Upload, Other, Unauthorized int
}

// StartBearer runs the real docker-registry with token auth behind a front that serves the token
// service, so that the registry itself checks every token (distribution's JWT check against the
// service's certificate).
func StartBearer(t testing.TB) *Bearer {
	t.Helper()
	signer, err := newTokenSigner()
	if err != nil {
		t.Fatal(err)
	}
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	frontAddr := front.Addr().String()
	dir := t.TempDir()
	cert := filepath.Join(dir, "token-root.pem")
	if err := os.WriteFile(cert, signer.certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	auth := fmt.Sprintf("auth:\n  token:\n    realm: http://%s/token\n    service: %s\n    issuer: %s\n    rootcertbundle: %s\n", frontAddr, tokenService, tokenIssuer, cert)
	back, err := launchWith(Binary, dir, auth)
	if err != nil {
		front.Close()
		unavailable(t, err.Error())
		return nil
	}
	t.Cleanup(back.Stop)
	upstream, _ := url.Parse("http://" + back.Addr())
	b := &Bearer{signer: signer, issued: map[string]bool{}, expired: map[string]bool{}}
	rp := httputil.NewSingleHostReverseProxy(upstream)
	rp.ErrorLog = log.New(discard{}, "", 0) // a client that hangs up mid-blob is a test's business
	b.serve(t, front, rp)
	return b
}

// StartInProcessBearer serves go-containerregistry's in-memory registry behind a Bearer check
// done here, and wrap (a fault middleware, or nil) inside it.
func StartInProcessBearer(t testing.TB, wrap func(http.Handler) http.Handler) *Bearer {
	t.Helper()
	signer, err := newTokenSigner()
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = ggcrregistry.New(ggcrregistry.Logger(log.New(discard{}, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &Bearer{enforce: true, signer: signer, issued: map[string]bool{}, expired: map[string]bool{}}
	b.serve(t, front, h)
	return b
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func (b *Bearer) serve(t testing.TB, ln net.Listener, next http.Handler) {
	srv := &http.Server{Handler: b.handler(next), ErrorLog: log.New(discard{}, "", 0)}
	go srv.Serve(ln)
	b.Registry = &Registry{addr: ln.Addr().String(), stop: func() { srv.Close() }}
	t.Cleanup(b.Registry.Stop)
}

// Counts returns what the registry answered so far.
func (b *Bearer) Counts() Counts {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.counts
}

// Reset sets the counts to zero.
func (b *Bearer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.counts = Counts{}
}

// Expire makes every token issued so far expired: a request that carries one gets 401 and a
// challenge, as it would once a real token's lifetime is over.
func (b *Bearer) Expire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for tok := range b.issued {
		b.expired[tok] = true
	}
}

func (b *Bearer) count(f func(c *Counts)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(&b.counts)
}

func (b *Bearer) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case p == "/token":
			b.count(func(c *Counts) { c.Token++ })
			b.token(w, r)
			return
		case p == "/v2/" || p == "/v2":
			b.count(func(c *Counts) { c.Ping++ })
		case strings.Contains(p, "/manifests/"):
			b.count(func(c *Counts) { c.Manifest++ })
		case strings.Contains(p, "/blobs/uploads"):
			b.count(func(c *Counts) { c.Upload++ })
		case strings.Contains(p, "/blobs/"):
			b.count(func(c *Counts) { c.Blob++ })
		case strings.HasSuffix(p, "/tags/list"):
			b.count(func(c *Counts) { c.Tags++ })
		default:
			b.count(func(c *Counts) { c.Other++ })
		}
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		b.mu.Lock()
		valid := b.issued[tok] && !b.expired[tok]
		stale := b.expired[tok]
		b.mu.Unlock()
		if stale || (b.enforce && !valid) {
			b.challenge(w, r)
			return
		}
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status == http.StatusUnauthorized {
			b.count(func(c *Counts) { c.Unauthorized++ })
		}
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// challenge answers 401 with the challenge distribution sends: the realm, the service and, for a
// repository's path, the scope the request needs.
func (b *Bearer) challenge(w http.ResponseWriter, r *http.Request) {
	b.count(func(c *Counts) { c.Unauthorized++ })
	h := fmt.Sprintf(`Bearer realm="http://%s/token",service=%q`, r.Host, tokenService)
	if repo := repoOf(r.URL.Path); repo != "" {
		action := "pull"
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			action = "pull,push"
		}
		h += fmt.Sprintf(`,scope="repository:%s:%s"`, repo, action)
	}
	w.Header().Set("WWW-Authenticate", h)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`))
}

func repoOf(p string) string {
	rest, ok := strings.CutPrefix(p, "/v2/")
	if !ok {
		return ""
	}
	for _, sep := range []string{"/manifests/", "/blobs/", "/tags/"} {
		if i := strings.Index(rest, sep); i > 0 {
			return rest[:i]
		}
	}
	return ""
}

const (
	tokenService = "registrytest"
	tokenIssuer  = "registrytest-issuer"
)

type access struct {
	Type    string   `json:"type"`
	Name    string   `json:"name"`
	Actions []string `json:"actions"`
}

// token is the token service: GET realm?service=&scope=... with Basic credentials, as the Docker
// token spec has it (go-containerregistry also POSTs an OAuth2 form, which is refused here, so it
// falls back to the GET).
func (b *Bearer) token(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	u, p, ok := r.BasicAuth()
	if !ok || u != User || p != Password {
		w.Header().Set("WWW-Authenticate", `Basic realm="registrytest-token"`)
		http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}`, http.StatusUnauthorized)
		return
	}
	var acc []access
	for _, s := range r.URL.Query()["scope"] {
		for _, one := range strings.Fields(s) {
			parts := strings.Split(one, ":")
			if len(parts) < 3 {
				continue
			}
			acc = append(acc, access{Type: parts[0], Name: strings.Join(parts[1:len(parts)-1], ":"), Actions: strings.Split(parts[len(parts)-1], ",")})
		}
	}
	tok, err := b.signer.sign(u, acc)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	b.mu.Lock()
	b.issued[tok] = true
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"token": tok, "access_token": tok, "expires_in": 300})
}

// tokenSigner signs ES256 JWTs whose x5c header carries its self-signed certificate, the
// registry's rootcertbundle.
type tokenSigner struct {
	key     *ecdsa.PrivateKey
	certDER []byte
	certPEM []byte
}

func newTokenSigner() (*tokenSigner, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "registrytest token signer"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tokenSigner{key: key, certDER: der, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

func (s *tokenSigner) sign(sub string, acc []access) (string, error) {
	b64 := base64.RawURLEncoding.EncodeToString
	now := time.Now()
	hdr, _ := json.Marshal(map[string]any{"typ": "JWT", "alg": "ES256", "x5c": []string{base64.StdEncoding.EncodeToString(s.certDER)}})
	claims, _ := json.Marshal(map[string]any{
		"iss": tokenIssuer, "sub": sub, "aud": tokenService, "exp": now.Add(time.Hour).Unix(),
		"nbf": now.Add(-time.Minute).Unix(), "iat": now.Unix(), "jti": fmt.Sprint(now.UnixNano()), "access": acc,
	})
	signing := b64(hdr) + "." + b64(claims)
	h := sha256.Sum256([]byte(signing))
	r, sv, err := ecdsa.Sign(rand.Reader, s.key, h[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	sv.FillBytes(sig[32:])
	return signing + "." + b64(sig), nil
}
