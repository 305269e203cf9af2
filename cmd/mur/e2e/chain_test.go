package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

// testReliabilityMirrorChain is the chain of stores, in order: one that never answers,
// one that answers 503, one that serves wrong bytes, and a good one. It runs alone (TestRunsAlone).
func testReliabilityMirrorChain(t *testing.T) {
	scenario(t, "a chain of stores: silent, 503, wrong bytes, good (fallback any-error, then not-found)")
	names := []string{"one", "two", "three"}
	files := map[string]string{} // name -> packed file
	blobs := map[string][]byte{} // digest -> the blob's bytes
	for i, n := range names {
		f := artifacttest.File(t, t.TempDir(), n, "1.0.0", artifacttest.Module(64<<10+i, uint64(600+i)))
		files[n] = f
		blobs[fileDigest(t, f)] = readFile(t, f)
	}
	silentUp := registrytest.StartFaulty(t)
	silent := proxytest.Start(t, silentUp.Addr(), proxytest.Options{Fault: proxytest.Silence})
	unavailable := registrytest.StartFaulty(t)
	wrong := registrytest.StartFaulty(t)
	goodReg := registrytest.Start(t)
	good := proxytest.Start(t, goodReg.Addr(), proxytest.Options{})
	w := newWorld(t)
	for _, n := range names {
		for _, addr := range []string{unavailable.Addr(), wrong.Addr(), goodReg.Addr()} {
			w.ok("push", files[n], "--scope", "e2e", "--store", "oci://"+addr+"/murmur")
		}
	}
	unavailable.Arm(registrytest.Always(http.StatusServiceUnavailable).Serve)
	wrong.Arm(func(rw http.ResponseWriter, r *http.Request, next http.Handler) {
		for d, b := range blobs {
			if registrytest.IsBlob(r) && strings.HasSuffix(r.URL.Path, d) {
				bad := bytes.Clone(b)
				bad[len(bad)/2] ^= 0xff
				rw.Write(bad)
				return
			}
		}
		next.ServeHTTP(rw, r)
	})
	addr := func(hostport string) string { return "oci://" + hostport + "/murmur" }
	chain := []string{addr(silent.Addr()), addr(unavailable.Addr()), addr(wrong.Addr()), addr(good.Addr())}
	var refs []string
	for _, n := range names {
		refs = append(refs, "e2e/"+n+"@1.0.0")
	}
	w.write("murmur.yaml", capsuleYAML(refs...))
	w.env = append(w.env, networkTimeout())

	// The two fallbacks run at once, each with stores of its own where it counts requests.
	t.Run("any-error", func(t *testing.T) {
		t.Parallel()
		var cfg strings.Builder
		cfg.WriteString("stores:\n")
		for _, a := range chain {
			fmt.Fprintf(&cfg, "  - {url: %q, fallback: any-error}\n", a)
		}
		w.write(".murmur/config.yaml", cfg.String())
		unavailableBefore := unavailable.Requests()
		res := pullResults(t, w.ok("--json", "pull", "--no-precompile"))
		for _, r := range res {
			if r.Origin != chain[3] || len(r.Skipped) != 3 {
				t.Fatalf("result %+v", r)
			}
			for i, tok := range []string{"network", "network", "integrity"} {
				if r.Skipped[i].Place != chain[i] || r.Skipped[i].Token != tok {
					t.Errorf("%s: skipped[%d] = %+v, want %s with %s", r.Name, i, r.Skipped[i], chain[i], tok)
				}
			}
			if !strings.Contains(r.Skipped[2].Reason, chain[2]) {
				t.Errorf("%s: the integrity refusal does not name the store: %s", r.Name, r.Skipped[2].Reason)
			}
		}
		t.Logf("3 artifacts: the silent store got %d request(s), the 503 store %d", silent.Requests(""), unavailable.Requests()-unavailableBefore)
		if n := silent.Requests(""); n != 1 {
			t.Errorf("the silent store got %d requests for 3 artifacts, want 1: one timeout per process", n)
		}
		// One ping, then the three manifests at once (none waits a round trip for another's
		// answer), each with its retries; nothing more once the failures marked the store down.
		if n, most := unavailable.Requests()-unavailableBefore, int64(1+3*(1+ocistore.DefaultRetries)); n > most {
			t.Errorf("the 503 store got %d requests for 3 artifacts, want at most %d: a ping, and each manifest with its retries", n, most)
		}
		recs := w.ok("cache", "records", "--json")
		if !strings.Contains(recs.stdout, "\"skipped\": [\n") || !strings.Contains(recs.stdout, chain[2]) {
			t.Errorf("the records do not say why the stores were skipped: %s", recs.stdout)
		}
		if r := w.mur("verify"); r.code != 0 {
			t.Fatalf("verify: %s", r)
		}
		// Without --json, each store the chain fell through for a failure is one warning.
		os.RemoveAll(w.home)
		os.Remove(filepath.Join(w.project, "murmur.lock"))
		r := w.ok("pull", "--no-precompile")
		for _, a := range chain[:3] {
			if n := strings.Count(r.stderr, "skipped "+a+": "); n != 1 {
				t.Errorf("%d warnings about %s: %s", n, a, r.stderr)
			}
		}
		if !strings.Contains(r.stderr, "skipped "+chain[2]+": integrity: ") {
			t.Errorf("no integrity warning naming the store with wrong bytes: %s", r.stderr)
		}
	})

	t.Run("not-found", func(t *testing.T) {
		t.Parallel()
		unavailable := registrytest.StartFaulty(t)
		unavailable.Arm(registrytest.Always(http.StatusServiceUnavailable).Serve)
		good := proxytest.Start(t, goodReg.Addr(), proxytest.Options{})
		w2 := newWorld(t)
		w2.env = append(w2.env, networkTimeout())
		w2.write("murmur.yaml", capsuleYAML(refs[0]))
		w2.stores(addr(unavailable.Addr()), addr(good.Addr()))
		r := w2.fails("network", "pull", "--no-precompile")
		for _, want := range []string{addr(unavailable.Addr()), "503", "fallback: not-found", "any-error"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("the error does not mention %q: %s", want, r.stderr)
			}
		}
		if n := good.Requests(""); n != 0 {
			t.Errorf("the store after the failed one got %d requests", n)
		}
		w2.assertUnchanged(0, "")
	})
}

