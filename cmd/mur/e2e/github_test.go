package e2e

import (
	"bytes"
	"errors"
	"net/http"
	"os/exec"
	"sync"
	"testing"

	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/sandbox/guesttest"
)

// TestGitHubQuotaTenColdPulls is a fleet behind one address: ten machines pull, at once and cold,
// four artifacts each from a public repository whose API allows 60 calls an hour, GitHub's limit
// for a client without a token. Each machine has its own home and project, so nothing is shared
// but the address and its quota, as on a CI fleet behind one NAT. (One shared home would let
// pulls find each other's blobs and hide the cost.) Downloads go through the assets'
// browser_download_url, so a pull spends two API calls, the latest release and the repository,
// where downloading through the API would spend seven and exhaust the quota.
func TestGitHubQuotaTenColdPulls(t *testing.T) {
	t.Parallel()
	const machines, apiLimit = 10, 60
	gh := githubtest.New(t)
	gh.AddRepo("acme", "murmur-artifacts", ownerID, repoID)
	wasm := guesttest.Build(t, "hello")
	var arts []githubtest.Artifact
	var refs []string
	for _, name := range []string{"hello", "hola", "salut", "ciao"} {
		arts = append(arts, githubtest.Artifact{Name: "acme/" + name, Version: "1.0.0", Release: "v1.0.0", Asset: name + "-1.0.0.mur.zip",
			Data: readFile(t, artifacttest.File(t, t.TempDir(), name, "1.0.0", wasm))})
		refs = append(refs, "acme/"+name+"@1.0.0")
	}
	gh.Publish("acme", "murmur-artifacts", "acme", arts...)
	gh.ResetRequests()
	gh.LimitAPI(apiLimit)

	worlds := make([]*world, machines)
	for i := range worlds {
		w := newWorld(t)
		w.env = append(w.env, "MUR_GITHUB_API_BASE="+gh.APIURL())
		w.write("murmur.yaml", sourceCapsule("stores, sources", refs...))
		worlds[i] = w
	}
	outputs := make([]string, machines)
	errs := make([]error, machines)
	var wg sync.WaitGroup
	for i, w := range worlds {
		wg.Go(func() {
			c := w.cmd("pull", "--no-precompile")
			var out bytes.Buffer
			c.Stdout, c.Stderr = &out, &out
			errs[i], outputs[i] = c.Run(), out.String()
		})
	}
	wg.Wait()

	counts := gh.Counts()
	t.Logf("%d concurrent cold pulls of %d artifacts: %d API calls (limit %d an hour, %d of them asset downloads), %d download links, %d storage requests",
		machines, len(arts), counts.API, apiLimit, counts.APIDownloads, counts.Web, counts.Storage)
	for i, err := range errs {
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("machine %d: %v", i, err)
		}
		if err != nil {
			t.Errorf("machine %d: the pull failed: %v\n%s", i, err, outputs[i])
		}
	}
	if counts.API > apiLimit {
		t.Errorf("%d API calls, more than the %d allowed", counts.API, apiLimit)
	}
	for _, r := range gh.Requests() {
		if r.Status == http.StatusForbidden || r.Header.Get("Authorization") != "" {
			t.Errorf("%s %s: status %d, Authorization %q", r.Server, r.Path, r.Status, r.Header.Get("Authorization"))
		}
	}
	// Every asset, index included, came through its download link; none through the API.
	if want := machines * (len(arts) + 1); counts.APIDownloads != 0 || counts.Web != want || counts.Storage != want {
		t.Errorf("counts %+v: want no API downloads and %d download links", counts, want)
	}
	for i, w := range worlds {
		for _, a := range arts {
			if e := w.lock().Find(a.Name); e == nil || e.SHA256.Any != a.SHA256() {
				t.Errorf("machine %d: the lock lacks %s at %s:\n%s", i, a.Name, a.SHA256(), w.lockBytes())
			}
		}
		if n := w.blobCount(); n != len(arts) {
			t.Errorf("machine %d: %d blobs in the CAS, want %d", i, n, len(arts))
		}
	}
}

// TestGitHubTokenStaysOnTheAPI pulls from a public repository with GITHUB_TOKEN set: the API
// calls carry the token, the download link and storage never do (the test server refuses any
// credential there, which would make the pull fall back to the API endpoint).
func TestGitHubTokenStaysOnTheAPI(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	gh.AddRepo("acme", "murmur-artifacts", ownerID, repoID)
	art := githubtest.Artifact{Name: "acme/hello", Version: "1.0.0", Release: "v1.0.0", Asset: "hello-1.0.0.mur.zip",
		Data: readFile(t, artifacttest.File(t, t.TempDir(), "hello", "1.0.0", guesttest.Build(t, "hello")))}
	gh.Publish("acme", "murmur-artifacts", "acme", art)
	gh.ResetRequests()
	w := newWorld(t)
	w.env = append(w.env, "MUR_GITHUB_API_BASE="+gh.APIURL(), "GITHUB_TOKEN=s3cret")
	w.write("murmur.yaml", sourceCapsule("stores, sources", "acme/hello@1.0.0"))
	w.ok("pull", "--no-precompile")

	counts := gh.Counts()
	t.Logf("one pull with a token: %+v", counts)
	if counts.API == 0 || counts.APIDownloads != 0 || counts.Web != 2 || counts.Storage != 2 {
		t.Fatalf("counts %+v: want the index and the payload through their download links", counts)
	}
	for _, r := range gh.Requests() {
		auth := r.Header.Get("Authorization")
		if (r.Server == githubtest.API) != (auth == "Bearer s3cret") {
			t.Errorf("%s %s carried Authorization %q", r.Server, r.Path, auth)
		}
	}
	if e := w.lock().Find("acme/hello"); e == nil || e.SHA256.Any != art.SHA256() {
		t.Fatalf("lock:\n%s", w.lockBytes())
	}
}
