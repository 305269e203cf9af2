package pull_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/lock"
)

func TestPullWrongBlobBytes(t *testing.T) {
	t.Parallel()
	f := registrytest.StartFaulty(t)
	st := pulltest.FaultyStore(t, f, ocistore.Options{})
	w := pulltest.NewWorld(t)
	before := w.Seeded(st)
	p := pulltest.Pack(t, "grep", "1.0.0", 2)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	other := pulltest.Pack(t, "grep", "1.0.0", 3).Zip
	// Same length, other bytes: only the hash can tell.
	body := make([]byte, len(p.Zip))
	copy(body, other)
	f.Arm(registrytest.BlobBody(len(body), body))
	_, err := w.Pull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.Integrity, p.Digest().String(), f.Addr())
	w.AssertUnchanged(before)
	w.AssertFailedRecord(grep, errs.Integrity)
}

func TestPullShortBody(t *testing.T) {
	t.Parallel()
	f := registrytest.StartFaulty(t)
	st := pulltest.FaultyStore(t, f, ocistore.Options{})
	w := pulltest.NewWorld(t)
	before := w.Seeded(st)
	p := pulltest.Pack(t, "grep", "1.0.0", 4)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	f.Arm(registrytest.BlobBody(len(p.Zip), p.Zip[:len(p.Zip)/3]))
	_, err := w.Pull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
	if !errors.Is(err, errs.Network) && !errors.Is(err, errs.Integrity) {
		t.Fatalf("a short body gave %v (token %s), want network or integrity", err, errs.TokenOf(err))
	}
	if !strings.Contains(err.Error(), "acme/grep") {
		t.Errorf("error %q does not name the artifact", err)
	}
	w.AssertKept(before)
	w.AssertFailedRecord(grep, errs.TokenOf(err))
	// The next pull continues from the bytes kept.
	f.Arm(nil)
	res := w.MustPull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
	if res[0].Resumed != int64(len(p.Zip)/3) || res[0].Transferred != int64(len(p.Zip)-len(p.Zip)/3) {
		t.Errorf("the next pull continued from %d and fetched %d bytes, want %d and %d", res[0].Resumed, res[0].Transferred, len(p.Zip)/3, len(p.Zip)-len(p.Zip)/3)
	}
	if after := w.State(); after.Kept != 0 || after.Ingest != 0 {
		t.Errorf("cas/ingest holds %d kept downloads and %d temporary files after the resumed pull", after.Kept, after.Ingest)
	}
}

func TestPullTransientFailuresRetried(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		code       int
		retryAfter string
	}{{500, ""}, {503, ""}, {429, "1"}} {
		t.Run(strconv.Itoa(c.code), func(t *testing.T) {
			t.Parallel()
			f := registrytest.StartFaulty(t)
			st := pulltest.FaultyStore(t, f, ocistore.Options{})
			w := pulltest.NewWorld(t)
			p := pulltest.Pack(t, "grep", "1.0.0", 5)
			pulltest.Push(t, st, grep, "1.0.0", "any", p)
			failed := &registrytest.FailFirst{N: 2, Status: c.code, RetryAfter: c.retryAfter}
			f.Arm(failed.Serve)
			res := w.MustPull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
			if res[0].Digest != p.Digest().String() || !w.CAS.Has(p.Digest()) {
				t.Fatalf("result %+v, blob present %v", res[0], w.CAS.Has(p.Digest()))
			}
			if n := failed.Served(); n < 4 {
				t.Fatalf("only %d failures were served; the fault did not hit both the manifest and the blob", n)
			}
			if rs := w.Records(); len(rs) != 1 || rs[0].Outcome != cas.OutcomePulled || rs[0].Source != pulltest.FaultyAddr(f) {
				t.Fatalf("records %+v", rs)
			}
		})
	}
}

func TestPullAlways503(t *testing.T) {
	t.Parallel()
	f := registrytest.StartFaulty(t)
	st := pulltest.FaultyStore(t, f, ocistore.Options{Retries: 1})
	w := pulltest.NewWorld(t)
	before := w.Seeded(st)
	pulltest.Push(t, st, grep, "1.0.0", "any", pulltest.Pack(t, "grep", "1.0.0", 6))
	f.Arm(registrytest.Always(http.StatusServiceUnavailable).Serve)
	_, err := w.Pull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.Network, f.Addr(), "503")
	w.AssertUnchanged(before)
	w.AssertFailedRecord(grep, errs.Network)
}

func TestPullStallIsBounded(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	f := registrytest.StartFaulty(t)
	w := pulltest.NewWorld(t)
	before := w.Seeded(pulltest.FaultyStore(t, f, ocistore.Options{}))
	p := pulltest.Pack(t, "grep", "1.0.0", 7)
	pulltest.Push(t, pulltest.FaultyStore(t, f, ocistore.Options{}), grep, "1.0.0", "any", p)
	f.Arm(registrytest.StallBlob(len(p.Zip), p.Zip[:100], release, nil))
	st := pulltest.FaultyStore(t, f, ocistore.Options{Timeout: slowdown.Scale(300 * time.Millisecond), Retries: 1})
	start := time.Now()
	_, err := w.Pull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.Network, "acme/grep")
	if el := time.Since(start); el > slowdown.Scale(20*time.Second) {
		t.Fatalf("a stalled pull took %s with a 300ms timeout", el)
	}
	w.AssertKept(before)
	w.AssertFailedRecord(grep, errs.Network)
}