// TestReliabilityWriteThroughFleet is the fleet recipe: one machine pulls from GitHub with the
// team registry as its mirror; another, with the same lock and only the registry, gets the same
// digests without a single request to GitHub.
func TestReliabilityWriteThroughFleet(t *testing.T) {
	t.Parallel()
	scenario(t, "write-through: one machine fills the team registry from GitHub, the others never ask GitHub")
	gh := githubtest.New(t)
	gh.AddRepo("acme", "murmur-artifacts", ownerID, repoID)
	var arts []githubtest.Artifact
	var refs []string
	for i, n := range []string{"hello", "hola"} {
		arts = append(arts, githubtest.Artifact{Name: "acme/" + n, Version: "1.0.0", Release: "v1.0.0", Asset: n + "-1.0.0.mur.zip",
			Data: readFile(t, artifacttest.File(t, t.TempDir(), n, "1.0.0", artifacttest.Module(32<<10, uint64(700+i))))})
		refs = append(refs, "acme/"+n+"@1.0.0")
	}
	gh.Publish("acme", "murmur-artifacts", "acme", arts...)
	reg := registrytest.Start(t)
	team := "oci://" + reg.Addr() + "/murmur"

	warm := newWorld(t)
	warm.env = append(warm.env, "MUR_GITHUB_API_BASE="+gh.APIURL())
	warm.write("murmur.yaml", sourceCapsule("stores, sources", refs...))
	warm.write(".murmur/config.yaml", "stores: [\""+team+"\"]\nmirror: \""+team+"\"\n")
	res := pullResults(t, warm.ok("--json", "pull", "--no-precompile"))
	for _, r := range res {
		if !strings.HasPrefix(r.Origin, "github:") || r.Mirror == nil || !r.Mirror.Pushed || r.Mirror.Store != team {
			t.Fatalf("the warming machine: %+v", r)
		}
		if len(r.Skipped) != 1 || r.Skipped[0].Token != "not-found" {
			t.Errorf("skipped %+v, want the team registry's not-found", r.Skipped)
		}
	}

	// From now on GitHub would fail every request, and counts them.
	gh.AlwaysFail(http.StatusInternalServerError)
	gh.ResetRequests()
	other := newWorld(t)
	other.env = append(other.env, "MUR_GITHUB_API_BASE="+gh.APIURL())
	other.write("murmur.yaml", sourceCapsule("stores, sources", refs...))
	other.write("murmur.lock", warm.lockBytes())
	other.write(".murmur/config.yaml", "stores: [\""+team+"\"]\n")
	got := pullResults(t, other.ok("--json", "pull", "--no-precompile"))
	for i, r := range got {
		if r.Digest != res[i].Digest || r.Origin != team {
			t.Errorf("another machine: %+v, want %s from %s", r, res[i].Digest, team)
		}
	}
	if other.lockBytes() != warm.lockBytes() {
		t.Errorf("the lock changed:\n%s\n---\n%s", warm.lockBytes(), other.lockBytes())
	}
	if n := len(gh.Requests()); n != 0 {
		t.Errorf("GitHub got %d requests from the machine that pulls from the team registry", n)
	}
	t.Logf("the second machine: %d GitHub requests", len(gh.Requests()))
	// And with GitHub gone entirely.
	gh.Close()
	third := newWorld(t)
	third.env = append(third.env, "MUR_GITHUB_API_BASE="+gh.APIURL())
	for _, f := range []string{"murmur.yaml", "murmur.lock", ".murmur/config.yaml"} {
		b, _ := os.ReadFile(filepath.Join(other.project, f))
		third.write(f, string(b))
	}
	third.ok("pull", "--no-precompile")
	if third.lockBytes() != warm.lockBytes() {
		t.Errorf("the lock changed on the third machine")
	}

	// A mirror that fails is reported and the pull succeeds; mirror_required makes it fail.
	dead := newWorld(t)
	dead.write("murmur.yaml", capsuleYAML(refs[0]))
	dead.write(".murmur/config.yaml", "stores: [\""+team+"\"]\nmirror: \"oci://127.0.0.1:1/murmur\"\n")
	r := dead.ok("pull", "--no-precompile")
	if !strings.Contains(r.stderr, "not written through to the mirror oci://127.0.0.1:1/murmur") {
		t.Errorf("a failed write-through is not reported: %s", r)
	}
	// Not recorded as mirrored, so the next pull tries again; required, it fails the command.
	dead.write(".murmur/config.yaml", "stores: [\""+team+"\"]\nmirror: \"oci://127.0.0.1:1/murmur\"\nmirror_required: true\n")
	r = dead.fails("network", "pull", "--no-precompile")
	if !strings.Contains(r.stderr, "mirror_required") || dead.lock().Find("acme/hello") == nil {
		t.Errorf("mirror_required: %s\n%s", r, dead.lockBytes())
	}
}
