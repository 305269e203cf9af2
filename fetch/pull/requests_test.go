package pull_test

import (
	"fmt"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/ref"
)

type bearerLogin struct{}

func (bearerLogin) Resolve(authn.Resource) (authn.Authenticator, error) {
	return &authn.Basic{Username: registrytest.User, Password: registrytest.Password}, nil
}

// A cold pull of a 20-artifact project from a Bearer registry (docker-registry itself checks each
// token's scopes): one ping and one token for all 20 repositories, one manifest by tag per
// artifact and no tag list (every version is exact), one blob each, and no request sent without
// the token it needs. With a verifier, each artifact's provenance look-up adds its fallback tag
// (docker-registry has no referrers API, which only the look-ups sent before its first 404 ask),
// under the same token.
func TestPullOf20CostsOnePingAndOneToken(t *testing.T) {
	t.Parallel()
	reg := registrytest.StartBearer(t)
	addr := "oci://" + reg.Addr() + "/murmur"
	pusher := pulltest.OpenStore(t, addr, ocistore.Options{Keychain: bearerLogin{}})
	var reqs []pull.Request
	for i := range 20 {
		n := ref.Name{Scope: "acme", Name: fmt.Sprintf("tool%02d", i)}
		pulltest.Push(t, pusher, n, "1.0.0", "any", pulltest.Pack(t, n.Name, "1.0.0", uint64(500+i)))
		reqs = append(reqs, pulltest.Req(n, "1.0.0"))
	}
	reg.Reset()
	w := pulltest.NewWorld(t)
	pl := w.Puller(pulltest.OpenStore(t, addr, ocistore.Options{Keychain: bearerLogin{}, Pool: ocistore.NewPool()}))
	pl.Provenance.Verifier = &sigstore.Local{}
	w.MustPull(pl, reqs...)
	c := reg.Counts()
	t.Logf("%+v", c)
	if c.Ping != 1 || c.Token != 1 || c.Tags != 0 || c.Manifest != 40 || c.Blob != 20 || c.Other < 1 || c.Other > 20 {
		t.Errorf("requests %+v; want 1 ping, 1 token, 0 tag lists, 20 manifests and 20 fallback tags, 20 blobs, 1 to 20 referrers requests", c)
	}
	// The ping's own 401 is the challenge; nothing else may have gone without its token.
	if c.Unauthorized != 1 {
		t.Errorf("%d requests were answered 401; only the ping should be", c.Unauthorized)
	}
}
