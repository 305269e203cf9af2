package ocistore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
)

var grep = ref.Name{Scope: "acme", Name: "grep"}

// payload is deterministic pseudo-random bytes, different for each seed.
func payload(size int, seed uint64) []byte {
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func descFor(n ref.Name, version, platform string, data []byte) store.Descriptor {
	return store.Descriptor{
		Name:     n,
		Version:  version,
		Platform: platform,
		Digest:   digest.FromBytes(data),
		Size:     int64(len(data)),
		Title:    n.Name + "-" + version + ".mur.zip",
	}
}

func push(t testing.TB, s store.Store, n ref.Name, version, platform string, data []byte) store.Descriptor {
	t.Helper()
	d := descFor(n, version, platform, data)
	if err := s.Push(context.Background(), d, bytes.NewReader(data)); err != nil {
		t.Fatalf("Push %s@%s (%s): %v", n, version, platform, err)
	}
	return d
}

func readAll(t testing.TB, s store.Store, n ref.Name, d digest.Digest) []byte {
	t.Helper()
	rc, err := s.Open(context.Background(), n, d)
	if err != nil {
		t.Fatalf("Open %s: %v", d, err)
	}
	defer rc.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, rc); err != nil {
		t.Fatalf("reading %s: %v", d, err)
	}
	return buf.Bytes()
}

func open(t testing.TB, addr string, opt ocistore.Options) store.Store {
	t.Helper()
	s, err := ocistore.Open(addr, opt)
	if err != nil {
		t.Fatalf("Open(%q): %v", addr, err)
	}
	return s
}

// storeKinds gives each test a fresh store of every kind.
func storeKinds(t *testing.T) map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"layout": func(t *testing.T) store.Store {
			return open(t, "oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
		},
		"inprocess": func(t *testing.T) store.Store {
			r := registrytest.StartInProcess(t, nil)
			return open(t, "oci://"+r.Addr()+"/murmur", ocistore.Options{})
		},
		"docker-registry": func(t *testing.T) store.Store {
			r := registrytest.Start(t)
			return open(t, "oci://"+r.Addr()+"/murmur", ocistore.Options{})
		},
	}
}

func TestRoundTrip(t *testing.T) {
	for kind, mk := range storeKinds(t) {
		t.Run(kind, func(t *testing.T) {
			s := mk(t)
			data := payload(100_000, 1)
			want := push(t, s, grep, "1.2.0+build.7", "any", data)
			got, err := s.Resolve(context.Background(), grep, "1.2.0+build.7", "linux-x86_64")
			if err != nil {
				t.Fatal(err)
			}
			want.Origin = s.String()
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Resolve = %+v, want %+v", got, want)
			}
			// "latest" says what it chose from, for the CAS to keep (offline latest).
			if l, err := s.Resolve(context.Background(), grep, ref.Latest, "linux-x86_64"); err != nil || !reflect.DeepEqual(l.Versions, []string{"1.2.0+build.7"}) {
				t.Fatalf("Resolve latest = %+v, %v; want Versions [1.2.0+build.7]", l, err)
			}
			if b := readAll(t, s, grep, got.Digest); !bytes.Equal(b, data) {
				t.Fatalf("Open returned %d bytes that differ from the %d pushed", len(b), len(data))
			}
			_, err = s.Resolve(context.Background(), grep, "9.9.9", "any")
			errtest.WantToken(t, err, errs.NotFound, "acme/grep")
			_, err = s.Resolve(context.Background(), ref.Name{Scope: "acme", Name: "nothing"}, "1.0.0", "any")
			errtest.WantToken(t, err, errs.NotFound, "acme/nothing")
			_, err = s.Open(context.Background(), grep, digest.FromString("absent"))
			errtest.WantToken(t, err, errs.NotFound, digest.FromString("absent").String())
		})
	}
}

