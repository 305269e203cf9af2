package sigstore

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/errs"
)

// A real attestation from actions/attest-build-provenance (public repository
// malancas/attest-demo, reusable workflow bdehamer/workflows), captured in gh's test data:
// it must verify offline against the roots mur embeds, and its certificate names the
// repository and owner by id.
const (
	realSubject = "sha256:07e4b8c0e3580b3e4a1eb62c70f1ffb86004d3d94f50767cb404fa7a639b4d05"
	realOwnerID = 16248153
	realRepoID  = 804070735
)

func realExpect() Expect {
	return Expect{Artifact: "malancas/demo@0.0.0", Scope: "malancas", OwnerID: realOwnerID, RepoID: realRepoID}
}

func TestRealGitHubAttestationVerifiesOffline(t *testing.T) {
	raw, err := os.ReadFile("testdata/github-attestation.sigstore.json")
	if err != nil {
		t.Fatal(err)
	}
	roots, err := EmbeddedRoots()
	if err != nil {
		t.Fatal(err)
	}
	facts, err := Verify(raw, digest.Digest(realSubject), realExpect(), roots)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	want := Facts{Kind: KindGitHub, Signer: "https://github.com/bdehamer/workflows/.github/workflows/attest.yml@refs/heads/main",
		OwnerID: realOwnerID, RepoID: realRepoID, Repository: "malancas/attest-demo",
		SourceCommit: "8304c42402aa3a569882687e0642c359e5a74ac2", Runner: "github-hosted"}
	if facts != want {
		t.Fatalf("facts = %+v\nwant    %+v", facts, want)
	}
	// A trusted key takes nothing from the embedded roots.
	priv := ecdsaPEM(t)
	pub, _ := PublicKeyPEM(priv)
	keyed, err := roots.WithKeys([]TrustedKey{{PEM: pub}})
	if err != nil {
		t.Fatal(err)
	}
	if facts, err := Verify(raw, digest.Digest(realSubject), realExpect(), keyed); err != nil || facts != want {
		t.Fatalf("with trusted_keys: %+v, %v", facts, err)
	}
	// A reusable workflow is matched as a prefix of the SAN, and never as a substring.
	e := realExpect()
	e.SignerWorkflow = "https://github.com/bdehamer/workflows/.github/workflows/attest.yml@"
	if _, err := Verify(raw, digest.Digest(realSubject), e, roots); err != nil {
		t.Fatalf("prefix signer_workflow: %v", err)
	}
	e.SignerWorkflow = "bdehamer/workflows"
	if _, err := Verify(raw, digest.Digest(realSubject), e, roots); !errors.Is(err, errs.ProvenanceMismatch) {
		t.Fatalf("substring signer_workflow: %v, want provenance-mismatch", err)
	}
	// GitHub's own root alone does not hold the public-good CA: the bundle is unverifiable,
	// and the error tells the user what to do.
	gh, err := LoadRoots("roots/github.json")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Verify(raw, digest.Digest(realSubject), realExpect(), gh)
	if !errors.Is(err, errs.ProvenanceUnverifiable) || !strings.Contains(err.Error(), "update mur or set trusted_root") {
		t.Fatalf("github root only: %v", err)
	}
}
