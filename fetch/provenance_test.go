package fetch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/github"
	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/lock"
)

// provWorld is a GitHub source whose scope acme is served by acme/murmur-artifacts (owner
// 1234567, repository 7654321, as provenancetest.GoodLeaf attests), publishing acme/grep@1.2.0,
// and a CA of the test's own that mints its attestations.
type provWorld struct {
	*world
	fake *githubtest.Server
	ca   *provenancetest.CA
	zip  []byte
	d    digest.Digest
}

func newProvWorld(t *testing.T, org string) *provWorld {
	fake := githubtest.New(t)
	fake.AddRepo("acme", "murmur-artifacts", 1234567, 7654321)
	zip := githubtest.PackArtifact("grep", "1.2.0")
	fake.Publish("acme", "murmur-artifacts", "acme", githubtest.Artifact{Name: "acme/grep", Version: "1.2.0", Release: "v1.2.0", Asset: "grep-1.2.0.mur.zip", Data: zip})
	return &provWorld{world: newWorld(t), fake: fake, ca: provenancetest.NewCA(t, org), zip: zip, d: digest.FromBytes(zip)}
}

// attest publishes an attestation of the zip minted with lf (and the SLSA predicate unless
// predicate is given).
func (w *provWorld) attest(t *testing.T, lf provenancetest.Leaf, viaURL bool) []byte {
	b := w.ca.Mint(t, provenancetest.Statement(w.d.Encoded(), provenance.SLSAProvenanceV1), lf)
	w.fake.AddAttestation("acme", "murmur-artifacts", w.d.String(), b, viaURL)
	return b
}

func (w *provWorld) puller(mode string) *fetch.Puller {
	p := w.world.puller()
	p.Source = githubSource(w.fake)
	p.Provenance.Verifier = &sigstore.Local{Roots: sigstore.NewRoots(w.ca.Material())}
	if mode != "" {
		p.Provenance.Policy = func(string) config.ProvenancePolicy { return config.ProvenancePolicy{Mode: mode} }
	}
	return p
}

func TestPullVerifiesAndPinsProvenance(t *testing.T) {
	for _, c := range []struct {
		org    string
		viaURL bool
	}{{"GitHub, Inc.", true}, {"sigstore.dev", false}} {
		t.Run(c.org, func(t *testing.T) {
			w := newProvWorld(t, c.org)
			bundle := w.attest(t, provenancetest.GoodLeaf(), c.viaURL)
			if !c.viaURL {
				// Inline, the bundle comes back as GitHub's JSON writes it: compact.
				var buf bytes.Buffer
				if err := json.Compact(&buf, bundle); err != nil {
					t.Fatal(err)
				}
				bundle = buf.Bytes()
			}
			res := w.mustPull(w.puller(""), req(grep, "1.2.0"))
			e := w.readLock().Find("acme/grep")
			want := lock.Provenance{Kind: lock.ProvenanceGitHub, Bundle: digest.FromBytes(bundle).String(), Signer: provenancetest.GoodLeaf().SAN}
			if e.Provenance == nil || *e.Provenance != want {
				t.Fatalf("lock provenance = %+v, want %+v", e.Provenance, want)
			}
			if !w.cas.Has(digest.FromBytes(bundle)) {
				t.Fatal("the bundle is not kept in the CAS")
			}
			p := res[0].Provenance
			if p == nil || p.OwnerID != 1234567 || p.RepoID != 7654321 || p.SourceCommit != provenancetest.GoodLeaf().Commit || p.Repository != "acme/murmur-tools" {
				t.Fatalf("result provenance = %+v", p)
			}
			rs := w.records()
			if rp := rs[len(rs)-1].Provenance; rp == nil || rp.Bundle != digest.FromBytes(bundle) || rp.Signer != want.Signer {
				t.Fatalf("record provenance = %+v", rp)
			}
			// The token went to the API base only: storage refuses any Authorization, and
			// the bundle_url was fetched without one.
			for _, r := range w.fake.Requests() {
				if r.Server != githubtest.API && r.Header.Get("Authorization") != "" {
					t.Fatalf("the token reached %s %s", r.Server, r.Path)
				}
			}
			// A warm locked pull asks nothing, provenance included.
			w.fake.ResetRequests()
			w.mustPull(w.puller(""), req(grep, "1.2.0"))
			if n := len(w.fake.Requests()); n != 0 {
				t.Fatalf("the warm locked pull made %d requests", n)
			}
		})
	}
}

// Each bad bundle fails the pull closed, with its token and nothing written, in the
// GitHub-instance style (signed timestamp) and the public-good style (SCT and Rekor entry).
func TestPullRefusesBadProvenance(t *testing.T) {
	for _, org := range []string{"GitHub, Inc.", "sigstore.dev"} {
		t.Run(org, func(t *testing.T) { pullRefusesBadProvenance(t, org) })
	}
}

