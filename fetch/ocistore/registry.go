package ocistore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/internal/download"
	"github.com/murmur-nexus/mur/fetch/internal/retry"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// registryStore is a store in an OCI registry.
type registryStore struct {
	addr     string // oci://HOST[:PORT]/PREFIX, normalised
	host     string // HOST[:PORT]
	prefix   string // may be empty
	nameOpts []name.Option
	keychain authn.Keychain
	rt       http.RoundTripper // bounded, retrying; go-containerregistry adds auth on top
	timeout  time.Duration
	auth     *registryAuth // shared by every pull-side request to this registry (auth.go)
	found    *lookups      // what resolves learned that bundle look-ups reuse (referrers_lookup.go)
}

func openRegistry(addr string, opt Options) (store.Store, error) {
	rest := strings.TrimPrefix(addr, schemeRegistry)
	host, prefix, _ := strings.Cut(rest, "/")
	prefix = strings.Trim(prefix, "/")
	bad := func(why string) error {
		return errs.New(errs.InvalidConfig, "store %q: %s; write %s, e.g. oci://registry.internal:5000/murmur", addr, why, acceptedForms)
	}
	if host == "" {
		return nil, bad("the registry host is missing")
	}
	var nameOpts []name.Option
	if isLoopback(hostOnly(host)) {
		nameOpts = append(nameOpts, name.Insecure)
	}
	sample := host + "/" + strings.TrimPrefix(prefix+"/scope/name", "/")
	if _, err := name.NewRepository(sample, nameOpts...); err != nil {
		return nil, bad(fmt.Sprintf("%q is not a valid registry and repository prefix (%v)", host+"/"+prefix, err))
	}
	timeout := opt.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	retries := opt.Retries
	switch {
	case retries == 0:
		retries = DefaultRetries
	case retries < 0:
		retries = 0
	}
	var base http.RoundTripper = opt.Transport
	if base == nil {
		base = newBaseTransport(timeout)
	}
	var rt http.RoundTripper = &httpsOnlyTransport{inner: base, host: host}
	switch {
	case opt.PlainHTTP:
		rt = &plainHTTPTransport{inner: base, host: host}
	case isLoopback(hostOnly(host)):
		rt = &schemeRace{inner: rt, host: host, schemes: opt.Schemes}
	}
	rt = &credentialGuard{inner: rt, host: host}
	rt = retry.IdleTimeout(rt, timeout)
	rt = &retry.Transport{Inner: rt, Policy: retry.Policy{Retries: retries, Backoff: 250 * time.Millisecond, MaxWait: 20 * time.Second}}
	if opt.UserAgent != "" {
		rt = transport.NewUserAgent(rt, opt.UserAgent)
	}
	kc := opt.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	kc = credentialKeychain{kc}
	normal := schemeRegistry + host
	if prefix != "" {
		normal += "/" + prefix
	}
	reg, err := name.NewRegistry(host, nameOpts...)
	if err != nil {
		return nil, bad(fmt.Sprintf("%q is not a valid registry (%v)", host, err))
	}
	key := host
	if opt.PlainHTTP {
		key += " plain-http"
	}
	auth := opt.Pool.get(key, func() *registryAuth { return newRegistryAuth(reg, rt, kc) })
	return &registryStore{addr: normal, host: host, prefix: prefix, nameOpts: nameOpts, keychain: kc, rt: rt, timeout: timeout, auth: auth, found: newLookups()}, nil
}

// hostOnly strips the port and the IPv6 brackets from HOST[:PORT].
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

func (s *registryStore) String() string { return s.addr }

func (s *registryStore) repoPath(n ref.Name) string {
	if s.prefix == "" {
		return n.String()
	}
	return s.prefix + "/" + n.String()
}

func (s *registryStore) repository(repo string) (name.Repository, error) {
	r, err := name.NewRepository(s.host+"/"+repo, s.nameOpts...)
	if err != nil {
		return name.Repository{}, errs.Wrap(err, errs.Usage, "%s: %q is not a valid repository name (%v)", s.addr, repo, err)
	}
	return r, nil
}

