package registrytest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/slowdown"
)

// StartPullThrough runs the real docker-registry as a pull-through cache of upstream (its
// http:// URL): distribution's `proxy: remoteurl:` mode. It serves what it has cached, asks
// upstream for the rest, and answers every write with 405 UNSUPPORTED.
func StartPullThrough(t testing.TB, upstream string) *Registry {
	t.Helper()
	r, err := launchWith(Binary, t.TempDir(), "proxy:\n  remoteurl: "+upstream+"\n")
	if err != nil {
		unavailable(t, err.Error())
		return nil
	}
	t.Cleanup(r.Stop)
	return r
}

// WaitStored waits until the real registry's storage holds every blob of ds, and fails the test
// if one is still missing after a generous wait. A pull-through cache stores a blob it served
// from a second download of its own that finishes after the client's, so a test that stops the
// upstream next must wait for that event.
func (r *Registry) WaitStored(t testing.TB, ds ...digest.Digest) {
	t.Helper()
	if r.storage == "" {
		t.Fatal("WaitStored: an in-process registry has no storage on disk")
	}
	deadline := time.Now().Add(slowdown.Scale(30 * time.Second))
	for _, d := range ds {
		data := filepath.Join(r.storage, "docker", "registry", "v2", "blobs", d.Algorithm().String(), d.Encoded()[:2], d.Encoded(), "data")
		for {
			if _, err := os.Stat(data); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the registry at %s has not stored blob %s (looked for %s)", r.addr, d, data)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