func TestPullBadManifests(t *testing.T) {
	t.Parallel()
	f := registrytest.StartFaulty(t)
	st := pulltest.FaultyStore(t, f, ocistore.Options{})
	w := pulltest.NewWorld(t)
	before := w.Seeded(st)
	p := pulltest.Pack(t, "grep", "1.0.0", 8)
	d := pulltest.Push(t, st, grep, "1.0.0", "any", p)
	layer := fmt.Sprintf(`{"mediaType":%q,"digest":%q,"size":%d}`, "application/vnd.murmur.artifact.v1+zip", d.Digest, d.Size)
	config := `{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2}`
	manifest := func(version, layers string) string {
		return `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.murmur.artifact.v1","config":` + config +
			`,"layers":[` + layers + `],"annotations":{"dev.murmur.artifact.name":"acme/grep","dev.murmur.artifact.version":"` + version + `","dev.murmur.artifact.platform":"any"}}`
	}
	for _, c := range []struct{ version, raw, mentions string }{
		{"2.0.0", manifest("2.0.0", layer+","+layer), "2 layers"},
		{"3.0.0", manifest("3.0.0", strings.Replace(layer, "application/vnd.murmur.artifact.v1+zip", "application/x-tar", 1)), "application/x-tar"},
	} {
		f.PutManifest(t, "murmur/acme/grep", c.version, []byte(c.raw), string(types.OCIManifestSchema1))
		_, err := w.Pull(w.Puller(st), pulltest.Req(grep, c.version))
		errtest.WantToken(t, err, errs.Integrity, c.mentions)
		w.AssertUnchanged(before)
		w.AssertFailedRecord(grep, errs.Integrity)
	}
}

// TestPullTagMoved pins a digest, then finds the tag serving other bytes while the pinned blob is
// gone from the CAS and from the store.
func TestPullTagMoved(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	old := pulltest.Pack(t, "grep", "1.0.0", 9)
	first := pulltest.LayoutStore(t)
	pulltest.Push(t, first, grep, "1.0.0", "any", old)
	w.MustPull(w.Puller(first), pulltest.Req(grep, "1.0.0"))
	if err := os.Remove(w.CAS.Path(old.Digest())); err != nil {
		t.Fatal(err)
	}
	before := w.State()

	moved := pulltest.Pack(t, "grep", "1.0.0", 10)
	second := pulltest.LayoutStore(t)
	pulltest.Push(t, second, grep, "1.0.0", "any", moved)
	_, err := w.Pull(w.Puller(second), pulltest.Req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.LockConflict, old.Digest().String(), moved.Digest().String(), "--update", second.String())
	w.AssertUnchanged(before)
	w.AssertFailedRecord(grep, errs.LockConflict)

	// The same through a registry, whose tag is overwritten in place.
	f := registrytest.StartFaulty(t)
	reg := pulltest.FaultyStore(t, f, ocistore.Options{})
	pulltest.Push(t, reg, grep, "1.0.0", "any", moved)
	_, err = w.Pull(w.Puller(reg), pulltest.Req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.LockConflict, old.Digest().String(), moved.Digest().String(), "--update")
	w.AssertUnchanged(before)

	// With --update the new bytes are accepted and the lock moves.
	u := pulltest.Req(grep, "1.0.0")
	u.Update = true
	w.MustPull(w.Puller(second), u)
	l, _ := lock.Read(w.Proj.LockPath())
	if e := l.Find("acme/grep"); e == nil || e.SHA256.Any != moved.Digest().Encoded() {
		t.Fatalf("lock after --update: %+v", e)
	}
}

func TestPullUnreachableRegistry(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	w := pulltest.NewWorld(t)
	before := w.Seeded(pulltest.LayoutStore(t))
	st := pulltest.OpenStore(t, "oci://"+addr+"/murmur", ocistore.Options{Retries: 1})
	_, err = w.Pull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.Network, addr)
	w.AssertUnchanged(before)
	w.AssertFailedRecord(grep, errs.Network)
}

// TestPullPackedIdentityMismatch: a store must not swap one tool for another.
func TestPullPackedIdentityMismatch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		what          string
		name, version string
	}{{"name", "other", "1.0.0"}, {"version", "grep", "1.0.1"}} {
		t.Run(c.what, func(t *testing.T) {
			w := pulltest.NewWorld(t)
			st := pulltest.LayoutStore(t)
			before := w.Seeded(st)
			pulltest.Push(t, st, grep, "1.0.0", "any", pulltest.Pack(t, c.name, c.version, 11))
			_, err := w.Pull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
			errtest.WantToken(t, err, errs.Integrity, "acme/grep@1.0.0", strconv.Quote(c.name), strconv.Quote(c.version))
			w.AssertUnchanged(before)
			w.AssertFailedRecord(grep, errs.Integrity)
		})
	}
}

func TestPullLayoutTruncatedBlob(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	dir := filepath.Join(t.TempDir(), "store")
	st := pulltest.OpenStore(t, "oci-layout:"+dir, ocistore.Options{})
	before := w.Seeded(st)
	p := pulltest.Pack(t, "grep", "1.0.0", 12)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	blob := filepath.Join(dir, "blobs", "sha256", p.Digest().Encoded())
	if err := os.Chmod(blob, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blob, int64(len(p.Zip)/2)); err != nil {
		t.Fatal(err)
	}
	_, err := w.Pull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
	if err == nil {
		t.Fatal("a truncated layout blob was pulled")
	}
	errtest.WantToken(t, err, errs.TokenOf(err), p.Digest().String())
	if tok := errs.TokenOf(err); tok != errs.Integrity && tok != errs.Network {
		t.Errorf("token %s, want integrity", tok)
	}
	w.AssertUnchanged(before)
	w.AssertFailedRecord(grep, errs.TokenOf(err))
}
