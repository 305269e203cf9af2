package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/ref"
)

// TestFleetPullThroughCache is docs/fleets.md's pull-through cache: two docker-registry processes,
// one a `proxy:` cache of the other. Through the cache, as a store, a machine pulls a signed
// artifact with its bundle (distribution 2.8 has no referrers API: the fallback tag passes
// through); a fresh machine then pulls it with the upstream stopped. Named as mirror:, the cache
// is written nothing when it holds the artifact, and refuses once per command (denied, not
// network) when it does not. With the upstream down, a version the cache never served is
// not-found, and latest sees only what is cached.
func TestFleetPullThroughCache(t *testing.T) {
	t.Parallel()
	scenario(t, "a pull-through cache (docker-registry proxy:) as the fleet's store, with its upstream up and down")
	upstream := registrytest.Start(t)
	cache := registrytest.StartPullThrough(t, upstream.URL())
	upAddr := "oci://" + upstream.Addr() + "/murmur"
	cacheAddr := "oci://" + cache.Addr() + "/murmur"

	dir := t.TempDir()
	keyFile, pubPEM := teamKey(t, dir)
	publisher := newWorld(t)
	var hint string
	zips := map[string]string{}
	for i, v := range []string{"1.0.0", "1.1.0"} {
		zips[v] = artifacttest.File(t, t.TempDir(), "hello", v, artifacttest.Module(16<<10, uint64(900+i)))
		out := publisher.ok("push", "--json", zips[v], "--scope", "acme", "--store", upAddr, "--sign-key", keyFile)
		var pushed struct {
			Results []struct {
				Hint string `json:"signed_with"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(out.stdout), &pushed); err != nil || len(pushed.Results) != 1 || pushed.Results[0].Hint == "" {
			t.Fatalf("push --json: %v\n%s", err, out.stdout)
		}
		hint = pushed.Results[0].Hint
	}
	trust := "provenance: require\ntrusted_keys:\n  - hint: " + hint + "\n    pem: |\n      " +
		strings.ReplaceAll(strings.TrimSpace(pubPEM), "\n", "\n      ") + "\n"
	// Every machine behind the cache carries docs/fleets.md's config, the cache put in.
	page, err := os.ReadFile(filepath.Join(repoRoot, "docs", "fleets.md"))
	if err != nil {
		t.Fatal(err)
	}
	config, ok := snippetAfter(string(page), "test: pull-through-config")
	if !ok || !strings.Contains(config, "oci://cache.internal:5000/murmur") {
		t.Fatalf("docs/fleets.md has no pull-through-config snippet naming oci://cache.internal:5000/murmur:\n%s", config)
	}
	config = strings.ReplaceAll(config, "oci://cache.internal:5000/murmur", cacheAddr)
	machine := func(version string) *world {
		w := newWorld(t)
		w.writeHome("config.yaml", trust)
		w.write("murmur.yaml", capsuleYAML("acme/hello@"+version))
		w.write(".murmur/config.yaml", config)
		return w
	}
	signedBy := func(w *world) {
		t.Helper()
		e := w.lock().Find("acme/hello")
		if e == nil || e.Provenance == nil || e.Provenance.Kind != "key" || e.Provenance.Signer != hint {
			t.Fatalf("the pin recorded no keyed provenance:\n%s", w.lockBytes())
		}
	}

	// The first machine, through the cache.
	first := machine("1.0.0")
	res := pullResults(t, first.ok("--json", "pull", "--no-precompile"))
	payload := digest.Digest(fileDigest(t, zips["1.0.0"]))
	if len(res) != 1 || res[0].Origin != cacheAddr || res[0].Digest != payload.String() {
		t.Fatalf("through the cache: %+v, want %s from %s", res, payload, cacheAddr)
	}
	signedBy(first)
	// The cache stores a blob it served from a download of its own that ends after ours: the
	// upstream may stop only once both blobs are in the cache's storage.
	up, err := ocistore.Open(upAddr, ocistore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bundles, err := up.(store.BundleFinder).Bundles(context.Background(), ref.Name{Scope: "acme", Name: "hello"}, "1.0.0", payload)
	if err != nil || len(bundles) != 1 {
		t.Fatalf("the upstream's bundles: %d, %v", len(bundles), err)
	}
	cache.WaitStored(t, payload, digest.FromBytes(bundles[0]))

	t.Run("as-mirror", func(t *testing.T) {
		// What the cache holds already (here through its upstream) is looked at, not written:
		// no PUT, so nothing to refuse and no warning.
		m := machine("1.0.0")
		m.write(".murmur/config.yaml", "stores: [\""+upAddr+"\"]\nmirror: \""+cacheAddr+"\"\n")
		r := m.ok("--json", "pull", "--no-precompile")
		got := pullResults(t, r)
		if len(got) != 1 || got[0].Origin != upAddr || got[0].Mirror == nil || !got[0].Mirror.Pushed || got[0].Mirror.Error != nil {
			t.Fatalf("the cache named as mirror: %+v\n%s", got, r)
		}
		if strings.Contains(r.stderr, "warning") {
			t.Errorf("a mirror that holds the artifact already cost a warning: %s", r.stderr)
		}

		// What the upstream does not hold: the cache refuses the first write (405), which is
		// denied, said once for the command, and the pull succeeds.
		layout := filepath.Join(t.TempDir(), "layout")
		var refs []string
		for i, n := range []string{"hola", "adios", "ciao"} {
			f := artifacttest.File(t, t.TempDir(), n, "1.0.0", artifacttest.Module(4<<10, uint64(950+i)))
			publisher.ok("push", f, "--scope", "acme", "--store", "oci-layout:"+layout)
			refs = append(refs, "acme/"+n+"@1.0.0")
		}
		o := newWorld(t)
		o.write("murmur.yaml", capsuleYAML(refs...))
		o.write(".murmur/config.yaml", "stores: [\"oci-layout:"+layout+"\"]\nmirror: \""+cacheAddr+"\"\n")
		r = o.ok("--json", "pull", "--no-precompile")
		if n := strings.Count(r.stderr, "refused a write"); n != 1 || strings.Count(r.stderr, "\n") != 1 ||
			!strings.Contains(r.stderr, cacheAddr) || !strings.Contains(r.stderr, "405") || strings.Contains(r.stderr, "network") {
			t.Errorf("want one line saying the cache refused a write, got:\n%s", r.stderr)
		}
		for _, g := range pullResults(t, r) {
			if g.Mirror == nil || g.Mirror.Pushed || g.Mirror.Error == nil || g.Mirror.Error.Token != "denied" {
				t.Errorf("%s: mirror %+v, want denied", g.Name, g.Mirror)
			}
		}
		o2 := newWorld(t)
		o2.write("murmur.yaml", capsuleYAML(refs...))
		o2.write(".murmur/config.yaml", "stores: [\"oci-layout:"+layout+"\"]\nmirror: \""+cacheAddr+"\"\nmirror_required: true\n")
		r = o2.fails("denied", "pull", "--no-precompile")
		if !strings.Contains(r.stderr, "mirror_required") || !strings.Contains(r.stderr, "pull-through cache is a store, not a mirror") || o2.lock().Find("acme/hola") == nil {
			t.Errorf("mirror_required with a cache as mirror: %s\n%s", r, o2.lockBytes())
		}
	})

	upstream.Stop()
	t.Logf("upstream %s stopped", upstream.Addr())

	t.Run("upstream-down", func(t *testing.T) {
		// A fresh machine with the same lock: the cache alone serves the payload and its bundle.
		second := machine("1.0.0")
		second.write("murmur.lock", first.lockBytes())
		got := pullResults(t, second.ok("--json", "pull", "--no-precompile"))
		if len(got) != 1 || got[0].Origin != cacheAddr || got[0].Digest != payload.String() {
			t.Fatalf("with the upstream down: %+v", got)
		}
		signedBy(second)
		if second.lockBytes() != first.lockBytes() {
			t.Errorf("the lock changed:\n%s\n---\n%s", first.lockBytes(), second.lockBytes())
		}

		// A version the cache never served reads as not-found: distribution says nothing of its
		// upstream. The versions the cache lists are what it holds.
		third := machine("1.1.0")
		r := third.fails("not-found", "pull", "--no-precompile")
		for _, want := range []string{cache.Addr(), "acme/hello", "1.1.0", "1.0.0"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("the miss does not mention %q: %s", want, r.stderr)
			}
		}
		third.assertUnchanged(0, "")

		// latest is the newest version the cache holds, not the upstream's 1.1.0.
		outside := newWorld(t)
		outside.writeHome("config.yaml", trust)
		r = outside.ok("pull", "acme/hello@latest", "--store", cacheAddr, "--no-precompile")
		if !strings.Contains(r.stdout, "acme/hello@1.0.0 ") {
			t.Errorf("latest through the cache with its upstream down: %s", r)
		}
	})
}

// TestFleetPullThroughCacheFanOut measures docs/fleets.md's advice to warm a cache once per new
// lock: machines that pull at once through a cold cache each pass their miss through to the
// upstream (distribution also downloads the blob once more for itself), while behind a cache one
// `mur warm` filled, the same fan-out costs the upstream no download of the payload.
func TestFleetPullThroughCacheFanOut(t *testing.T) {
	t.Parallel()
	scenario(t, "a pull-through cache: a cold fan-out passes its misses upstream, a warmed one does not")
	const machines = 6
	upstream := registrytest.Start(t)
	counted := proxytest.Start(t, upstream.Addr(), proxytest.Options{})
	upAddr := "oci://" + upstream.Addr() + "/murmur"
	zip := artifacttest.File(t, t.TempDir(), "hello", "1.0.0", artifacttest.Module(2<<20, 990))
	payload := digest.Digest(fileDigest(t, zip))
	newWorld(t).ok("push", zip, "--scope", "acme", "--store", upAddr)
	blobPath := "/v2/murmur/acme/hello/blobs/" + payload.String()

	fanOut := func(cache *registrytest.Registry, lockBytes string) {
		t.Helper()
		var ws []*world
		var cmds []*exec.Cmd
		for range machines {
			w := newWorld(t)
			w.write("murmur.yaml", capsuleYAML("acme/hello@1.0.0"))
			w.stores("oci://" + cache.Addr() + "/murmur")
			if lockBytes != "" {
				w.write("murmur.lock", lockBytes)
			}
			c := w.cmd("pull", "--no-precompile")
			var stderr strings.Builder
			c.Stderr = &stderr
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			ws, cmds = append(ws, w), append(cmds, c)
		}
		for i, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Fatalf("machine %d: %v: %s", i, err, c.Stderr)
			}
			if e := ws[i].lock().Find("acme/hello"); e == nil {
				t.Fatalf("machine %d pinned nothing", i)
			}
		}
	}

	cold := registrytest.StartPullThrough(t, counted.URL())
	fanOut(cold, "")
	coldGETs := counted.Requests(blobPath)

	warmed := registrytest.StartPullThrough(t, counted.URL())
	warmer := newWorld(t)
	warmer.write("murmur.yaml", capsuleYAML("acme/hello@1.0.0"))
	warmer.stores("oci://" + warmed.Addr() + "/murmur")
	warmer.ok("pull", "--no-precompile")
	warmed.WaitStored(t, payload)
	before := counted.Requests(blobPath)
	fanOut(warmed, warmer.lockBytes())
	warmGETs := counted.Requests(blobPath) - before
	t.Logf("%d machines at once, 2 MiB payload: %d upstream GETs of it through a cold cache; %d to warm a cache, then %d for the fan-out",
		machines, coldGETs, before-coldGETs, warmGETs)
	if warmGETs != 0 {
		t.Errorf("the warmed cache passed %d downloads of the payload upstream, want 0", warmGETs)
	}
	if coldGETs < 2 {
		t.Errorf("the cold cache passed %d downloads upstream, want at least its own and one machine's", coldGETs)
	}
}
