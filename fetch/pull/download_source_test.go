package pull_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/github"
	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/slowdown"
)

// sourceWorld is acme/grep@1.0.0, about size bytes, released on the GitHub test server, whose
// storage host sits behind a counting proxy.
func sourceWorld(t *testing.T, size int, private bool) (*pulltest.World, *githubtest.Server, *proxytest.Proxy, pulltest.Packed) {
	t.Helper()
	fake := githubtest.New(t)
	if private {
		fake.RequireToken("t0ken")
	}
	fake.AddRepo("acme", "murmur-artifacts", 1, 2)
	p := pulltest.PackSized(t, "grep", "1.0.0", size, 501)
	fake.Publish("acme", "murmur-artifacts", "acme", githubtest.Artifact{Name: "acme/grep", Version: "1.0.0", Release: "v1.0.0", Asset: "grep-1.0.0.mur.zip", Data: p.Zip})
	px := proxytest.Start(t, fake.StorageURL(), proxytest.Options{})
	fake.AdvertiseVia(githubtest.Storage, px.URL())
	return pulltest.NewWorld(t), fake, px, p
}

func sourcePuller(w *pulltest.World, fake *githubtest.Server) *pull.Puller {
	pl := w.Puller()
	pl.Source = github.NewSource(github.NewClient(github.ClientOptions{BaseURL: fake.APIURL(), Token: "t0ken", Retries: 1, Timeout: slowdown.Scale(2 * time.Second)}), nil)
	return pl
}

func objectPath(fake *githubtest.Server) string {
	return "/objects/" + strconv.FormatInt(fake.AssetID("acme", "murmur-artifacts", "v1.0.0", "grep-1.0.0.mur.zip"), 10)
}

const assetLink = "/acme/murmur-artifacts/releases/download/v1.0.0/grep-1.0.0.mur.zip"

// A download a killed pull kept is continued from GitHub's storage with a fresh redirect (the
// links the killed process had are long expired), and only the rest is served.
func TestSourceContinuesAKeptDownload(t *testing.T) {
	t.Parallel()
	w, fake, px, p := sourceWorld(t, 1<<20, false)
	kept := len(p.Zip) / 2
	keep(w, p, kept, "github:acme/murmur-artifacts", "")
	fake.ExpireLinks()
	res := w.MustPull(sourcePuller(w, fake), pulltest.Req(grep, "1.0.0"))[0]
	if res.Digest != p.Digest().String() || res.Resumed != int64(kept) || res.Transferred != int64(len(p.Zip)-kept) {
		t.Fatalf("result %+v", res)
	}
	if served := px.BytesServed(objectPath(fake)); served != int64(len(p.Zip)-kept) {
		t.Errorf("storage served %d bytes of the asset, want %d", served, len(p.Zip)-kept)
	}
}

// A signed link that expires mid-download is replaced by a fresh redirect when the body breaks
// off and the download continues.
func TestSourceExpiredLinkMidDownload(t *testing.T) {
	t.Parallel()
	w, fake, px, p := sourceWorld(t, 1<<20, false)
	// The link expires as the body breaks off, whatever the machine's speed.
	px.Set(proxytest.Options{PathContains: objectPath(fake), BytesPerSecond: 2 << 20, Fault: proxytest.Cut, After: 400_000, Times: 1, OnFault: fake.ExpireLinks})
	res := w.MustPull(sourcePuller(w, fake), pulltest.Req(grep, "1.0.0"))[0]
	if res.Digest != p.Digest().String() {
		t.Fatalf("result %+v", res)
	}
	// The first link, the continuation on it (refused: expired), and one on a fresh link.
	if n := px.Requests(objectPath(fake)); n != 3 {
		t.Errorf("%d storage requests for the asset, want 3", n)
	}
	expired := 0
	for _, r := range fake.Requests() {
		if r.Server == githubtest.Storage && r.Status == 403 {
			expired++
		}
	}
	if expired != 1 {
		t.Errorf("storage refused %d expired links, want 1", expired)
	}
	if n := fake.Count(githubtest.Web, assetLink); n != 2 {
		t.Errorf("%d requests for the download link, want 2 (the first and a fresh redirect)", n)
	}
	if served := px.BytesServed(objectPath(fake)); served > int64(len(p.Zip))+4096 {
		t.Errorf("storage served %d bytes for a %d-byte asset", served, len(p.Zip))
	}
}

// Storage that ignores Range makes the pull start over, with a note.
func TestSourceStorageIgnoringRange(t *testing.T) {
	t.Parallel()
	w, fake, px, p := sourceWorld(t, 1<<20, false)
	keep(w, p, len(p.Zip)/2, "github:acme/murmur-artifacts", "")
	px.Set(proxytest.Options{IgnoreRange: true})
	res := w.MustPull(sourcePuller(w, fake), pulltest.Req(grep, "1.0.0"))[0]
	if res.Digest != p.Digest().String() || res.Resumed != 0 || !hasNote(res, "ignores Range") {
		t.Fatalf("result %+v", res)
	}
}

// A large asset is fetched over several connections from one redirect: a private repository
// spends one API download on it, not one per piece.
func TestSourceParallelOneRedirect(t *testing.T) {
	t.Parallel()
	for _, private := range []bool{false, true} {
		w, fake, px, p := sourceWorld(t, 1<<20, private)
		px.Set(proxytest.Options{PathContains: objectPath(fake), BytesPerSecond: 8 << 20})
		pl := sourcePuller(w, fake)
		pl.Limits.Connections, pl.Limits.ParallelMin, pl.Limits.Chunk = 4, 256<<10, 64<<10
		piecesFirst(pl)
		res := w.MustPull(pl, pulltest.Req(grep, "1.0.0"))[0]
		if res.Digest != p.Digest().String() || res.Connections != 4 {
			t.Fatalf("private %v: result %+v", private, res)
		}
		c := fake.Counts()
		if private && c.APIDownloads != 2 { // the index and the asset
			t.Errorf("private: %d API downloads, want 2", c.APIDownloads)
		}
		if !private && fake.Count(githubtest.Web, assetLink) != 1 {
			t.Errorf("%d requests for the download link, want 1", fake.Count(githubtest.Web, assetLink))
		}
		if served := px.BytesServed(objectPath(fake)); served != int64(len(p.Zip)) {
			t.Errorf("private %v: storage served %d bytes for a %d-byte asset", private, served, len(p.Zip))
		}
	}
}