// TestRegistryManifestShape checks, with go-containerregistry reading the real registry, the
// exact manifest SPEC section 7 describes.
func TestRegistryManifestShape(t *testing.T) {
	r := registrytest.Start(t)
	s := open(t, "oci://"+r.Addr()+"/murmur", ocistore.Options{})
	data := payload(1000, 2)
	d := push(t, s, grep, "1.2.0+x", "any", data)

	tag, err := name.NewTag(r.Addr()+"/murmur/acme/grep:1.2.0_x", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Get(tag)
	if err != nil {
		t.Fatal(err)
	}
	if got.MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("media type %q", got.MediaType)
	}
	var m struct {
		MediaType    string
		ArtifactType string
		Config       struct {
			MediaType string
			Digest    string
			Size      int64
		}
		Layers []struct {
			MediaType   string
			Digest      string
			Size        int64
			Annotations map[string]string
		}
		Annotations map[string]string
	}
	if err := json.Unmarshal(got.Manifest, &m); err != nil {
		t.Fatal(err)
	}
	if m.ArtifactType != "application/vnd.murmur.artifact.v1" || m.Config.MediaType != "application/vnd.oci.empty.v1+json" ||
		m.Config.Digest != digest.FromString("{}").String() || m.Config.Size != 2 {
		t.Errorf("manifest head %+v", m)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != "application/vnd.murmur.artifact.v1+zip" || m.Layers[0].Digest != d.Digest.String() ||
		m.Layers[0].Size != d.Size || m.Layers[0].Annotations["org.opencontainers.image.title"] != d.Title {
		t.Errorf("layers %+v", m.Layers)
	}
	if m.Annotations["dev.murmur.artifact.name"] != "acme/grep" || m.Annotations["dev.murmur.artifact.version"] != "1.2.0+x" || m.Annotations["dev.murmur.artifact.platform"] != "any" {
		t.Errorf("annotations %v", m.Annotations)
	}
	// The empty config blob must be in the registry, or strict clients fail to pull.
	cfg, err := remote.Layer(tag.Context().Digest(m.Config.Digest))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cfg.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(b) != "{}" {
		t.Fatalf("config blob %q, %v", b, err)
	}
}

func TestLatest(t *testing.T) {
	for kind, mk := range storeKinds(t) {
		t.Run(kind, func(t *testing.T) {
			s := mk(t)
			var want store.Descriptor
			for i, v := range []string{"1.2.0", "1.10.0", "1.10.0-rc.1", "1.9.9", "not-semver", "1.10.0-rc.2"} {
				d := push(t, s, grep, v, "any", payload(100, uint64(10+i)))
				if v == "1.10.0" {
					want = d
				}
			}
			got, err := s.Resolve(context.Background(), grep, ref.Latest, "any")
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != "1.10.0" || got.Digest != want.Digest {
				t.Fatalf("latest = %s %s, want 1.10.0 %s", got.Version, got.Digest, want.Digest)
			}

			odd := ref.Name{Scope: "acme", Name: "odd"}
			push(t, s, odd, "v1", "any", payload(10, 20))
			push(t, s, odd, "2024.1", "any", payload(10, 21))
			_, err = s.Resolve(context.Background(), odd, ref.Latest, "any")
			errtest.WantToken(t, err, errs.Usage, "acme/odd", "explicitly")

			_, err = s.Resolve(context.Background(), ref.Name{Scope: "acme", Name: "none"}, ref.Latest, "any")
			errtest.WantToken(t, err, errs.NotFound, "acme/none")
		})
	}
}

func TestPlatforms(t *testing.T) {
	for kind, mk := range storeKinds(t) {
		t.Run(kind, func(t *testing.T) {
			s := mk(t)
			ctx := context.Background()
			// 2.0.0: the specific platform first, then any; 2.1.0: any first, then the platform.
			linux := push(t, s, grep, "2.0.0", "linux-x86_64", payload(300, 30))
			anyD := push(t, s, grep, "2.0.0", "any", payload(300, 31))
			anyD1 := push(t, s, grep, "2.1.0", "any", payload(300, 32))
			linux1 := push(t, s, grep, "2.1.0", "linux-x86_64", payload(300, 33))
			mac := push(t, s, grep, "2.1.0", "darwin-aarch64", payload(300, 34))
			only := push(t, s, grep, "3.0.0", "linux-aarch64", payload(300, 35))

			cases := []struct {
				version, platform string
				want              store.Descriptor
			}{
				{"2.0.0", "linux-x86_64", linux},
				{"2.0.0", "darwin-aarch64", anyD},
				{"2.0.0", "any", anyD},
				{"2.1.0", "linux-x86_64", linux1},
				{"2.1.0", "darwin-aarch64", mac},
				{"2.1.0", "darwin-x86_64", anyD1},
				{"3.0.0", "linux-aarch64", only},
			}
			for _, c := range cases {
				got, err := s.Resolve(ctx, grep, c.version, c.platform)
				if err != nil {
					t.Fatalf("Resolve %s %s: %v", c.version, c.platform, err)
				}
				if got.Digest != c.want.Digest || got.Platform != c.want.Platform {
					t.Errorf("Resolve %s %s = %s (%s), want %s (%s)", c.version, c.platform, got.Digest, got.Platform, c.want.Digest, c.want.Platform)
				}
				if b := readAll(t, s, grep, got.Digest); digest.FromBytes(b) != c.want.Digest {
					t.Errorf("Open %s returned other bytes", got.Digest)
				}
			}
			// Another platform's payload is never used.
			for _, p := range []string{"linux-x86_64", "any", "darwin-aarch64"} {
				_, err := s.Resolve(ctx, grep, "3.0.0", p)
				errtest.WantToken(t, err, errs.NotFound, "linux-aarch64", p)
			}
		})
	}
}

// unreadable fails the test if a push reads its payload.
type unreadable struct{ t testing.TB }

func (u unreadable) Read([]byte) (int, error) {
	u.t.Error("the payload was read although the store already held it")
	return 0, io.ErrUnexpectedEOF
}

func TestPushConflictAndIdempotence(t *testing.T) {
	for kind, mk := range storeKinds(t) {
		t.Run(kind, func(t *testing.T) {
			s := mk(t)
			ctx := context.Background()
			first := push(t, s, grep, "1.0.0", "any", payload(500, 40))
			second := descFor(grep, "1.0.0", "any", payload(500, 41))
			err := s.Push(ctx, second, bytes.NewReader(payload(500, 41)))
			errtest.WantToken(t, err, errs.LockConflict, "acme/grep", "1.0.0", first.Digest.String(), second.Digest.String())

			if err := s.Push(ctx, first, unreadable{t}); err != nil {
				t.Fatalf("re-push of the same digest: %v", err)
			}
			got, err := s.Resolve(ctx, grep, "1.0.0", "any")
			if err != nil || got.Digest != first.Digest {
				t.Fatalf("after the refused push, Resolve = %s, %v; want %s", got.Digest, err, first.Digest)
			}

			// The same holds inside an index.
			lin := push(t, s, grep, "1.1.0", "linux-x86_64", payload(500, 42))
			push(t, s, grep, "1.1.0", "any", payload(500, 43))
			err = s.Push(ctx, descFor(grep, "1.1.0", "linux-x86_64", payload(500, 44)), bytes.NewReader(payload(500, 44)))
			errtest.WantToken(t, err, errs.LockConflict, lin.Digest.String())
			if err := s.Push(ctx, lin, unreadable{t}); err != nil {
				t.Fatalf("re-push into an index: %v", err)
			}

			// A payload that does not match its descriptor is refused and leaves no tag.
			bad := descFor(grep, "1.2.0", "any", payload(500, 45))
			err = s.Push(ctx, bad, bytes.NewReader(payload(500, 46)))
			errtest.WantToken(t, err, errs.Integrity)
			_, err = s.Resolve(ctx, grep, "1.2.0", "any")
			errtest.WantToken(t, err, errs.NotFound)
			short := descFor(grep, "1.3.0", "any", payload(500, 47))
			err = s.Push(ctx, short, bytes.NewReader(payload(500, 47)[:400]))
			errtest.WantToken(t, err, errs.Integrity)

			// Bad input is refused before anything is written.
			err = s.Push(ctx, descFor(grep, "latest", "any", []byte("x")), strings.NewReader("x"))
			errtest.WantToken(t, err, errs.Usage, "latest")
			err = s.Push(ctx, descFor(grep, "1.0.0", "windows-x86_64", []byte("x")), strings.NewReader("x"))
			errtest.WantToken(t, err, errs.Usage, "windows-x86_64")
		})
	}
}

func TestOpenAddresses(t *testing.T) {
	for _, addr := range []string{"", "http://host/x", "oci:/host/x", "oci://", "oci:///prefix", "oci://Bad Host/x", "oci://host/UPPER", "oci-layout:"} {
		_, err := ocistore.Open(addr, ocistore.Options{})
		errtest.WantToken(t, err, errs.InvalidConfig, "oci://HOST[:PORT]/PREFIX", "oci-layout:PATH")
	}
	for _, c := range []struct{ addr, want string }{
		{"oci://127.0.0.1:5000/murmur", "oci://127.0.0.1:5000/murmur"},
		{"oci://registrytest.internal/a/b/", "oci://registrytest.internal/a/b"},
		{"oci://[::1]:5000", "oci://[::1]:5000"},
		{"oci-layout:/srv/store", "oci-layout:/srv/store"},
	} {
		s, err := ocistore.Open(c.addr, ocistore.Options{})
		if err != nil {
			t.Errorf("Open(%q): %v", c.addr, err)
			continue
		}
		if s.String() != c.want {
			t.Errorf("Open(%q).String() = %q, want %q", c.addr, s.String(), c.want)
		}
	}
}

func TestUnreachableRegistry(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := open(t, "oci://"+addr+"/murmur", ocistore.Options{Retries: 1})
	_, err = s.Resolve(context.Background(), grep, "1.0.0", "any")
	errtest.WantToken(t, err, errs.Network, addr)
	_, err = s.Open(context.Background(), grep, digest.FromString("x"))
	errtest.WantToken(t, err, errs.Network, addr)
	err = s.Push(context.Background(), descFor(grep, "1.0.0", "any", []byte("x")), strings.NewReader("x"))
	errtest.WantToken(t, err, errs.Network, addr)
}

func TestLayoutFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s := open(t, "oci-layout:"+dir, ocistore.Options{})
	d := push(t, s, grep, "1.2.0", "any", payload(2000, 50))
	push(t, s, grep, "1.3.0", "linux-x86_64", payload(2000, 51))

	var idx struct {
		SchemaVersion int
		MediaType     string
		Manifests     []struct {
			MediaType   string
			Digest      string
			Annotations map[string]string
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &idx); err != nil {
		t.Fatal(err)
	}
	refs := map[string]string{}
	for _, m := range idx.Manifests {
		refs[m.Annotations[ocistore.AnnotationRefName]] = m.MediaType
	}
	if idx.SchemaVersion != 2 || refs["acme/grep:1.2.0"] != "application/vnd.oci.image.manifest.v1+json" || refs["acme/grep:1.3.0"] != "application/vnd.oci.image.index.v1+json" || len(refs) != 2 {
		t.Fatalf("index.json = %s", raw)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "oci-layout")); err != nil || !strings.Contains(string(b), `"imageLayoutVersion":"1.0.0"`) {
		t.Fatalf("oci-layout = %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", d.Digest.Encoded())); err != nil || digest.FromBytes(b) != d.Digest {
		t.Fatalf("payload blob: %v", err)
	}
	// No temporary file is left behind.
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if strings.HasPrefix(fi.Name(), ".mur-tmp-") {
			t.Errorf("leftover %s", p)
		}
		return nil
	})
}