func (s *registryStore) where(repo, tag string) string {
	w := schemeRegistry + s.host + "/" + repo
	if tag != "" {
		w += ":" + tag
	}
	return w
}

// pullOptions are go-containerregistry's remote options for reading repository r: through the
// registry's one authenticated transport, so that the call neither pings nor fetches a token.
func (s *registryStore) pullOptions(ctx context.Context, r name.Repository) ([]remote.Option, error) {
	rt, err := s.client(ctx, r)
	if err != nil {
		return nil, err
	}
	// A transport.Wrapper is used as it is: go-containerregistry adds no retries or user agent
	// of its own around it (s.rt has both).
	return []remote.Option{remote.WithContext(ctx), remote.WithTransport(rt), remote.WithJobs(1)}, nil
}

// options are go-containerregistry's remote options for one call that writes (a push), which
// needs the push scope and so authenticates for itself. Its own retries are off: s.rt retries,
// and honours Retry-After.
func (s *registryStore) options(ctx context.Context) []remote.Option {
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(s.keychain),
		remote.WithTransport(s.rt),
		remote.WithRetryPredicate(func(error) bool { return false }),
		remote.WithRetryStatusCodes(),
		remote.WithRetryBackoff(remote.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1}),
		remote.WithJobs(1),
	}
}

