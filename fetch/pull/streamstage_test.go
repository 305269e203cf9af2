package pull_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/internal/download"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/internal/slowdown/deadline"
)

// pausingStore serves its blobs up to pauseAt bytes, then waits for release.
type pausingStore struct {
	store.Store
	pauseAt int
	paused  chan struct{}
	release chan struct{}
}

func (s *pausingStore) Open(ctx context.Context, n ref.Name, d digest.Digest) (io.ReadCloser, error) {
	rc, err := s.Store.Open(ctx, n, d)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, err
	}
	return io.NopCloser(io.MultiReader(bytes.NewReader(b[:s.pauseAt]), &gate{s: s}, bytes.NewReader(b[s.pauseAt:]))), nil
}

type gate struct{ s *pausingStore }

func (g *gate) Read([]byte) (int, error) {
	close(g.s.paused)
	<-g.s.release
	return 0, io.EOF
}

// TestPullStagesWhileDownloading pauses a download after the payload's last byte, before the
// zip's central directory: the payload is already written, whole, in an unnamed file, and
// tools/ does not exist until the blob is in, verified and pinned.
func TestPullStagesWhileDownloading(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	wasm := artifacttest.Module(2<<20, 5)
	spec := artifacttest.Spec{Name: "tool", Version: "1.0.0", Wasm: wasm}
	p := pulltest.Packed{Zip: spec.Zip(), Wasm: wasm, YAML: spec.Manifest()}
	st := pulltest.LayoutStore(t)
	n := ref.Name{Scope: "acme", Name: "tool"}
	pulltest.Push(t, st, n, "1.0.0", ref.PlatformAny, p)
	a, err := artifact.Read(bytes.NewReader(p.Zip), int64(len(p.Zip)))
	if err != nil {
		t.Fatal(err)
	}
	off, _, csize, _ := a.PayloadEntry()
	ps := &pausingStore{Store: st, pauseAt: int(off + csize), paused: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := w.Pull(w.Puller(ps), pulltest.Req(n, "1.0.0"))
		done <- err
	}()
	release := sync.OnceFunc(func() { close(ps.release) })
	defer release()
	deadline.Recv(t, ps.paused, "pause after the payload's last byte")
	scopeDir := filepath.Join(w.Proj.ToolsDir(), "acme")
	assertStagedUnseen(t, w, wasm)
	release()
	if err := deadline.Recv(t, done, "end of the pull"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(scopeDir, "tool", "capsule.wasm"))
	if err != nil || !bytes.Equal(got, wasm) {
		t.Fatalf("staged payload: %d bytes, %v", len(got), err)
	}
	if err := stage.CheckStaged(w.Proj.Tools(), n, p.Digest()); err != nil {
		t.Fatal(err)
	}
}

// unnamedFileIn reads the unnamed (O_TMPFILE) file this process holds open in dir, if any.
// assertStagedUnseen checks, while a download is paused after the payload's last byte, that the
// payload was streamed whole into an unnamed file in the project and that nothing of tools/ is
// visible yet: a kill at this point must leave no tools/.
func assertStagedUnseen(t *testing.T, w *pulltest.World, wasm []byte) {
	t.Helper()
	var staged []byte
	// The stream's goroutine may still be writing the last chunk.
	for deadline := time.Now().Add(slowdown.Scale(2 * time.Second)); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if staged = unnamedFileIn(t, w.Proj.Dir); bytes.Equal(staged, wasm) {
			break
		}
	}
	if !bytes.Equal(staged, wasm) {
		t.Errorf("with the download paused after the payload, an unnamed file holds %d of its %d bytes", len(staged), len(wasm))
	}
	if _, err := os.Stat(w.Proj.ToolsDir()); !os.IsNotExist(err) {
		t.Errorf("tools/ exists before the blob is verified (a kill now would leave it): %v", err)
	}
}

func unnamedFileIn(t *testing.T, dir string) []byte {
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		p := filepath.Join("/proc/self/fd", fd.Name())
		target, err := os.Readlink(p)
		if err != nil || !strings.HasPrefix(target, dir+"/#") || !strings.HasSuffix(target, " (deleted)") {
			continue
		}
		b, _ := os.ReadFile(p)
		return b
	}
	return nil
}

