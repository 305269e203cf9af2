package verify_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/verify"
	"github.com/murmur-nexus/mur/lock"
)

// A murmur.lock whose provenance record was edited by hand (another signer, another kind) does
// not pass `mur verify` on the strength of a bundle that proves something else: the bundle
// still verifies, and what it proves is held to what the lock says.
func TestVerifyHoldsTheBundleToTheLocksRecord(t *testing.T) {
	t.Parallel()
	w := pulltest.NewProvWorld(t, "GitHub, Inc.")
	w.Attest(t, provenancetest.GoodLeaf(), true)
	w.MustPull(w.Puller(""), pulltest.Req(grep, "1.2.0"))
	w.Fake.Close()
	signer := provenancetest.GoodLeaf().SAN
	for _, tt := range []struct {
		name string
		edit func(p *lock.Provenance)
		says string
	}{
		{"signer", func(p *lock.Provenance) {
			p.Signer = strings.Replace(p.Signer, "release.yml", "other.yml", 1)
		}, "recorded " + lock.ProvenanceGitHub + " by " + strings.Replace(signer, "release.yml", "other.yml", 1)},
		{"kind", func(p *lock.Provenance) { p.Kind = lock.ProvenanceKey }, "recorded " + lock.ProvenanceKey + " by " + signer},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := w.ReadLock()
			rec := *l.Find("acme/grep").Provenance
			tt.edit(&rec)
			if rec == *l.Find("acme/grep").Provenance {
				t.Fatal("the edit changed nothing")
			}
			if err := l.SetProvenance("acme/grep", rec); err != nil {
				t.Fatal(err)
			}
			in := verify.Input{Project: w.Proj, Lock: l, CAS: w.CAS, Platform: "linux-x86_64",
				Verifier: &sigstore.Local{Roots: sigstore.NewRoots(w.CA.Material())}}
			rep, err := verify.Run(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Provenance) != 0 || len(rep.Problems) != 1 {
				t.Fatalf("an edited %s passed: %+v", tt.name, rep)
			}
			p := rep.Problems[0]
			if p.Kind != "provenance" || !strings.Contains(p.Problem, "provenance-mismatch") ||
				!strings.Contains(p.Problem, "proves "+lock.ProvenanceGitHub+" by "+signer) || !strings.Contains(p.Problem, tt.says) {
				t.Fatalf("problem = %+v; want a provenance-mismatch naming %q", p, tt.says)
			}
		})
	}
}

// The lock names the bundle; the CAS holds whatever blob has that digest. One over the bundle
// bound is refused by its size, before it is read or hashed, and verify says so.
func TestVerifyRefusesAnOversizedBundle(t *testing.T) {
	t.Parallel()
	w := pulltest.NewProvWorld(t, "GitHub, Inc.")
	w.Attest(t, provenancetest.GoodLeaf(), true)
	w.MustPull(w.Puller(""), pulltest.Req(grep, "1.2.0"))
	big := bytes.Repeat([]byte{'{'}, provenance.MaxBundleSize+1)
	d, err := w.CAS.Ingest(context.Background(), bytes.NewReader(big), int64(len(big)), digest.FromBytes(big))
	if err != nil {
		t.Fatal(err)
	}
	l := w.ReadLock()
	rec := *l.Find("acme/grep").Provenance
	rec.Bundle = d.String()
	if err := l.SetProvenance("acme/grep", rec); err != nil {
		t.Fatal(err)
	}
	in := verify.Input{Project: w.Proj, Lock: l, CAS: w.CAS, Platform: "linux-x86_64",
		Verifier: &sigstore.Local{Roots: sigstore.NewRoots(w.CA.Material())}}
	rep, err := verify.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Provenance) != 0 || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].Problem, "over the 4194304") {
		t.Fatalf("an oversized bundle: %+v", rep)
	}
}

// mur verify re-checks a recorded bundle under the scope's policy as it stands: a
// signer_workflow set since the pull that the recorded signer is outside of is a problem, and
// one the signer is inside of passes.
func TestVerifyAppliesTheScopesPolicy(t *testing.T) {
	t.Parallel()
	w := pulltest.NewProvWorld(t, "GitHub, Inc.")
	w.Attest(t, provenancetest.GoodLeaf(), true)
	w.MustPull(w.Puller(""), pulltest.Req(grep, "1.2.0"))
	w.Fake.Close()
	for _, tt := range []struct {
		workflow string
		ok       bool
	}{
		{"https://github.com/acme/murmur-tools/.github/workflows/release.yml@", true},
		{"https://github.com/acme/murmur-tools/.github/workflows/nightly.yml@", false},
	} {
		t.Run(tt.workflow, func(t *testing.T) {
			in := verify.Input{Project: w.Proj, Lock: w.ReadLock(), CAS: w.CAS, Platform: "linux-x86_64",
				Verifier: &sigstore.Local{Roots: sigstore.NewRoots(w.CA.Material())},
				Policy: func(scope string) config.ProvenancePolicy {
					if scope != "acme" {
						t.Errorf("policy asked for scope %q", scope)
					}
					return config.ProvenancePolicy{Mode: config.ProvenanceRequire, SignerWorkflow: tt.workflow}
				}}
			rep, err := verify.Run(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if tt.ok {
				if len(rep.Problems) != 0 || len(rep.Provenance) != 1 {
					t.Fatalf("a signer inside signer_workflow: %+v", rep)
				}
				return
			}
			if len(rep.Provenance) != 0 || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].Problem, "provenance-mismatch") {
				t.Fatalf("a signer outside signer_workflow: %+v", rep)
			}
		})
	}
}

// mur verify re-verifies every recorded bundle offline and shows what it proves.
func TestVerifyReVerifiesRecordedBundles(t *testing.T) {
	t.Parallel()
	w := pulltest.NewProvWorld(t, "GitHub, Inc.")
	bundle := w.Attest(t, provenancetest.GoodLeaf(), true)
	w.MustPull(w.Puller(""), pulltest.Req(grep, "1.2.0"))
	w.Fake.Close() // offline from here on
	in := verify.Input{Project: w.Proj, Lock: w.ReadLock(), CAS: w.CAS, Platform: "linux-x86_64",
		Verifier: &sigstore.Local{Roots: sigstore.NewRoots(w.CA.Material())}}
	rep, err := verify.Run(context.Background(), in)
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
	if rep, _ = verify.Run(context.Background(), in); len(rep.Problems) != 1 || rep.Problems[0].Kind != "provenance" || !strings.Contains(rep.Problems[0].Problem, "provenance-unverifiable") {
		t.Fatalf("other roots: %+v", rep.Problems)
	}
	if rep.Bundles != 1 { // checked, and failed: still a bundle the summary counts
		t.Fatalf("other roots: %d bundles checked, want 1", rep.Bundles)
	}
	if err := os.Remove(w.CAS.Path(digest.FromBytes(bundle))); err != nil {
		t.Fatal(err)
	}
	in.Verifier = &sigstore.Local{Roots: sigstore.NewRoots(w.CA.Material())}
	if rep, _ = verify.Run(context.Background(), in); len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].Problem, "not in the CAS") {
		t.Fatalf("bundle gone: %+v", rep.Problems)
	}
}
