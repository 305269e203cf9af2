//go:build unix

package pull_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/fetch/publish"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/errs"
)

// helperEnv makes the test binary, re-executed with it set to serve, serve as mur-provenance:
// the pulls below check their bundles in another process, as mur's do.
const helperEnv = "ATTEST_TEST_HELPER"

func init() {
	if os.Getenv(helperEnv) != "serve" {
		return
	}
	if err := sigstore.Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// helperVerifier is a provenance.Helper that runs this test binary as mur-provenance.
func helperVerifier(t *testing.T) *provenance.Helper {
	t.Setenv(helperEnv, "serve")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := &provenance.Helper{Path: exe}
	t.Cleanup(func() { h.Close() })
	return h
}

// The trust rule through mur-provenance, as a pull meets it: a keyed bundle by a key nothing
// trusts proves nothing, so prefer pulls on the digest with a warning naming the key, and require
// refuses; the same bundle with its key trusted is verified and recorded.
func TestTrustRuleThroughTheHelper(t *testing.T) {
	_, item, _, hint, pub := pulltest.SignedGrep(t, 31)
	st := pulltest.OpenStore(t, "oci-layout:"+t.TempDir(), ocistore.Options{})
	if err := publish.Push(context.Background(), st, item); err != nil {
		t.Fatal(err)
	}
	h := helperVerifier(t)
	policy := func(mode string, keys ...provenance.TrustedKey) func(string) config.ProvenancePolicy {
		return func(string) config.ProvenancePolicy {
			return config.ProvenancePolicy{Mode: mode, Trust: provenance.Trust{Keys: keys}}
		}
	}

	w := pulltest.NewWorld(t)
	pl := w.Puller(st)
	pl.Provenance.Verifier, pl.Provenance.Policy = h, policy(config.ProvenancePrefer)
	res := w.MustPull(pl, pulltest.Req(grep, "1.2.0"))
	if len(res[0].Warnings) != 1 || !strings.HasPrefix(res[0].Warnings[0], "no-provenance: ") || !strings.Contains(res[0].Warnings[0], "signed by key "+hint) {
		t.Fatalf("prefer: warnings %q, want one no-provenance warning naming key %s", res[0].Warnings, hint)
	}
	if e := w.ReadLock().Find("acme/grep"); e == nil || e.Provenance != nil {
		t.Fatalf("prefer: the lock recorded an unanchored bundle: %+v", e)
	}

	w = pulltest.NewWorld(t)
	pl = w.Puller(st)
	pl.Provenance.Verifier, pl.Provenance.Policy = h, policy(config.ProvenanceRequire)
	before := w.State()
	if _, err := w.Pull(pl, pulltest.Req(grep, "1.2.0")); !errors.Is(err, errs.ProvenanceUnverifiable) || !strings.Contains(err.Error(), hint) {
		t.Fatalf("require: %v, want provenance-unverifiable naming key %s", err, hint)
	}
	w.AssertUnchanged(before)

	w = pulltest.NewWorld(t)
	pl = w.Puller(st)
	pl.Provenance.Verifier, pl.Provenance.Policy = h, policy(config.ProvenanceRequire, provenance.TrustedKey{PEM: pub})
	w.MustPull(pl, pulltest.Req(grep, "1.2.0"))
	if e := w.ReadLock().Find("acme/grep"); e == nil || e.Provenance == nil || e.Provenance.Signer != hint {
		t.Fatalf("a trusted key: lock entry %+v, want provenance by key %s", e, hint)
	}
}

// The home's allow_self_hosted: true goes from config.yaml through the pull to the verifier: an
// attestation built on a self-hosted runner is pulled under it, and refused without it. And a
// project's file-wide provenance: require holds for a scope with an entry of its own.
func TestConfigPolicyThroughAPull(t *testing.T) {
	selfHosted := func(l *provenancetest.Leaf) { l.Runner = "self-hosted" }
	for _, allow := range []bool{true, false} {
		w := pulltest.NewProvWorld(t, "GitHub, Inc.")
		w.Fake.AddAttestation("acme", "murmur-artifacts", w.D.String(), mintLeaf(w, selfHosted), false)
		home := filepath.Join(t.TempDir(), "config.yaml")
		text := "scopes:\n  acme:\n    allow_self_hosted: false\n"
		if allow {
			text = "scopes:\n  acme:\n    allow_self_hosted: true\n"
		}
		writeFile(t, home, []byte(text))
		cfg, err := config.Load(home, w.Proj.Dir)
		if err != nil {
			t.Fatal(err)
		}
		p := w.Puller("")
		p.Provenance.Policy = cfg.ProvenanceFor
		_, err = w.Pull(p, pulltest.Req(grep, "1.2.0"))
		switch {
		case allow && err != nil:
			t.Fatalf("allow_self_hosted: true in the home: %v", err)
		case allow && (w.ReadLock().Find("acme/grep").Provenance == nil):
			t.Fatal("allow_self_hosted: true in the home: the attestation was not recorded")
		case !allow && (!errors.Is(err, errs.ProvenanceMismatch) || !strings.Contains(err.Error(), "self-hosted")):
			t.Fatalf("without allow_self_hosted: %v, want provenance-mismatch naming the runner", err)
		}
	}

	w := pulltest.NewProvWorld(t, "GitHub, Inc.")
	if err := os.Mkdir(filepath.Join(w.Proj.Dir, ".murmur"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(w.Proj.Dir, config.ProjectFile), []byte("provenance: require\nscopes:\n  acme:\n    signer_workflow: https://github.com/acme/murmur-tools/.github/workflows/release.yml@\n"))
	cfg, err := config.Load("", w.Proj.Dir)
	if err != nil {
		t.Fatal(err)
	}
	p := w.Puller("")
	p.Provenance.Policy = cfg.ProvenanceFor
	before := w.State()
	if _, err := w.Pull(p, pulltest.Req(grep, "1.2.0")); !errors.Is(err, errs.ProvenanceMissing) {
		t.Fatalf("the project's require, with no bundle: %v, want provenance-missing", err)
	}
	w.AssertUnchanged(before)
}