func TestLayoutTruncatedBlob(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s := open(t, "oci-layout:"+dir, ocistore.Options{})
	d := push(t, s, grep, "1.2.0", "any", payload(5000, 60))
	blob := filepath.Join(dir, "blobs", "sha256", d.Digest.Encoded())
	if err := os.Chmod(blob, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blob, 1000); err != nil {
		t.Fatal(err)
	}
	_, err := s.Resolve(context.Background(), grep, "1.2.0", "any")
	errtest.WantToken(t, err, errs.Integrity, d.Digest.String(), "1000", "5000")
	_, err = s.Open(context.Background(), grep, d.Digest)
	errtest.WantToken(t, err, errs.Integrity, d.Digest.String(), "1000", "5000")

	// A re-push repairs it.
	if err := s.Push(context.Background(), d, bytes.NewReader(payload(5000, 60))); err != nil {
		t.Fatal(err)
	}
	if b := readAll(t, s, grep, d.Digest); digest.FromBytes(b) != d.Digest {
		t.Fatal("the re-push did not repair the blob")
	}

	// A damaged manifest is caught by its digest.
	got, _ := os.ReadFile(filepath.Join(dir, "index.json"))
	var idx struct{ Manifests []struct{ Digest string } }
	json.Unmarshal(got, &idx)
	mpath := filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(idx.Manifests[0].Digest, "sha256:"))
	os.Chmod(mpath, 0o644)
	if err := os.WriteFile(mpath, []byte(`{"schemaVersion":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = s.Resolve(context.Background(), grep, "1.2.0", "any")
	errtest.WantToken(t, err, errs.Integrity, idx.Manifests[0].Digest)
}

func TestLayoutConcurrentPushes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	const n = 12
	var wg sync.WaitGroup
	errc := make(chan error, 2*n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each goroutine opens its own store, as separate processes would.
			s, err := ocistore.Open("oci-layout:"+dir, ocistore.Options{})
			if err != nil {
				errc <- err
				return
			}
			data := payload(20_000, uint64(100+i))
			nm := ref.Name{Scope: "acme", Name: fmt.Sprintf("tool-%d", i)}
			errc <- s.Push(context.Background(), descFor(nm, "1.0.0", "any", data), bytes.NewReader(data))
			// Several platforms of one version, pushed at once, also all survive.
			p := ref.KnownPlatforms[i%len(ref.KnownPlatforms)]
			data = payload(1000, uint64(200+i))
			if i < len(ref.KnownPlatforms) {
				errc <- s.Push(context.Background(), descFor(grep, "5.0.0", p, data), bytes.NewReader(data))
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, "oci-layout:"+dir, ocistore.Options{})
	for i := 0; i < n; i++ {
		nm := ref.Name{Scope: "acme", Name: fmt.Sprintf("tool-%d", i)}
		got, err := s.Resolve(context.Background(), nm, "1.0.0", "any")
		if err != nil {
			t.Fatalf("lost %s: %v", nm, err)
		}
		if got.Digest != digest.FromBytes(payload(20_000, uint64(100+i))) {
			t.Fatalf("%s resolves to another digest", nm)
		}
	}
	for i, p := range ref.KnownPlatforms {
		got, err := s.Resolve(context.Background(), grep, "5.0.0", p)
		if err != nil || got.Digest != digest.FromBytes(payload(1000, uint64(200+i))) {
			t.Fatalf("lost platform %s of acme/grep@5.0.0: %v", p, err)
		}
	}
}
