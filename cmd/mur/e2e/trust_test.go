package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/tuftest"
)

// trustWorld is githubWorld with provenance required for acme and both instances' trusted roots
// refreshed from local TUF repositories (the home's tuf_repositories): public-good's serves the
// root mur embeds, GitHub's the root of ca. acme/hello is attested by signer.
func trustWorld(t *testing.T, ca, signer *provenancetest.CA) (w *world, pg, gh *tuftest.Repo) {
	t.Helper()
	w, ghs, art := githubWorld(t)
	pg = tuftest.New(t, readFile(t, filepath.Join("..", "..", "..", "fetch", "provenance", "sigstore", "roots", "public-good.json")))
	gh = tuftest.New(t, ca.TrustedRootJSON(t))
	w.writeHome("pg-root.json", string(pg.FirstRoot()))
	w.writeHome("gh-root.json", string(gh.FirstRoot()))
	w.writeHome("config.yaml", "scopes:\n  acme:\n    provenance: require\ntuf_repositories:\n  public-good: {url: "+pg.URL()+", root: pg-root.json}\n  github: {url: "+gh.URL()+", root: gh-root.json}\n")
	d := digest.Digest("sha256:" + art.SHA256())
	ghs.AddAttestation("acme", "murmur-artifacts", d.String(), signer.Mint(t, provenancetest.Statement(d.Encoded(), provenance.SLSAProvenanceV1), provenancetest.GoodLeaf()), true)
	return w, pg, gh
}

// The test, through the binary: a bundle signed under a rotated key is refused before
// `mur trust refresh` and verifies after it; the command says what changed, and --offline never
// fetches.
func TestTrustRefreshThroughTheBinary(t *testing.T) {
	t.Parallel()
	old, rotated := provenancetest.NewCA(t, "GitHub, Inc."), provenancetest.NewCA(t, "GitHub, Inc.")
	w, pg, gh := trustWorld(t, old, rotated)

	r := w.ok("trust", "refresh")
	if !strings.Contains(r.stdout, "github: trusted root updated (1 CA, 0 tlog keys, 0 CT log keys, 1 TSA; was ") || !strings.Contains(r.stdout, "public-good: unchanged (") {
		t.Fatalf("first refresh: %s", r)
	}
	gh.Publish(rotated.TrustedRootJSON(t))
	r = w.fails("provenance-unverifiable", "pull", "--no-precompile")
	if !strings.Contains(r.stderr, "run 'mur trust refresh'") {
		t.Fatalf("the refusal does not point at mur trust refresh: %s", r)
	}

	served := pg.Requests() + gh.Requests()
	w.fails("offline", "trust", "refresh", "--offline")
	if pg.Requests()+gh.Requests() != served {
		t.Fatal("mur trust refresh --offline reached a TUF repository")
	}

	r = w.ok("trust", "refresh", "--json")
	var rep struct {
		Roots []provenance.RootStatus `json:"roots"`
		Error *struct{}               `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Roots) != 2 || rep.Error != nil {
		t.Fatalf("trust refresh --json: %v\n%s", err, r.stdout)
	}
	if g := rep.Roots[1]; g.Instance != "github" || !g.Changed || g.Source != "tuf" || g.Repository != gh.URL() {
		t.Fatalf("github after the rotation: %+v", g)
	}
	w.ok("pull", "--no-precompile")
	if e := w.lock().Find("acme/hello"); e.Provenance == nil || e.Provenance.Signer != provenancetest.GoodLeaf().SAN {
		t.Fatalf("lock after the refresh:\n%s", w.lockBytes())
	}
	r = w.ok("trust", "show")
	if !strings.Contains(r.stdout, "root TUF delivered on "+time.Now().UTC().Format("2006-01-02")) {
		t.Fatalf("trust show: %s", r)
	}

	// The home's trusted_root replaces every root, and trust show says so.
	w.writeHome("roots.json", string(rotated.TrustedRootJSON(t)))
	cfg := readFile(t, filepath.Join(w.home, "config.yaml"))
	w.writeHome("config.yaml", "trusted_root: roots.json\n"+string(cfg))
	r = w.ok("trust", "show", "--json")
	var shown struct {
		TrustedRoot string `json:"trusted_root"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil || shown.TrustedRoot != filepath.Join(w.home, "roots.json") {
		t.Fatalf("trust show --json with trusted_root: %v\n%s", err, r.stdout)
	}
	if r = w.ok("trust", "show"); !strings.Contains(r.stdout, "trusted_root "+filepath.Join(w.home, "roots.json")+" replaces both") {
		t.Fatalf("trust show with trusted_root: %s", r)
	}
}

// A day after the last refresh, with the repositories unreachable, a pull still verifies against
// the cache, says so once, and does not fail.
func TestUnreachableTUFRepositoryWarnsOnce(t *testing.T) {
	t.Parallel()
	ca := provenancetest.NewCA(t, "GitHub, Inc.")
	w, pg, gh := trustWorld(t, ca, ca)
	w.ok("trust", "refresh")
	pg.Close()
	gh.Close()
	for _, inst := range provenance.Instances {
		p := filepath.Join(w.home, "trust", inst, "state.json")
		var st map[string]any
		if err := json.Unmarshal(readFile(t, p), &st); err != nil {
			t.Fatal(err)
		}
		st["attempted"] = time.Now().Add(-48 * time.Hour)
		data, _ := json.Marshal(st)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := w.ok("pull", "--no-precompile")
	if n := strings.Count(r.stderr, "github's TUF repository "+gh.URL()+" can't be reached"); n != 1 {
		t.Fatalf("the failed refresh is said %d times, want once: %s", n, r)
	}
	if !strings.Contains(r.stderr, "checking against the root TUF delivered on") {
		t.Fatalf("the warning does not say what was used instead: %s", r)
	}
	r = w.fails("network", "trust", "refresh")
	if !strings.Contains(r.stdout, "github: not refreshed; still using the root TUF delivered on ") || !strings.Contains(r.stdout, "public-good: not refreshed;") {
		t.Fatalf("a refresh that can't reach the repositories: %s", r)
	}
}