// classify turns an error of go-containerregistry or net/http into a mur error about what.
func (s *registryStore) classify(err error, what string) error {
	if err == nil {
		return nil
	}
	var me *errs.Error
	if errors.As(err, &me) {
		return err
	}
	if d := s.diagnose(err, what); d != nil {
		return d
	}
	var te *transport.Error
	if errors.As(err, &te) {
		codes := map[transport.ErrorCode]bool{}
		for _, d := range te.Errors {
			codes[d.Code] = true
		}
		switch {
		case te.StatusCode == http.StatusNotFound || codes[transport.ManifestUnknownErrorCode] || codes[transport.NameUnknownErrorCode] || codes[transport.BlobUnknownErrorCode]:
			return errs.Wrap(err, errs.NotFound, "%s: not found in the registry; check the name and version, or push it there first", what)
		case te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden || codes[transport.UnauthorizedErrorCode] || codes[transport.DeniedErrorCode]:
			return errs.Wrap(err, errs.Denied, "%s: the registry refused access (HTTP %d); log in with `docker login %s` or check the credentials in the docker config", what, te.StatusCode, s.host)
		case te.StatusCode == http.StatusMethodNotAllowed:
			// Debian's docker-registry answers every write with 405 UNSUPPORTED when it runs as a
			// pull-through cache (proxy:), as do read-only registries: no retry or login helps.
			return errs.Wrap(err, errs.Denied, "%s: the registry at %s does not accept writes (HTTP %d): it is read-only, or a pull-through cache; push to the registry it serves instead", what, s.host, te.StatusCode)
		case codes[transport.DigestInvalidErrorCode] || codes[transport.SizeInvalidErrorCode]:
			return errs.Wrap(err, errs.Integrity, "%s: the registry found that the uploaded bytes do not match their digest or size (%s)", what, oneLine(te.Error()))
		case te.StatusCode == http.StatusTooManyRequests || te.StatusCode >= 500:
			return errs.Wrap(err, errs.Network, "%s: the registry at %s kept failing with HTTP %d after retries; try again later", what, s.host, te.StatusCode)
		}
		return errs.Wrap(err, errs.Network, "%s: the registry at %s answered HTTP %d (%s)", what, s.host, te.StatusCode, oneLine(te.Error()))
	}
	if errors.Is(err, retry.ErrStalled) {
		return errs.Wrap(err, errs.Network, "%s: the registry at %s stalled: %v; check the network or raise the timeout", what, s.host, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return errs.Wrap(err, errs.Network, "%s: interrupted: %v", what, err)
	}
	return errs.Wrap(err, errs.Network, "%s: can't reach the registry at %s: %s; check that it is running and reachable", what, s.host, oneLine(err.Error()))
}

// root implements manifestReader.
func (s *registryStore) root(ctx context.Context, repo, tag string) (types.MediaType, []byte, error) {
	r, err := s.repository(repo)
	if err != nil {
		return "", nil, err
	}
	opts, err := s.pullOptions(ctx, r)
	if err != nil {
		return "", nil, s.classify(err, s.where(repo, tag))
	}
	d, err := remote.Get(r.Tag(tag), opts...)
	if err != nil {
		return "", nil, s.classify(err, s.where(repo, tag))
	}
	mt := d.MediaType
	if i := strings.IndexByte(string(mt), ';'); i >= 0 {
		mt = types.MediaType(strings.TrimSpace(string(mt[:i])))
	}
	if mt != types.OCIManifestSchema1 && mt != types.OCIImageIndex {
		// Some registries send a generic Content-Type; the document's own mediaType then decides.
		var probe struct {
			MediaType types.MediaType `json:"mediaType"`
		}
		if json.Unmarshal(d.Manifest, &probe) == nil && (mt == "" || mt == "application/json" || mt == "application/octet-stream") {
			mt = probe.MediaType
		}
	}
	return mt, d.Manifest, nil
}

// child implements manifestReader.
func (s *registryStore) child(ctx context.Context, repo string, c v1.Descriptor) ([]byte, error) {
	r, err := s.repository(repo)
	if err != nil {
		return nil, err
	}
	opts, err := s.pullOptions(ctx, r)
	if err != nil {
		return nil, s.classify(err, s.where(repo, "")+"@"+c.Digest.String())
	}
	d, err := remote.Get(r.Digest(c.Digest.String()), opts...)
	if err != nil {
		return nil, s.classify(err, s.where(repo, "")+"@"+c.Digest.String())
	}
	return d.Manifest, nil
}

func (s *registryStore) Resolve(ctx context.Context, n ref.Name, version, platform string) (store.Descriptor, error) {
	repo := s.repoPath(n)
	tag := ref.TagFromVersion(version)
	var listed []string
	if version == ref.Latest {
		r, err := s.repository(repo)
		if err != nil {
			return store.Descriptor{}, err
		}
		opts, err := s.pullOptions(ctx, r)
		if err != nil {
			return store.Descriptor{}, s.classify(err, fmt.Sprintf("listing the versions of %s at %s", n, s.where(repo, "")))
		}
		tags, err := remote.List(r, opts...)
		if err != nil {
			err = s.classify(err, fmt.Sprintf("listing the versions of %s at %s", n, s.where(repo, "")))
			return store.Descriptor{}, explainMiss(err, s.addr, n, version, func() ([]string, error) { return nil, err }, func() []string { return s.artifactNames(ctx) })
		}
		tag, err = latestTag(s.where(repo, ""), n, tags)
		if err != nil {
			return store.Descriptor{}, err
		}
		listed = listedVersions(tags)
	} else if err := ref.ValidateVersion(version); err != nil {
		return store.Descriptor{}, err
	}
	d, sub, err := resolveTag(ctx, s, repo, tag, n, version, platform)
	if err != nil {
		return store.Descriptor{}, explainMiss(err, s.addr, n, version, func() ([]string, error) { return s.registryTags(ctx, repo) }, func() []string { return s.artifactNames(ctx) })
	}
	s.found.subject(repo, tag, d.Digest, sub)
	d.Origin, d.Versions = s.addr, listed
	return d, nil
}

func (s *registryStore) Open(ctx context.Context, n ref.Name, d digest.Digest) (io.ReadCloser, error) {
	// The blob is fetched with a plain GET rather than remote.Layer(...).Compressed(), which
	// hashes every byte to verify it: the caller hashes on its way into the CAS anyway, and one
	// hash instead of two is what makes a cold pull fast.
	rt, u, what, err := s.blobURL(ctx, n, d)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, errs.Wrap(err, errs.Internal, "%s: %v", what, err)
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return nil, s.classify(err, what)
	}
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		resp.Body.Close()
		return nil, s.classify(err, what)
	}
	return download.NewBody(resp.Body, resp.ContentLength, what, func(err error) error { return s.classify(err, what) }), nil
}

// rawManifest is a manifest or index as the bytes to send.
type rawManifest struct {
	raw []byte
	mt  types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }

