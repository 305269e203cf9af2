package pull_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/github"
	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/lock"
)

func TestPullVerifiesAndPinsProvenance(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		org    string
		viaURL bool
	}{{"GitHub, Inc.", true}, {"sigstore.dev", false}} {
		t.Run(c.org, func(t *testing.T) {
			w := pulltest.NewProvWorld(t, c.org)
			bundle := w.Attest(t, provenancetest.GoodLeaf(), c.viaURL)
			if !c.viaURL {
				// Inline, the bundle comes back as GitHub's JSON writes it: compact.
				var buf bytes.Buffer
				if err := json.Compact(&buf, bundle); err != nil {
					t.Fatal(err)
				}
				bundle = buf.Bytes()
			}
			res := w.MustPull(w.Puller(""), pulltest.Req(grep, "1.2.0"))
			e := w.ReadLock().Find("acme/grep")
			want := lock.Provenance{Kind: lock.ProvenanceGitHub, Bundle: digest.FromBytes(bundle).String(), Signer: provenancetest.GoodLeaf().SAN}
			if e.Provenance == nil || *e.Provenance != want {
				t.Fatalf("lock provenance = %+v, want %+v", e.Provenance, want)
			}
			if !w.CAS.Has(digest.FromBytes(bundle)) {
				t.Fatal("the bundle is not kept in the CAS")
			}
			p := res[0].Provenance
			if p == nil || p.OwnerID != 1234567 || p.RepoID != 7654321 || p.SourceCommit != provenancetest.GoodLeaf().Commit || p.Repository != "acme/murmur-tools" {
				t.Fatalf("result provenance = %+v", p)
			}
			rs := w.Records()
			if rp := rs[len(rs)-1].Provenance; rp == nil || rp.Bundle != digest.FromBytes(bundle) || rp.Signer != want.Signer {
				t.Fatalf("record provenance = %+v", rp)
			}
			// The token went to the API base only: storage refuses any Authorization, and
			// the bundle_url was fetched without one.
			for _, r := range w.Fake.Requests() {
				if r.Server != githubtest.API && r.Header.Get("Authorization") != "" {
					t.Fatalf("the token reached %s %s", r.Server, r.Path)
				}
			}
			// A warm locked pull asks nothing, provenance included.
			w.Fake.ResetRequests()
			w.MustPull(w.Puller(""), pulltest.Req(grep, "1.2.0"))
			if n := len(w.Fake.Requests()); n != 0 {
				t.Fatalf("the warm locked pull made %d requests", n)
			}
		})
	}
}

// Each bad bundle fails the pull closed, with its token and nothing written, in the
// GitHub-instance style (signed timestamp) and the public-good style (SCT and Rekor entry).
func TestPullRefusesBadProvenance(t *testing.T) {
	t.Parallel()
	for _, org := range []string{"GitHub, Inc.", "sigstore.dev"} {
		t.Run(org, func(t *testing.T) { pullRefusesBadProvenance(t, org) })
	}
}

func pullRefusesBadProvenance(t *testing.T, org string) {
	stranger := provenancetest.NewCA(t, org)
	for _, c := range []struct {
		name  string
		mint  func(w *pulltest.ProvWorld) []byte
		token errs.Token
	}{
		{"wrong owner id", func(w *pulltest.ProvWorld) []byte {
			return mintLeaf(w, func(l *provenancetest.Leaf) { l.OwnerID = "55" })
		}, errs.ProvenanceMismatch},
		{"wrong repo id", func(w *pulltest.ProvWorld) []byte {
			return mintLeaf(w, func(l *provenancetest.Leaf) { l.RepoID = "9990001" })
		}, errs.ProvenanceMismatch},
		{"self-hosted runner", func(w *pulltest.ProvWorld) []byte {
			return mintLeaf(w, func(l *provenancetest.Leaf) { l.Runner = "self-hosted" })
		}, errs.ProvenanceMismatch},
		{"certificate outside its validity without a timestamp", func(w *pulltest.ProvWorld) []byte {
			return mintLeaf(w, func(l *provenancetest.Leaf) {
				l.NotBefore, l.NotAfter, l.NoTimestamp = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour), true
			})
		}, errs.ProvenanceUnverifiable},
		{"subject of another artifact", func(w *pulltest.ProvWorld) []byte {
			return w.CA.Mint(w.T.(*testing.T), provenancetest.Statement(digest.FromString("other").Encoded(), provenance.SLSAProvenanceV1), provenancetest.GoodLeaf())
		}, errs.ProvenanceMismatch}, // an anchored signer that names other bytes is evidence against these
		{"non-SLSA predicate", func(w *pulltest.ProvWorld) []byte {
			return w.CA.Mint(w.T.(*testing.T), provenancetest.Statement(w.D.Encoded(), "https://in-toto.io/attestation/release/v0.1"), provenancetest.GoodLeaf())
		}, errs.ProvenanceMismatch},
		{"unknown CA under require", func(w *pulltest.ProvWorld) []byte {
			return stranger.Mint(w.T.(*testing.T), provenancetest.Statement(w.D.Encoded(), provenance.SLSAProvenanceV1), provenancetest.GoodLeaf())
		}, errs.ProvenanceUnverifiable},
		{"tampered DSSE payload", func(w *pulltest.ProvWorld) []byte {
			b := w.CA.Mint(w.T.(*testing.T), provenancetest.Statement(w.D.Encoded(), provenance.SLSAProvenanceV1), provenancetest.GoodLeaf())
			return provenancetest.Tamper(w.T, b)
		}, errs.ProvenanceMismatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := pulltest.NewProvWorld(t, org)
			w.Fake.AddAttestation("acme", "murmur-artifacts", w.D.String(), c.mint(w), false)
			before := w.State()
			mode := "" // prefer: an anchored bundle that fails still fails the pull
			if strings.HasSuffix(c.name, "under require") {
				mode = config.ProvenanceRequire
			}
			_, err := w.Pull(w.Puller(mode), pulltest.Req(grep, "1.2.0"))
			if !errors.Is(err, c.token) {
				t.Fatalf("err = %v, want %s", err, c.token)
			}
			w.AssertUnchanged(before)
			w.AssertFailedRecord(grep, c.token)
		})
	}
}

