package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
)

// attestedWorld is githubWorld with provenance required for acme, a test CA as the home's
// trusted_root, and acme/hello attested by it (served through bundle_url); it returns the
// artifact's digest and the bundle.
func attestedWorld(t *testing.T) (*world, *githubtest.Server, *provenancetest.CA, digest.Digest, []byte) {
	t.Helper()
	w, gh, art := githubWorld(t)
	ca := provenancetest.NewCA(t, "GitHub, Inc.")
	w.writeHome("roots.json", string(ca.TrustedRootJSON(t)))
	w.writeHome("config.yaml", "trusted_root: roots.json\nscopes:\n  acme:\n    provenance: require\n")
	d := digest.Digest("sha256:" + art.SHA256())
	bundle := ca.Mint(t, provenancetest.Statement(d.Encoded(), provenance.SLSAProvenanceV1), provenancetest.GoodLeaf())
	gh.AddAttestation("acme", "murmur-artifacts", d.String(), bundle, true)
	return w, gh, ca, d, bundle
}

// TestProvenanceThroughTheBinary: mur pulls acme/hello with a GitHub attestation served through
// bundle_url, verified by mur-provenance against the project's trusted_root, pins it in the lock,
// shows it in verify --json and cache records; a second artifact attested by another owner fails
// with the facts side by side and leaves nothing behind.
func TestProvenanceThroughTheBinary(t *testing.T) {
	t.Parallel()
	w, gh, ca, _, bundle := attestedWorld(t)

	w.ok("pull", "--no-precompile")
	e := w.lock().Find("acme/hello")
	if e.Provenance == nil || e.Provenance.Bundle != digest.FromBytes(bundle).String() || e.Provenance.Signer != provenancetest.GoodLeaf().SAN {
		t.Fatalf("lock:\n%s", w.lockBytes())
	}
	for _, r := range gh.Requests() {
		if r.Server != "api" && r.Header.Get("Authorization") != "" {
			t.Fatalf("GITHUB_TOKEN reached %s %s", r.Server, r.Path)
		}
	}

	var rep struct {
		Provenance []struct {
			Name         string `json:"name"`
			Signer       string `json:"signer"`
			OwnerID      int64  `json:"owner_id"`
			RepoID       int64  `json:"repo_id"`
			SourceCommit string `json:"source_commit"`
		} `json:"provenance"`
	}
	out := w.ok("verify", "--json")
	if err := json.Unmarshal([]byte(out.stdout), &rep); err != nil {
		t.Fatalf("verify --json: %v\n%s", err, out.stdout)
	}
	if p := rep.Provenance; len(p) != 1 || p[0].OwnerID != ownerID || p[0].RepoID != repoID || p[0].SourceCommit != provenancetest.GoodLeaf().Commit {
		t.Fatalf("verify --json provenance: %s", out.stdout)
	}
	if p := rep.Provenance; p[0].Signer != provenancetest.GoodLeaf().SAN {
		t.Fatalf("verify --json signer: %s", out.stdout)
	}
	var recs struct {
		Records []struct {
			Provenance *struct {
				Signer       string `json:"signer"`
				OwnerID      int64  `json:"owner_id"`
				RepoID       int64  `json:"repo_id"`
				SourceCommit string `json:"source_commit"`
			} `json:"provenance"`
		} `json:"records"`
	}
	rec := w.ok("cache", "records", "--json")
	if err := json.Unmarshal([]byte(rec.stdout), &recs); err != nil {
		t.Fatalf("cache records --json: %v\n%s", err, rec.stdout)
	}
	shown := false
	for _, r := range recs.Records {
		if p := r.Provenance; p != nil {
			shown = p.Signer == provenancetest.GoodLeaf().SAN && p.OwnerID == ownerID && p.RepoID == repoID && p.SourceCommit == provenancetest.GoodLeaf().Commit
		}
	}
	if !shown {
		t.Fatalf("cache records --json lacks the provenance facts: %s", rec.stdout)
	}
	table := w.ok("cache", "records").stdout
	for _, want := range []string{"PROVENANCE", "github-attestation by " + provenancetest.GoodLeaf().SAN, "owner 1234567, repository 7654321", "commit " + provenancetest.GoodLeaf().Commit} {
		if !strings.Contains(table, want) {
			t.Fatalf("cache records lacks %q:\n%s", want, table)
		}
	}

	// Another artifact, attested by a repository of another owner.
	evil := provenancetest.GoodLeaf()
	evil.OwnerID, evil.RepoID, evil.RepoURI = "55", "9990001", "https://github.com/evil/tools"
	w2, gh2, art2 := githubWorld(t)
	w2.writeHome("roots.json", string(ca.TrustedRootJSON(t)))
	w2.writeHome("config.yaml", "trusted_root: roots.json\n")
	d2 := digest.Digest("sha256:" + art2.SHA256())
	gh2.AddAttestation("acme", "murmur-artifacts", d2.String(), ca.Mint(t, provenancetest.Statement(d2.Encoded(), provenance.SLSAProvenanceV1), evil), false)
	r := w2.fails("provenance-mismatch", "pull", "--no-precompile")
	if !strings.Contains(r.stderr, "acme/hello@1.0.0 was attested by repository 9990001 (evil/tools), owner 55; murmur.lock pins owner 1234567, repository 7654321; run 'mur lock forget-scope acme' only if the transfer is expected") {
		t.Fatalf("the mismatch does not show the facts side by side: %s", r)
	}
	if _, err := os.Stat(filepath.Join(w2.project, "tools")); !os.IsNotExist(err) {
		t.Fatalf("tools/ exists after a refused pull: %v", err)
	}
	if w2.lockBytes() != "" || w2.blobCount() != 0 {
		t.Fatalf("a refused pull left a lock or blobs:\n%s", w2.lockBytes())
	}
}
