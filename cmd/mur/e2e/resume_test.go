package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/slowdown"
)

// pullResult is the part of one `mur pull --json` result these tests read.
type pullResult struct {
	Name        string   `json:"name"`
	Digest      string   `json:"digest"`
	Origin      string   `json:"origin"`
	CacheHit    bool     `json:"cache_hit"`
	Transferred int64    `json:"transferred"`
	Resumed     int64    `json:"resumed"`
	Connections int      `json:"connections"`
	Notes       []string `json:"notes"`
	Warnings    []string `json:"warnings"`
	Skipped     []struct {
		Place, Token, Reason string
	} `json:"skipped"`
	Mirror *struct {
		Store  string `json:"store"`
		Pushed bool   `json:"pushed"`
		Error  *struct {
			Token   string `json:"token"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"mirror"`
}

func pullResults(t *testing.T, r result) []pullResult {
	t.Helper()
	var out struct {
		Results []pullResult `json:"results"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("pull --json: %v\n%s", err, r)
	}
	return out.Results
}

// killAt starts `mur pull` and SIGKILLs it once served() reaches at bytes; it returns served()
// at the kill.
func (w *world) killAt(t *testing.T, served func() int64, at int64, args ...string) int64 {
	t.Helper()
	c := w.cmd(append([]string{"pull", "--no-precompile"}, args...)...)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	reached := waitFor(func() bool { return served() >= at })
	c.Process.Signal(syscall.SIGKILL)
	c.Wait()
	if !reached {
		t.Fatalf("the pull was never served %d bytes (%d)", at, served())
	}
	return served()
}

// keptDownloads counts the downloads kept in cas/ingest for a later pull.
func (w *world) keptDownloads() int {
	ents, _ := os.ReadDir(filepath.Join(w.home, "cas", "ingest"))
	n := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "resume-") && !strings.HasSuffix(e.Name(), ".json") {
			n++
		}
	}
	return n
}

// inFlight bounds what a kill loses of a download: the bytes the server had sent that the
// killed pull had not made durable (the sockets' buffers, the MiB being written). It does not grow
// with the blob: 7 MiB on a quiet machine, 16 MiB with every core busy. Starting over instead of
// resuming would lose half the blob.
const inFlight = 32 << 20

// TestReliabilityResumeAfterKill is a 128 MiB pull from docker-registry killed at about half,
// then pulled again: the registry serves the blob once in all, and what was in flight at the
// kill (inFlight). Behind a server that ignores Range the second pull starts over and still pins
// the right bytes.
func TestReliabilityResumeAfterKill(t *testing.T) {
	t.Parallel()
	scenario(t, "SIGKILL at half of a 128 MiB pull, then resume with Range (and start over where Range is ignored)")
	const size = 128 << 20
	reg := registrytest.Start(t)
	px := proxytest.Start(t, reg.Addr(), proxytest.Options{})
	big := artifacttest.File(t, t.TempDir(), "big", "1.0.0", artifacttest.Module(size, 256))
	fi, _ := os.Stat(big)
	blob := "/v2/murmur/e2e/big/blobs/" + fileDigest(t, big)
	pusher := newWorld(t)
	pusher.ok("push", big, "--scope", "e2e", "--store", "oci://"+reg.Addr()+"/murmur")

	t.Run("resume", func(t *testing.T) {
		w := newWorld(t)
		w.stores("oci://" + px.Addr() + "/murmur")
		w.write("murmur.yaml", capsuleYAML("e2e/big@1.0.0"))
		start := px.BytesServed(blob)
		served := func() int64 { return px.BytesServed(blob) - start }
		px.Set(proxytest.Options{PathContains: "/blobs/", BytesPerSecond: 24 << 20})
		killed := w.killAt(t, served, fi.Size()/2)
		w.assertUnchanged(0, "")
		if w.keptDownloads() != 1 {
			t.Fatalf("the killed pull kept no download in cas/ingest")
		}
		// gc's default rules keep it for the next pull.
		w.ok("cache", "gc")
		if w.keptDownloads() != 1 {
			t.Fatalf("gc removed the kept download")
		}
		px.Set(proxytest.Options{})
		res := pullResults(t, w.ok("--json", "pull", "--no-precompile"))
		total := served()
		t.Logf("128 MiB blob: killed after %d bytes served, resumed at %d, %d bytes served in all (%.3f× the blob)", killed, res[0].Resumed, total, float64(total)/float64(fi.Size()))
		// What the kill left (the bytes from the start, and pieces beyond) is not fetched again:
		// only what was in flight when it came.
		if res[0].Resumed == 0 || res[0].Transferred > fi.Size()-killed+inFlight || res[0].Digest != fileDigest(t, big) {
			t.Fatalf("result %+v, after a kill at %d bytes served", res[0], killed)
		}
		if total > fi.Size()+inFlight {
			t.Errorf("the registry served %d bytes for a %d-byte blob over the two pulls, more than the blob and %d MiB in flight", total, fi.Size(), inFlight>>20)
		}
		if w.keptDownloads() != 0 {
			t.Errorf("a kept download is left after the resumed pull")
		}
		if r := w.mur("verify"); r.code != 0 {
			t.Fatalf("verify: %s", r)
		}
	})

	t.Run("ignores-range", func(t *testing.T) {
		w := newWorld(t)
		w.stores("oci://" + px.Addr() + "/murmur")
		w.write("murmur.yaml", capsuleYAML("e2e/big@1.0.0"))
		start := px.BytesServed(blob)
		served := func() int64 { return px.BytesServed(blob) - start }
		px.Set(proxytest.Options{PathContains: "/blobs/", BytesPerSecond: 96 << 20, IgnoreRange: true})
		w.killAt(t, served, fi.Size()/2)
		w.assertUnchanged(0, "")
		px.Set(proxytest.Options{IgnoreRange: true})
		res := pullResults(t, w.ok("--json", "pull", "--no-precompile"))
		if res[0].Digest != fileDigest(t, big) || res[0].Resumed != 0 || res[0].Transferred != fi.Size() {
			t.Fatalf("result %+v", res[0])
		}
		recs := w.ok("cache", "records", "--json")
		if !strings.Contains(recs.stdout, "ignores Range") || !strings.Contains(recs.stdout, "started over") {
			t.Errorf("the records do not say the pull started over: %s", recs.stdout)
		}
		if r := w.mur("verify"); r.code != 0 {
			t.Fatalf("verify: %s", r)
		}
	})
}

// TestReliabilityResumeFromGitHub is the same kill through the GitHub source, with the storage
// links expired before the second pull: it asks the download link for a fresh one.
func TestReliabilityResumeFromGitHub(t *testing.T) {
	t.Parallel()
	scenario(t, "SIGKILL at half of a 128 MiB pull from GitHub, resumed after its storage link expired")
	const size = 128 << 20
	gh := githubtest.New(t)
	gh.AddRepo("acme", "murmur-artifacts", ownerID, repoID)
	data := readFile(t, artifacttest.File(t, t.TempDir(), "big", "1.0.0", artifacttest.Module(size, 257)))
	gh.Publish("acme", "murmur-artifacts", "acme", githubtest.Artifact{Name: "acme/big", Version: "1.0.0", Release: "v1.0.0", Asset: "big-1.0.0.mur.zip", Data: data})
	px := proxytest.Start(t, gh.StorageURL(), proxytest.Options{})
	gh.AdvertiseVia(githubtest.Storage, px.URL())
	object := "/objects/" + strconv.FormatInt(gh.AssetID("acme", "murmur-artifacts", "v1.0.0", "big-1.0.0.mur.zip"), 10)
	link := "/acme/murmur-artifacts/releases/download/v1.0.0/big-1.0.0.mur.zip"

	w := newWorld(t)
	w.env = append(w.env, "MUR_GITHUB_API_BASE="+gh.APIURL())
	w.write("murmur.yaml", sourceCapsule("sources", "acme/big@1.0.0"))
	px.Set(proxytest.Options{PathContains: object, BytesPerSecond: 24 << 20})
	killed := w.killAt(t, func() int64 { return px.BytesServed(object) }, int64(len(data))/2)
	w.assertUnchanged(0, "")
	gh.ExpireLinks()
	links := gh.Count(githubtest.Web, link)
	px.Set(proxytest.Options{})
	res := pullResults(t, w.ok("--json", "pull", "--no-precompile"))
	total := px.BytesServed(object)
	t.Logf("128 MiB asset: resumed at %d, %d bytes served by storage in all (%.3f× the asset)", res[0].Resumed, total, float64(total)/float64(len(data)))
	if res[0].Resumed == 0 || res[0].Transferred > int64(len(data))-killed+inFlight || res[0].Digest != digest.FromBytes(data).String() {
		t.Fatalf("result %+v, after a kill at %d bytes served", res[0], killed)
	}
	if total > int64(len(data))+inFlight {
		t.Errorf("storage served %d bytes for a %d-byte asset over the two pulls, more than the asset and %d MiB in flight", total, len(data), inFlight>>20)
	}
	if n := gh.Count(githubtest.Web, link) - links; n != 1 {
		t.Errorf("the resumed pull opened the download link %d times, want 1 (a fresh redirect)", n)
	}
	if c := gh.Counts(); c.APIDownloads != 0 {
		t.Errorf("%d asset downloads through the API", c.APIDownloads)
	}
	if r := w.mur("verify"); r.code != 0 {
		t.Fatalf("verify: %s", r)
	}
}

// TestPullBrokenBodyResumes: a body cut mid-transfer is continued within the same pull.
func TestPullBrokenBodyResumes(t *testing.T) {
	t.Parallel()
	reg := registrytest.Start(t)
	px := proxytest.Start(t, reg.Addr(), proxytest.Options{})
	f := artifacttest.File(t, t.TempDir(), "cut", "1.0.0", artifacttest.Module(8<<20, 258))
	fi, _ := os.Stat(f)
	w := newWorld(t)
	w.ok("push", f, "--scope", "e2e", "--store", "oci://"+reg.Addr()+"/murmur")
	w.stores("oci://" + px.Addr() + "/murmur")
	w.write("murmur.yaml", capsuleYAML("e2e/cut@1.0.0"))
	blob := "/v2/murmur/e2e/cut/blobs/" + fileDigest(t, f)
	px.Set(proxytest.Options{PathContains: "/blobs/", Fault: proxytest.Cut, After: 3 << 20, Times: 2})
	res := pullResults(t, w.ok("--json", "pull", "--no-precompile"))
	if res[0].Digest != fileDigest(t, f) || res[0].Transferred != fi.Size() {
		t.Fatalf("result %+v", res[0])
	}
	if n := px.Requests(blob); n < 3 {
		t.Errorf("%d requests for the blob, want the first and one after each cut", n)
	}
	if served := px.BytesServed(blob); served > fi.Size()+(2<<20) {
		t.Errorf("%d bytes served for a %d-byte blob", served, fi.Size())
	}
}

// testPullParallelConnections: a large blob is fetched over --connections connections, within
// --jobs. It runs alone (TestRunsAlone).
func testPullParallelConnections(t *testing.T) {
	reg := registrytest.Start(t)
	px := proxytest.Start(t, reg.Addr(), proxytest.Options{})
	f := artifacttest.File(t, t.TempDir(), "wide", "1.0.0", artifacttest.Module(80<<20, 259))
	w := newWorld(t)
	w.ok("push", f, "--scope", "e2e", "--store", "oci://"+reg.Addr()+"/murmur")
	w.stores("oci://" + px.Addr() + "/murmur")
	w.write("murmur.yaml", capsuleYAML("e2e/wide@1.0.0"))
	blob := "/v2/murmur/e2e/wide/blobs/" + fileDigest(t, f)
	fi, _ := os.Stat(f)
	pieces := int((fi.Size() + 16<<20 - 1) / (16 << 20))
	if r := w.fails("usage", "pull", "--connections", "0"); r.code != 2 {
		t.Errorf("--connections 0: %s", r)
	}
	for _, c := range []struct {
		args  []string
		conns int
	}{{nil, 4}, {[]string{"--connections", "2"}, 2}, {[]string{"--jobs", "1"}, 1}, {[]string{"--connections", "1"}, 1}} {
		os.RemoveAll(w.home)
		os.Remove(filepath.Join(w.project, "murmur.lock"))
		// A stream is split into n connections only where the hashing and writing take its bytes
		// at least 2n times faster than it brings them (download.Connections): 16 MiB/s leaves
		// that margin even to a loaded machine, whose pace once split a 64 MiB/s stream into 3 and
		// into 1; a quarter of it under make test-under-load.
		rate := int64(64 << 20)
		if c.conns > 1 {
			rate = int64(float64(16<<20) / slowdown.Factor())
		}
		px.Set(proxytest.Options{PathContains: "/blobs/", BytesPerSecond: rate})
		before := px.Requests(blob)
		res := pullResults(t, w.ok(append([]string{"--json", "pull", "--no-precompile"}, c.args...)...))
		if res[0].Digest != fileDigest(t, f) || res[0].Connections != c.conns {
			t.Errorf("%v: %d connections, want %d", c.args, res[0].Connections, c.conns)
		}
		// One stream first, split once it proves slow; then a request per 16 MiB piece of the rest.
		if n := px.Requests(blob) - before; c.conns > 1 && (n < 2 || n > pieces+1) {
			t.Errorf("%v: %d requests for the blob, want the stream and at most one per 16 MiB piece (%d)", c.args, n, pieces)
		}
	}
}