// TestPullStreamedStageOfBadBytes serves the right zip but one wrong byte in the central
// directory's tail: the digest fails, and nothing the stream staged stays.
func TestPullStreamedStageOfBadBytes(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	n := ref.Name{Scope: "acme", Name: "tool"}
	p := pulltest.Pack(t, "tool", "1.0.0", 11)
	st := pulltest.LayoutStore(t)
	pulltest.Push(t, st, n, "1.0.0", ref.PlatformAny, p)
	bad := &corruptingStore{Store: st}
	before := w.State()
	if _, err := w.Pull(w.Puller(bad), pulltest.Req(n, "1.0.0")); err == nil {
		t.Fatal("a blob with a wrong byte was pulled")
	}
	w.AssertUnchanged(before)
	if _, err := os.Stat(w.Proj.ToolsDir()); !os.IsNotExist(err) {
		t.Errorf("tools/ left behind: %v", err)
	}
}

type corruptingStore struct{ store.Store }

func (s *corruptingStore) Open(ctx context.Context, n ref.Name, d digest.Digest) (io.ReadCloser, error) {
	rc, err := s.Store.Open(ctx, n, d)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, err
	}
	b[len(b)-3] ^= 1
	return io.NopCloser(bytes.NewReader(b)), nil
}

// gatedStore is a registry whose first blob answer stops at pauseAt bytes, waits for release and
// then breaks off, as a connection that drops does.
type gatedStore struct {
	rangedStore
	pauseAt int64
	paused  chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *gatedStore) Ranger(ctx context.Context, n ref.Name, d digest.Digest, size int64) (download.Ranger, error) {
	r, err := g.rangedStore.Ranger(ctx, n, d, size)
	if err != nil {
		return nil, err
	}
	return rangerFunc(func(ctx context.Context, off, end int64, validator string) (download.Part, error) {
		p, err := r.Open(ctx, off, end, validator)
		if err == nil {
			g.once.Do(func() { p.Body = &gatedBody{ReadCloser: p.Body, g: g, left: g.pauseAt - off} })
		}
		return p, err
	}), nil
}

type gatedBody struct {
	io.ReadCloser
	g    *gatedStore
	left int64
}

func (b *gatedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		close(b.g.paused)
		<-b.g.release
		return 0, errs.Wrap(io.ErrUnexpectedEOF, errs.Network, "the connection dropped")
	}
	n, err := b.ReadCloser.Read(p[:min(int64(len(p)), b.left)])
	b.left -= int64(n)
	return n, err
}

// A registry's download feeds single-pass staging too, across a break it continues after: the
// bytes still arrive in order from the blob's first one.
func TestRangedStagesWhileDownloading(t *testing.T) {
	t.Parallel()
	reg := registrytest.StartFaulty(t)
	st := pulltest.OpenStore(t, "oci://"+reg.Addr()+"/murmur", ocistore.Options{})
	wasm := artifacttest.Module(2<<20, 216)
	spec := artifacttest.Spec{Name: "grep", Version: "1.0.0", Wasm: wasm}
	p := pulltest.Packed{Zip: spec.Zip(), Wasm: wasm, YAML: spec.Manifest()}
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	a, err := artifact.Read(bytes.NewReader(p.Zip), int64(len(p.Zip)))
	if err != nil {
		t.Fatal(err)
	}
	off, _, csize, _ := a.PayloadEntry()
	g := &gatedStore{rangedStore: st.(rangedStore), pauseAt: off + csize, paused: make(chan struct{}), release: make(chan struct{})}
	w := pulltest.NewWorld(t)
	done := make(chan []pull.Result, 1)
	go func() {
		res, err := w.Pull(w.Puller(g), pulltest.Req(grep, "1.0.0"))
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	release := sync.OnceFunc(func() { close(g.release) })
	defer release()
	deadline.Recv(t, g.paused, "pause after the payload's last byte")
	assertStagedUnseen(t, w, wasm)
	release()
	res := deadline.Recv(t, done, "end of the pull")
	if len(res) != 1 || res[0].Digest != p.Digest().String() || res[0].Transferred != int64(len(p.Zip)) {
		t.Fatalf("result %+v", res)
	}
	if err := stage.CheckStaged(w.Proj.Tools(), grep, p.Digest()); err != nil {
		t.Fatal(err)
	}
}
