package ocistore

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/termtext"
)

// Failures that go-containerregistry reports in terms of HTTP, but whose cause and remedy lie
// elsewhere: a certificate the machine does not trust, a scheme that does not match the server,
// a docker config or credential helper that is broken. Each gets a sentence that names the cause
// and the next step, instead of "can't reach the registry".

// diagnose returns the mur error for err when it is one of those failures, else nil.
func (s *registryStore) diagnose(err error, what string) error {
	if tlsErr := untrusted(err); tlsErr != nil {
		return errs.Wrap(err, errs.Network, "%s: the registry at %s presented a TLS certificate this machine does not trust (%v); if your own CA signed it, point SSL_CERT_FILE at the CA's PEM file (or add it to the system's trust store) and try again; if the registry speaks plain HTTP, use --plain-http or plain_http: true for this store",
			what, s.host, oneLine(tlsErr.Error()))
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "server gave HTTP response to HTTPS client") && !isLoopback(hostOnly(s.host)):
		// (On loopback go-containerregistry falls back to plain HTTP, so the HTTPS attempt's
		// failure is expected there and the other attempt's answer is the one that counts.)
		return errs.Wrap(err, errs.Network, "%s: the registry at %s speaks plain HTTP, and mur speaks HTTPS to every host but loopback unless told otherwise; if plain HTTP is intended (a registry on a private network), give --plain-http or write the store as {url: %s, plain_http: true} in config.yaml", what, s.host, s.addr)
	case strings.Contains(msg, "HTTP request to an HTTPS server"):
		return errs.Wrap(err, errs.Network, "%s: the registry at %s speaks HTTPS, and this store is set to plain HTTP; drop --plain-http or plain_http: true for it", what, s.host)
	}
	return nil
}

// untrusted finds a certificate-verification failure in err's chain.
func untrusted(err error) error {
	var cv *tls.CertificateVerificationError
	if errors.As(err, &cv) {
		return cv
	}
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		return ua
	}
	var he x509.HostnameError
	if errors.As(err, &he) {
		return he
	}
	var ci x509.CertificateInvalidError
	if errors.As(err, &ci) {
		return ci
	}
	return nil
}

// oneLine folds the whitespace of a server's message (often an HTML or text body with trailing
// newlines) so that a printed error stays on one line, escapes what a terminal would act on and
// cuts a long body short.
func oneLine(s string) string { return termtext.Foreign(strings.Join(strings.Fields(s), " ")) }

// credentialKeychain names the file or helper behind a credential failure. go-containerregistry
// reports a broken docker config or a missing docker-credential-* helper as a bare error that
// mur would otherwise present as an unreachable registry.
type credentialKeychain struct{ inner authn.Keychain }

var helperName = regexp.MustCompile(`docker-credential-[A-Za-z0-9_.-]+`)

func (k credentialKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	a, err := k.inner.Resolve(target)
	if err == nil {
		return a, nil
	}
	host := target.RegistryStr()
	next := "fix it, then log in again with `docker login " + host + "`, `crane auth login " + host + "` or `oras login " + host + "`"
	if h := helperName.FindString(err.Error()); h != "" {
		return nil, errs.Wrap(err, errs.InvalidConfig, "reading the credentials for %s: the credential helper %s named in %s failed (%s); install it or remove it from credsStore/credHelpers there, or %s",
			host, h, dockerConfigFile(), oneLine(err.Error()), next)
	}
	return nil, errs.Wrap(err, errs.InvalidConfig, "reading the credentials for %s: the registry auth file %s can't be used (%s); %s",
		host, dockerConfigFile(), oneLine(err.Error()), next)
}

// dockerConfigFile is the file go-containerregistry's default keychain reads, by its rules:
// the docker config ($DOCKER_CONFIG or ~/.docker), else $REGISTRY_AUTH_FILE, else podman's.
func dockerConfigFile() string {
	home, _ := os.UserHomeDir()
	exists := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && !fi.IsDir()
	}
	docker := filepath.Join(home, ".docker", "config.json")
	if d := os.Getenv("DOCKER_CONFIG"); d != "" {
		if exists(docker) || exists(filepath.Join(d, "config.json")) {
			return filepath.Join(d, "config.json")
		}
	} else if exists(docker) {
		return docker
	}
	if p := os.Getenv("REGISTRY_AUTH_FILE"); p != "" && exists(p) {
		return p
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && exists(filepath.Join(d, "containers", "auth.json")) {
		return filepath.Join(d, "containers", "auth.json")
	}
	cfg := os.Getenv("XDG_CONFIG_HOME")
	if cfg == "" {
		cfg = filepath.Join(home, ".config")
	}
	if p := filepath.Join(cfg, "containers", "auth.json"); exists(p) {
		return p
	}
	return docker
}

// plainHTTPTransport speaks plain HTTP to the one registry the user chose it for (--plain-http,
// or plain_http: true in config.yaml), the way oras's --plain-http does: go-containerregistry
// would try HTTPS first. Other hosts (a storage redirect) keep their own scheme.
type plainHTTPTransport struct {
	inner http.RoundTripper
	host  string
}

func (t *plainHTTPTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "https" && req.URL.Host == t.host {
		req = req.Clone(req.Context())
		req.URL.Scheme = "http"
	}
	return t.inner.RoundTrip(req)
}
