package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/sandbox/guesttest"
)

const (
	ownerID = 1234567
	repoID  = 7654321
)

func sourceCapsule(from string, artifacts ...string) string {
	return strings.Replace(capsuleYAML(artifacts...), "install: { from: [stores] }", "install: { from: ["+from+"] }", 1)
}

// githubWorld is a project whose scope acme is served by the GitHub test server.
func githubWorld(t *testing.T) (*world, *githubtest.Server, githubtest.Artifact) {
	gh := githubtest.New(t)
	gh.RequireToken("s3cret")
	gh.AddRepo("acme", "murmur-artifacts", ownerID, repoID)
	art := githubtest.Artifact{Name: "acme/hello", Version: "1.0.0", Release: "v1.0.0", Asset: "hello-1.0.0.mur.zip",
		Data: readFile(t, artifacttest.File(t, t.TempDir(), "hello", "1.0.0", guesttest.Build(t, "hello")))}
	gh.Publish("acme", "murmur-artifacts", "acme", art)
	w := newWorld(t)
	w.seedCompiled() // the guest runs here for what it does (compiled_seed_test.go)
	w.env = append(w.env, "MUR_GITHUB_API_BASE="+gh.APIURL(), "GITHUB_TOKEN=s3cret")
	w.write("murmur.yaml", sourceCapsule("stores, sources", "acme/hello@1.0.0"))
	return w, gh, art
}

func readFile(t testing.TB, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSourcePullPinsOwner is the newcomer's path for sources: a pull answered by a release,
// the owner pinned, and refusals with nothing written when the owner or the bytes change.
func TestSourcePullPinsOwner(t *testing.T) {
	t.Parallel()
	w, gh, art := githubWorld(t)
	r := w.ok("pull")
	if !strings.Contains(r.stdout, "pinned scope acme to github:acme/murmur-artifacts (owner id 1234567, repo id 7654321)") {
		t.Fatalf("pull does not say it pinned the owner: %s", r)
	}
	pin, ok := w.lock().Pin("acme")
	if !ok || pin.OwnerID != ownerID || pin.RepoID != repoID || pin.Source != "github:acme/murmur-artifacts" {
		t.Fatalf("lock:\n%s", w.lockBytes())
	}
	if e := w.lock().Find("acme/hello"); e == nil || e.SHA256.Any != art.SHA256() {
		t.Fatalf("lock:\n%s", w.lockBytes())
	}
	recs := w.ok("cache", "records", "--json")
	for _, want := range []string{"github:acme/murmur-artifacts", "v1.0.0", "hello-1.0.0.mur.zip", "1234567"} {
		if !strings.Contains(recs.stdout, want) {
			t.Errorf("records lack %q: %s", want, recs.stdout)
		}
	}
	for _, req := range gh.Requests() {
		if req.Server == githubtest.Storage && req.Header.Get("Authorization") != "" {
			t.Fatalf("the token reached the storage host: %+v", req)
		}
	}
	w.ok("run", "hello")

	// A locked pull whose digest is in the CAS asks GitHub nothing.
	gh.ResetRequests()
	w.ok("pull")
	if n := len(gh.Requests()); n != 0 {
		t.Fatalf("a warm locked pull made %d GitHub requests", n)
	}

	// The owner changes: refused, nothing written, and the message says what to do.
	good := w.lockBytes()
	os.RemoveAll(w.home)
	os.RemoveAll(filepath.Join(w.project, "tools"))
	gh.SetOwnerID("acme", "murmur-artifacts", 999)
	r = w.fails("owner-changed", "pull")
	for _, want := range []string{"acme", "1234567", "999", "mur lock forget-scope acme"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("owner-changed error lacks %q: %s", want, r.stderr)
		}
	}
	w.assertUnchanged(0, good)

	// The bytes change under the same tag: refused, nothing written.
	gh.SetOwnerID("acme", "murmur-artifacts", ownerID)
	evil := readFile(t, artifacttest.File(t, t.TempDir(), "hello", "1.0.0", []byte("\x00asm\x01\x00\x00\x00")))
	gh.ReplaceAssetBytes("acme", "murmur-artifacts", "v1.0.0", "hello-1.0.0.mur.zip", evil, true)
	w.fails("integrity", "pull")
	w.assertUnchanged(0, good)

	// An expected transfer is accepted explicitly.
	gh.ReplaceAssetBytes("acme", "murmur-artifacts", "v1.0.0", "hello-1.0.0.mur.zip", art.Data, false)
	gh.SetOwnerID("acme", "murmur-artifacts", 4242)
	w.ok("lock", "forget-scope", "acme")
	w.ok("pull")
	if pin, _ := w.lock().Pin("acme"); pin.OwnerID != 4242 {
		t.Fatalf("after forget-scope the new owner is not pinned:\n%s", w.lockBytes())
	}
	w.ok("verify")
}

