package pull_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
)

type aliceKeychain struct{}

func (aliceKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	return &authn.Basic{Username: registrytest.User, Password: registrytest.Password}, nil
}

// wantNotMirrored checks that a pull kept a credentialed artifact from a project's mirror.
func wantNotMirrored(t *testing.T, res pull.Result, mirror store.Store) {
	t.Helper()
	if res.Mirror != nil || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "only this project's .murmur/config.yaml names it") {
		t.Fatalf("result: mirror %+v, warnings %q", res.Mirror, res.Warnings)
	}
	if _, err := mirror.Resolve(context.Background(), grep, "1.0.0", "linux-x86_64"); !errors.Is(err, errs.NotFound) {
		t.Fatalf("the project's mirror received a credentialed artifact: %v", err)
	}
}

// A cloned project names an attacker's registry as its write-through mirror. What the user's
// credentials fetch from a registry that asked for auth never goes there, on the pull that
// fetched it or on a later cache hit; a mirror the operator chose (home config, --mirror) gets
// it.
func TestProjectMirrorNeverGetsWhatARegistryLoginFetched(t *testing.T) {
	t.Parallel()
	private := registrytest.StartInProcessBearer(t, nil)
	src := pulltest.OpenStore(t, "oci://"+private.Addr()+"/murmur", ocistore.Options{Keychain: aliceKeychain{}})
	p := pulltest.Pack(t, "grep", "1.0.0", 451)
	pulltest.Push(t, src, grep, "1.0.0", "linux-x86_64", p)
	_, mirror, _ := mirrorWorld(t)

	w := pulltest.NewWorld(t)
	pl := mirroring(w, mirror, src)
	pl.Mirror.FromProject = true
	wantNotMirrored(t, w.MustPull(pl, pulltest.Req(grep, "1.0.0"))[0], mirror)

	pl = mirroring(w, mirror, src)
	pl.Mirror.FromProject = true
	res := w.MustPull(pl, pulltest.Req(grep, "1.0.0"))[0]
	if !res.CacheHit {
		t.Fatalf("the second pull is not a cache hit: %+v", res)
	}
	wantNotMirrored(t, res, mirror)

	pl = mirroring(w, mirror, src) // the operator's own mirror
	res = w.MustPull(pl, pulltest.Req(grep, "1.0.0"))[0]
	if res.Mirror == nil || !res.Mirror.Pushed {
		t.Fatalf("the operator's mirror did not receive the artifact: %+v", res.Mirror)
	}
}

// The same for a private GitHub repository fetched with GITHUB_TOKEN.
func TestProjectMirrorNeverGetsAPrivateRelease(t *testing.T) {
	t.Parallel()
	w, fake, _, _ := sourceWorld(t, 4000, true)
	_, mirror, _ := mirrorWorld(t)
	pl := sourcePuller(w, fake)
	pl.Mirror.Store, pl.Mirror.FromProject = mirror, true
	wantNotMirrored(t, w.MustPull(pl, pulltest.Req(grep, "1.0.0"))[0], mirror)
}

// A public artifact still goes to the project's mirror: the rule is about credentials.
func TestProjectMirrorGetsPublicArtifacts(t *testing.T) {
	t.Parallel()
	w, fake, _, _ := sourceWorld(t, 4000, false)
	_, mirror, _ := mirrorWorld(t)
	pl := sourcePuller(w, fake)
	pl.Mirror.Store, pl.Mirror.FromProject = mirror, true
	res := w.MustPull(pl, pulltest.Req(grep, "1.0.0"))[0]
	if res.Mirror == nil || !res.Mirror.Pushed || len(res.Warnings) != 0 {
		t.Fatalf("a public artifact was not written through: %+v, %q", res.Mirror, res.Warnings)
	}
}