func (s *registryStore) Push(ctx context.Context, desc store.Descriptor, payload io.Reader) error {
	if err := checkPushDescriptor(s.addr, desc); err != nil {
		return err
	}
	repo := s.repoPath(desc.Name)
	tag := ref.TagFromVersion(desc.Version)
	where := s.where(repo, tag)
	r, err := s.repository(repo)
	if err != nil {
		return err
	}
	plan, err := planPush(ctx, s, repo, tag, desc)
	if err != nil || plan.noop {
		return err
	}
	opts := s.options(ctx)
	if err := remote.WriteLayer(r, static.NewLayer(emptyConfig, types.MediaType(emptyConfigType)), opts...); err != nil {
		return s.classify(err, "uploading the empty config to "+where)
	}
	layer := &payloadLayer{desc: desc, r: payload}
	if err := remote.WriteLayer(r, layer, opts...); err != nil {
		if layer.err != nil {
			return layer.err
		}
		return s.classify(err, fmt.Sprintf("uploading %s@%s (%s) to %s", desc.Name, desc.Version, desc.Digest, where))
	}
	// A registry has no lock: two pushers adding platforms to one index at once can overwrite
	// each other. Reading the tag back and planning again closes most of that window.
	for attempt := 0; ; attempt++ {
		if plan.root != nil {
			if err := remote.Put(r.Digest(plan.manifestDesc.Digest.String()), rawManifest{plan.manifest, types.OCIManifestSchema1}, opts...); err != nil {
				return s.classify(err, "writing the manifest of "+where)
			}
			if err := remote.Put(r.Tag(tag), rawManifest{plan.root, types.OCIImageIndex}, opts...); err != nil {
				return s.classify(err, "writing the index of "+where)
			}
		} else if err := remote.Put(r.Tag(tag), rawManifest{plan.manifest, types.OCIManifestSchema1}, opts...); err != nil {
			return s.classify(err, "writing the manifest of "+where)
		}
		plan, err = planPush(ctx, s, repo, tag, desc)
		if err != nil {
			return err
		}
		if plan.noop {
			return nil
		}
		if attempt == 2 {
			return errs.New(errs.LockConflict, "%s changed under three pushes of %s@%s for %s; another push is racing this one; try again", where, desc.Name, desc.Version, desc.Platform)
		}
	}
}

// payloadLayer uploads a payload that can be read once.
type payloadLayer struct {
	desc store.Descriptor
	r    io.Reader
	used bool
	err  error // a mismatch the reader found, reported in place of the upload's error
}

func (l *payloadLayer) Digest() (v1.Hash, error)             { return toHash(l.desc.Digest), nil }
func (l *payloadLayer) DiffID() (v1.Hash, error)             { return toHash(l.desc.Digest), nil }
func (l *payloadLayer) Size() (int64, error)                 { return l.desc.Size, nil }
func (l *payloadLayer) Uncompressed() (io.ReadCloser, error) { return l.Compressed() }
func (l *payloadLayer) MediaType() (types.MediaType, error) {
	return types.MediaType(artifactLayerType), nil
}

func (l *payloadLayer) Compressed() (io.ReadCloser, error) {
	if l.used {
		return nil, errs.New(errs.Internal, "the payload of %s@%s can be read only once", l.desc.Name, l.desc.Version)
	}
	l.used = true
	return io.NopCloser(&sizeCheckReader{r: l.r, want: l.desc.Size, layer: l}), nil
}

// sizeCheckReader refuses a payload longer or shorter than its descriptor says.
type sizeCheckReader struct {
	r     io.Reader
	want  int64
	got   int64
	layer *payloadLayer
}

func (c *sizeCheckReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.got += int64(n)
	if c.got > c.want || (err == io.EOF && c.got != c.want) {
		c.layer.err = errs.New(errs.Integrity, "the payload of %s@%s is %s bytes; its descriptor says %d", c.layer.desc.Name, c.layer.desc.Version, sizeSeen(c.got, c.want, err), c.want)
		return n, c.layer.err
	}
	return n, err
}

func sizeSeen(got, want int64, err error) string {
	if err == io.EOF {
		return fmt.Sprint(got)
	}
	return fmt.Sprintf("more than %d", want)
}