func mintLeaf(w *pulltest.ProvWorld, f func(*provenancetest.Leaf)) []byte {
	lf := provenancetest.GoodLeaf()
	f(&lf)
	return w.CA.Mint(w.T.(*testing.T), provenancetest.Statement(w.D.Encoded(), provenance.SLSAProvenanceV1), lf)
}

func TestProvenancePolicy(t *testing.T) {
	t.Parallel()
	t.Run("prefer warns once and pulls", func(t *testing.T) {
		w := pulltest.NewProvWorld(t, "GitHub, Inc.")
		res := w.MustPull(w.Puller(""), pulltest.Req(grep, "1.2.0"))
		if len(res[0].Warnings) != 1 || !strings.HasPrefix(res[0].Warnings[0], "no-provenance: acme/grep@1.2.0") {
			t.Fatalf("warnings = %q", res[0].Warnings)
		}
		if w.ReadLock().Find("acme/grep").Provenance != nil {
			t.Fatal("provenance recorded without a bundle")
		}
	})
	t.Run("require fails closed", func(t *testing.T) {
		w := pulltest.NewProvWorld(t, "GitHub, Inc.")
		before := w.State()
		_, err := w.Pull(w.Puller(config.ProvenanceRequire), pulltest.Req(grep, "1.2.0"))
		if !errors.Is(err, errs.ProvenanceMissing) {
			t.Fatalf("err = %v", err)
		}
		w.AssertUnchanged(before)
	})
	t.Run("off asks nothing", func(t *testing.T) {
		w := pulltest.NewProvWorld(t, "GitHub, Inc.")
		w.Attest(t, provenancetest.GoodLeaf(), false)
		w.MustPull(w.Puller(config.ProvenanceOff), pulltest.Req(grep, "1.2.0"))
		if n := w.Fake.Count(githubtest.API, "/repos/acme/murmur-artifacts/attestations"); n != 0 {
			t.Fatalf("off asked for attestations %d times", n)
		}
	})
	t.Run("release asset fallback", func(t *testing.T) {
		w := pulltest.NewProvWorld(t, "GitHub, Inc.")
		b := w.CA.Mint(t, provenancetest.Statement(w.D.Encoded(), provenance.SLSAProvenanceV1), provenancetest.GoodLeaf())
		w.Fake.AddAsset("acme", "murmur-artifacts", "v1.2.0", "grep-1.2.0.mur.zip"+github.BundleSuffix, b)
		w.MustPull(w.Puller(config.ProvenanceRequire), pulltest.Req(grep, "1.2.0"))
		if e := w.ReadLock().Find("acme/grep"); e.Provenance == nil || e.Provenance.Bundle != digest.FromBytes(b).String() {
			t.Fatalf("provenance = %+v", e.Provenance)
		}
	})
}

// Once the lock records a verified bundle, every pull of the pin needs one: a teammate whose
// CAS is empty can't be served the bytes without it, and --provenance=off is refused.
func TestRecordedProvenanceCantBeDowngraded(t *testing.T) {
	t.Parallel()
	w := pulltest.NewProvWorld(t, "GitHub, Inc.")
	w.Attest(t, provenancetest.GoodLeaf(), false)
	w.MustPull(w.Puller(""), pulltest.Req(grep, "1.2.0"))
	lockText, err := os.ReadFile(w.Proj.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	w.Fake.RemoveAttestations("acme", "murmur-artifacts", w.D.String())

	mate := pulltest.NewWorld(t)
	if err := os.WriteFile(mate.Proj.LockPath(), lockText, 0o644); err != nil {
		t.Fatal(err)
	}
	mw := &pulltest.ProvWorld{World: mate, Fake: w.Fake, CA: w.CA, Zip: w.Zip, D: w.D}
	before := mate.State()
	_, err = mate.Pull(mw.Puller(config.ProvenanceOff), pulltest.Req(grep, "1.2.0"))
	if !errors.Is(err, errs.ProvenanceMissing) || !strings.Contains(err.Error(), "downgrade") {
		t.Fatalf("--provenance=off: %v", err)
	}
	mate.AssertUnchanged(before)
	_, err = mate.Pull(mw.Puller(""), pulltest.Req(grep, "1.2.0"))
	if !errors.Is(err, errs.ProvenanceMissing) {
		t.Fatalf("bundle gone: %v", err)
	}
	mate.AssertUnchanged(before)
}