func pullRefusesBadProvenance(t *testing.T, org string) {
	stranger := provenancetest.NewCA(t, org)
	for _, c := range []struct {
		name  string
		mint  func(w *provWorld) []byte
		token errs.Token
	}{
		{"wrong owner id", func(w *provWorld) []byte { return mintLeaf(w, func(l *provenancetest.Leaf) { l.OwnerID = "55" }) }, errs.ProvenanceMismatch},
		{"wrong repo id", func(w *provWorld) []byte { return mintLeaf(w, func(l *provenancetest.Leaf) { l.RepoID = "9990001" }) }, errs.ProvenanceMismatch},
		{"self-hosted runner", func(w *provWorld) []byte {
			return mintLeaf(w, func(l *provenancetest.Leaf) { l.Runner = "self-hosted" })
		}, errs.ProvenanceMismatch},
		{"certificate outside its validity without a timestamp", func(w *provWorld) []byte {
			return mintLeaf(w, func(l *provenancetest.Leaf) {
				l.NotBefore, l.NotAfter, l.NoTimestamp = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour), true
			})
		}, errs.ProvenanceUnverifiable},
		{"subject of another artifact", func(w *provWorld) []byte {
			return w.ca.Mint(w.t.(*testing.T), provenancetest.Statement(digest.FromString("other").Encoded(), provenance.SLSAProvenanceV1), provenancetest.GoodLeaf())
		}, errs.ProvenanceMismatch}, // an anchored signer that names other bytes is evidence against these
		{"non-SLSA predicate", func(w *provWorld) []byte {
			return w.ca.Mint(w.t.(*testing.T), provenancetest.Statement(w.d.Encoded(), "https://in-toto.io/attestation/release/v0.1"), provenancetest.GoodLeaf())
		}, errs.ProvenanceMismatch},
		{"unknown CA under require", func(w *provWorld) []byte {
			return stranger.Mint(w.t.(*testing.T), provenancetest.Statement(w.d.Encoded(), provenance.SLSAProvenanceV1), provenancetest.GoodLeaf())
		}, errs.ProvenanceUnverifiable},
		{"tampered DSSE payload", func(w *provWorld) []byte {
			b := w.ca.Mint(w.t.(*testing.T), provenancetest.Statement(w.d.Encoded(), provenance.SLSAProvenanceV1), provenancetest.GoodLeaf())
			return provenancetest.Tamper(w.t, b)
		}, errs.ProvenanceMismatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newProvWorld(t, org)
			w.fake.AddAttestation("acme", "murmur-artifacts", w.d.String(), c.mint(w), false)
			before := w.state()
			mode := "" // prefer: an anchored bundle that fails still fails the pull
			if strings.HasSuffix(c.name, "under require") {
				mode = config.ProvenanceRequire
			}
			_, err := w.pull(w.puller(mode), req(grep, "1.2.0"))
			if !errors.Is(err, c.token) {
				t.Fatalf("err = %v, want %s", err, c.token)
			}
			w.assertUnchanged(before)
			w.assertFailedRecord(grep, c.token)
		})
	}
}

func mintLeaf(w *provWorld, f func(*provenancetest.Leaf)) []byte {
	lf := provenancetest.GoodLeaf()
	f(&lf)
	return w.ca.Mint(w.t.(*testing.T), provenancetest.Statement(w.d.Encoded(), provenance.SLSAProvenanceV1), lf)
}

func TestProvenancePolicy(t *testing.T) {
	t.Run("prefer warns once and pulls", func(t *testing.T) {
		w := newProvWorld(t, "GitHub, Inc.")
		res := w.mustPull(w.puller(""), req(grep, "1.2.0"))
		if len(res[0].Warnings) != 1 || !strings.HasPrefix(res[0].Warnings[0], "no-provenance: acme/grep@1.2.0") {
			t.Fatalf("warnings = %q", res[0].Warnings)
		}
		if w.readLock().Find("acme/grep").Provenance != nil {
			t.Fatal("provenance recorded without a bundle")
		}
	})
	t.Run("require fails closed", func(t *testing.T) {
		w := newProvWorld(t, "GitHub, Inc.")
		before := w.state()
		_, err := w.pull(w.puller(config.ProvenanceRequire), req(grep, "1.2.0"))
		if !errors.Is(err, errs.ProvenanceMissing) {
			t.Fatalf("err = %v", err)
		}
		w.assertUnchanged(before)
	})
	t.Run("off asks nothing", func(t *testing.T) {
		w := newProvWorld(t, "GitHub, Inc.")
		w.attest(t, provenancetest.GoodLeaf(), false)
		w.mustPull(w.puller(config.ProvenanceOff), req(grep, "1.2.0"))
		if n := w.fake.Count(githubtest.API, "/repos/acme/murmur-artifacts/attestations"); n != 0 {
			t.Fatalf("off asked for attestations %d times", n)
		}
	})
	t.Run("release asset fallback", func(t *testing.T) {
		w := newProvWorld(t, "GitHub, Inc.")
		b := w.ca.Mint(t, provenancetest.Statement(w.d.Encoded(), provenance.SLSAProvenanceV1), provenancetest.GoodLeaf())
		w.fake.AddAsset("acme", "murmur-artifacts", "v1.2.0", "grep-1.2.0.mur.zip"+github.BundleSuffix, b)
		w.mustPull(w.puller(config.ProvenanceRequire), req(grep, "1.2.0"))
		if e := w.readLock().Find("acme/grep"); e.Provenance == nil || e.Provenance.Bundle != digest.FromBytes(b).String() {
			t.Fatalf("provenance = %+v", e.Provenance)
		}
	})
}