func TestSourceNotGranted(t *testing.T) {
	t.Parallel()
	w, gh, _ := githubWorld(t)
	w.write("murmur.yaml", sourceCapsule("stores", "acme/hello@1.0.0"))
	w.write(".murmur/config.yaml", "sources:\n  acme: github:acme/murmur-artifacts\n")
	r := w.fails("not-found", "pull")
	if !strings.Contains(r.stderr, "github:acme/murmur-artifacts was not asked: install.from is [stores]") {
		t.Fatalf("error: %s", r.stderr)
	}
	if n := len(gh.Requests()); n != 0 {
		t.Fatalf("%d requests to GitHub without a sources grant", n)
	}
	w.assertUnchanged(0, "")
	// --from can only narrow: with sources granted, --from stores keeps GitHub out too.
	w.write("murmur.yaml", sourceCapsule("stores, sources", "acme/hello@1.0.0"))
	w.fails("not-found", "pull", "--from", "stores")
	w.assertUnchanged(0, "")
}

// testReliabilityMisbehavingGitHub runs alone (TestRunsAlone): its stalls wait out a short
// network timeout, which GitHub's other answers must beat.
func testReliabilityMisbehavingGitHub(t *testing.T) {
	scenario(t, "a GitHub server that misbehaves (wrong bytes, stalls, 5xx, rate limits)")
	w, gh, art := githubWorld(t)
	w.env = append(w.env, networkTimeout()) // the stalls wait it out
	faults := []struct {
		name, token string
		inflict     func()
	}{
		{"rate limit 403", "rate-limited", func() { gh.RateLimitPrimary(time.Now().Add(time.Hour)) }},
		{"rate limit 429", "rate-limited", func() { gh.RateLimitSecondary(42) }},
		{"always 5xx", "network", func() { gh.AlwaysFail(502) }},
		{"stall", "network", func() { gh.Stall(time.Minute) }},
		{"stall mid-body", "network", func() { gh.StallStorageBody(time.Minute) }},
		{"wrong bytes", "integrity", func() {
			gh.ReplaceAssetBytes("acme", "murmur-artifacts", "v1.0.0", "hello-1.0.0.mur.zip", append(append([]byte{}, art.Data...), 'x'), true)
		}},
	}
	for _, f := range faults {
		f.inflict()
		start := time.Now()
		r := w.fails(f.token, "pull")
		if time.Since(start) > slowdown.Scale(30*time.Second) {
			t.Errorf("%s: the pull took %s", f.name, time.Since(start))
		}
		if f.token == "rate-limited" && !strings.Contains(r.stderr, "GITHUB_TOKEN") && !strings.Contains(r.stderr, "token") {
			t.Errorf("%s: the error does not say a token helps: %s", f.name, r.stderr)
		}
		w.assertUnchanged(0, "")
		gh.Behave()
		gh.ReplaceAssetBytes("acme", "murmur-artifacts", "v1.0.0", "hello-1.0.0.mur.zip", art.Data, false)
	}
	gh.FailNext(2, 503)
	w.afterFault("acme/hello")
}
