// Package ocistore implements fetch.Store for OCI registries (oci://HOST[:PORT]/PREFIX) and OCI
// image-layout folders (oci-layout:PATH), as SPEC section 7 lays out.
//
// Both kinds hold the same shapes. acme/grep@1.2.0 lives at repository PREFIX/acme/grep (in a
// layout, at ref name acme/grep:1.2.0) and tag 1.2.0, with '+' written as '_'. A platform-independent
// version's tag points straight at an OCI image manifest whose artifactType is
// application/vnd.murmur.artifact.v1, whose config is the empty descriptor and whose single layer
// is the packed artifact. A version that has any platform-specific payload is an OCI image index
// instead, with one manifest per platform, each named by the dev.murmur.artifact.platform
// annotation (and, for tools that look there, the platform field).
//
// The stores do not verify payload bytes: Open streams what the store serves and the caller
// hashes it on its way into the CAS. That keeps the hot path to a single hash, and it means a
// registry that serves wrong bytes is caught by the caller, not here. Manifests, which are small,
// are checked here: their shape strictly, and in a layout folder their digests too.
//
// # Files
//
//   - ocistore.go: opening a store by address; registry.go: a registry; layout.go: a layout folder
//     read, layout_push.go: written; layout_referrers.go: a layout's bundles.
//   - manifest.go: the manifests and indexes both kinds hold, and reading a tag;
//     manifest_push.go: what a push adds; manifest_tags.go: versions from tags, and latest.
//   - blobranger.go: a blob read in parts; referrers.go, referrers_lookup.go: Sigstore bundles as
//     OCI referrers; addressed.go: the digests crane and oras address.
//   - auth.go, prepare.go, transport.go: one authenticated, bounded transport per registry;
//     scheme.go: a loopback registry's scheme, raced and remembered;
//     diagnose.go, missing.go: failures said in the user's terms.
package ocistore

import (
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
)

// Options tune how a store talks to a registry. A layout folder ignores them.
type Options struct {
	// Keychain finds credentials for a registry; nil means authn.DefaultKeychain, which reads the
	// docker config (~/.docker/config.json and its credential helpers).
	Keychain authn.Keychain
	// Transport carries requests; nil means a transport with bounded dial, TLS and header
	// timeouts. Either way, ocistore adds the idle timeout and the retries on top.
	Transport http.RoundTripper
	// Timeout bounds each request's wait for a response and every pause in a response body;
	// 0 means DefaultTimeout. A stalled transfer ends after this long without a byte.
	Timeout time.Duration
	// Retries is how many times a transient failure (a network error, 408, 429, 500, 502, 503,
	// 504) is retried; 0 means DefaultRetries, a negative value means none.
	Retries int
	// UserAgent is sent with every request when set.
	UserAgent string
	// PlainHTTP speaks plain HTTP to the registry, as oras's --plain-http does. mur never does
	// so on its own off loopback: credentials would cross the network in the clear.
	PlainHTTP bool
	// Schemes, when set, remembers across commands which loopback registries speak plain HTTP,
	// so that their ping sends no TLS hello first (scheme.go); nil remembers nothing.
	Schemes *Schemes
	// Pool, when set, shares one authenticated transport per registry among the stores opened
	// with it; nil gives the store its own.
	Pool *Pool
}

// Defaults of Options.
const (
	DefaultTimeout = 30 * time.Second
	DefaultRetries = 4
)

const (
	schemeRegistry = "oci://"
	schemeLayout   = "oci-layout:"
	acceptedForms  = "oci://HOST[:PORT]/PREFIX or oci-layout:PATH"
)

// Open returns the store at addr, which is oci://HOST[:PORT]/PREFIX or oci-layout:PATH. It makes
// no request and creates nothing.
func Open(addr string, opt Options) (store.Store, error) {
	switch {
	case strings.HasPrefix(addr, schemeRegistry):
		return openRegistry(addr, opt)
	case strings.HasPrefix(addr, schemeLayout):
		return openLayout(addr)
	}
	return nil, errs.New(errs.InvalidConfig, "store %q is not a store address; write %s", addr, acceptedForms)
}
