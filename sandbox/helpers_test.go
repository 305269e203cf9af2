package sandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/murmur-nexus/mur/internal/slowdown/deadline"
	"github.com/murmur-nexus/mur/sandbox/guesttest"
)

// sharedCacheDir is one compiled cache for the package's tests, kept between runs beside the
// built guests: compiling a Go guest takes seconds (far more under -race). Tests of the cache
// itself use their own folders.
var sharedCacheDir string

func TestMain(m *testing.M) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	sharedCacheDir = filepath.Join(base, "mur-testguests", "compiled-sandbox")
	if err := os.MkdirAll(filepath.Dir(sharedCacheDir), 0o700); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// goGuest returns the multi-call Go guest (guesttest), compiled into the shared cache once per
// test binary before any test gets it: tests running in parallel then load it, where each would
// otherwise compile it again.
func goGuest(t testing.TB) []byte {
	t.Helper()
	wasm := guesttest.Go(t)
	sharedGuest.once.Do(func() {
		ctx := context.Background()
		r, err := New(ctx, Options{CacheDir: sharedCacheDir, Warn: func(s string) { sharedGuest.warning = s }})
		if err != nil {
			sharedGuest.err = err
			return
		}
		defer r.Close(ctx)
		sharedGuest.err = r.Precompile(ctx, wasm)
	})
	if sharedGuest.err != nil || sharedGuest.warning != "" {
		t.Fatalf("compiling the Go guest into the shared cache: %v %s", sharedGuest.err, sharedGuest.warning)
	}
	return wasm
}

var sharedGuest struct {
	once    sync.Once
	err     error
	warning string
}

type warnings struct{ list []string }

func (w *warnings) add(s string) { w.list = append(w.list, s) }

func newRunner(t testing.TB, opt Options) *Runner {
	t.Helper()
	if opt.Warn == nil {
		opt.Warn = func(s string) { t.Logf("warning: %s", s) }
	}
	r, err := New(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

func sharedRunner(t testing.TB) *Runner {
	t.Helper()
	return newRunner(t, Options{CacheDir: sharedCacheDir, Warn: func(s string) { t.Errorf("unexpected warning: %s", s) }})
}

type result struct {
	code           int
	err            error
	stdout, stderr string
}

func run(t testing.TB, r *Runner, wasm []byte, cfg Config) result {
	t.Helper()
	return runFS(t, r, wasm, cfg, nil)
}

// runFS runs wasm with fsys preopened at "/".
func runFS(t testing.TB, r *Runner, wasm []byte, cfg Config, fsys *rootFS) result {
	t.Helper()
	var out, errb bytes.Buffer
	cfg.Stdout, cfg.Stderr = &out, &errb
	code, err := r.run(deadline.Context(t), wasm, cfg, fsys)
	return result{code, err, out.String(), errb.String()}
}

func workdir(t testing.TB) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}
