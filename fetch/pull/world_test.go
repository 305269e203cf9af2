package pull_test

import (
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/internal/download"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/ref"
)

// The pipeline's tests pull in pulltest's world, pinning through its plain lock writer.

var grep = ref.Name{Scope: "acme", Name: "grep"}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	must(t, os.WriteFile(path, data, 0o644))
}

func hooksOf(p *pull.Puller) *download.Hooks {
	if p.Limits.Hooks == nil {
		p.Limits.Hooks = &download.Hooks{}
	}
	return p.Limits.Hooks
}

// hashLast makes p hash a blob fetched over several connections once it is whole, instead of as
// the bytes from its start come in: the other way, for the benchmark that compares the two.
func hashLast(p *pull.Puller) { hooksOf(p).HashLast = true }

// splitAt makes p split a large blob's single stream into pieces once it has brought n bytes,
// however fast: n 0 goes to pieces before the first byte is written.
func splitAt(p *pull.Puller, n int64) {
	hooksOf(p).SplitWhen = func(got int64, _ time.Duration) bool { return got >= n }
}

// judgeFast makes p judge every large blob's stream fast, whatever the machine's speed, and
// counts how often the engine asked.
func judgeFast(p *pull.Puller, asked *atomic.Int64) {
	hooksOf(p).SplitWhen = func(int64, time.Duration) bool { asked.Add(1); return false }
}

// piecesFirst makes p fetch a large blob in pieces from the start, without the single stream
// that comes first otherwise.
func piecesFirst(p *pull.Puller) { hooksOf(p).PiecesFirst = true }

// proxiedGrep pushes acme/grep 1.0.0, a payload of size bytes made from seed, to an in-process
// registry, and returns the proxy in front of it, the store opened through that proxy with opt,
// and the artifact.
func proxiedGrep(t *testing.T, size int, seed uint64, opt ocistore.Options) (*proxytest.Proxy, store.Store, pulltest.Packed) {
	t.Helper()
	reg := registrytest.StartFaulty(t)
	px := proxytest.Start(t, reg.Addr(), proxytest.Options{})
	st := pulltest.OpenStore(t, "oci://"+px.Addr()+"/murmur", opt)
	p := pulltest.PackSized(t, "grep", "1.0.0", size, seed)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	return px, st, p
}