// Once the lock records a verified bundle, every pull of the pin needs one: a teammate whose
// CAS is empty can't be served the bytes without it, and --provenance=off is refused.
func TestRecordedProvenanceCantBeDowngraded(t *testing.T) {
	w := newProvWorld(t, "GitHub, Inc.")
	w.attest(t, provenancetest.GoodLeaf(), false)
	w.mustPull(w.puller(""), req(grep, "1.2.0"))
	lockText, err := os.ReadFile(w.proj.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	w.fake.RemoveAttestations("acme", "murmur-artifacts", w.d.String())

	mate := newWorld(t)
	if err := os.WriteFile(mate.proj.LockPath(), lockText, 0o644); err != nil {
		t.Fatal(err)
	}
	mw := &provWorld{world: mate, fake: w.fake, ca: w.ca, zip: w.zip, d: w.d}
	before := mate.state()
	_, err = mate.pull(mw.puller(config.ProvenanceOff), req(grep, "1.2.0"))
	if !errors.Is(err, errs.ProvenanceMissing) || !strings.Contains(err.Error(), "downgrade") {
		t.Fatalf("--provenance=off: %v", err)
	}
	mate.assertUnchanged(before)
	_, err = mate.pull(mw.puller(""), req(grep, "1.2.0"))
	if !errors.Is(err, errs.ProvenanceMissing) {
		t.Fatalf("bundle gone: %v", err)
	}
	mate.assertUnchanged(before)
}

// mur verify re-verifies every recorded bundle offline and shows what it proves.
func TestVerifyReVerifiesRecordedBundles(t *testing.T) {
	w := newProvWorld(t, "GitHub, Inc.")
	bundle := w.attest(t, provenancetest.GoodLeaf(), true)
	w.mustPull(w.puller(""), req(grep, "1.2.0"))
	w.fake.Close() // offline from here on
	in := fetch.VerifyInput{Project: w.proj, Lock: w.readLock(), CAS: w.cas, Platform: "linux-x86_64",
		Verifier: &sigstore.Local{Roots: sigstore.NewRoots(w.ca.Material())}}
	rep, err := fetch.Verify(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 || len(rep.Provenance) != 1 || rep.Bundles != 1 {
		t.Fatalf("report = %+v", rep)
	}
	if got := rep.Provenance[0]; got.OwnerID != 1234567 || got.RepoID != 7654321 || got.Signer != provenancetest.GoodLeaf().SAN || got.Bundle != digest.FromBytes(bundle).String() {
		t.Fatalf("provenance = %+v", got)
	}
	// Against other roots the same bundle no longer verifies; without it, it is missing.
	in.Verifier = &sigstore.Local{Roots: sigstore.NewRoots(provenancetest.NewCA(t, "GitHub, Inc.").Material())}
	if rep, _ = fetch.Verify(context.Background(), in); len(rep.Problems) != 1 || rep.Problems[0].Kind != "provenance" || !strings.Contains(rep.Problems[0].Problem, "provenance-unverifiable") {
		t.Fatalf("other roots: %+v", rep.Problems)
	}
	if rep.Bundles != 1 { // checked, and failed: still a bundle the summary counts
		t.Fatalf("other roots: %d bundles checked, want 1", rep.Bundles)
	}
	if err := os.Remove(w.cas.Path(digest.FromBytes(bundle))); err != nil {
		t.Fatal(err)
	}
	in.Verifier = &sigstore.Local{Roots: sigstore.NewRoots(w.ca.Material())}
	if rep, _ = fetch.Verify(context.Background(), in); len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].Problem, "not in the CAS") {
		t.Fatalf("bundle gone: %+v", rep.Problems)
	}
}
