//go:build unix

package sandbox

import (
	"context"
	"io"
	"path/filepath"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/cputime"
	"github.com/murmur-nexus/mur/sandbox/guesttest"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// The warm-run benchmarks model one `mur run` process each: a fresh Runner (so nothing is held
// in memory) over a cache folder that already holds the module.

func warmDir(b *testing.B, wasm []byte) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "compiled")
	r := newRunner(b, Options{CacheDir: dir})
	if err := r.Precompile(context.Background(), wasm); err != nil {
		b.Fatal(err)
	}
	return dir
}

func BenchmarkRunHelloWarmCache(b *testing.B) {
	wasm := guesttest.Build(b, "hello")
	dir := warmDir(b, wasm)
	work := b.TempDir()
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := New(ctx, Options{CacheDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		fsys := openFS(b, work, false)
		code, err := r.run(ctx, wasm, Config{
			Args:   []string{"hello"},
			Env:    []string{"PWD=/"},
			Stdout: io.Discard, Stderr: io.Discard,
			MemoryMiB: 256,
		}, fsys)
		fsys.Close()
		if code != 0 || err != nil {
			b.Fatal(code, err)
		}
		r.Close(ctx)
	}
}

// BenchmarkBareWazeroWarmCache is the smallest wazero program that runs the same module from a
// warm file cache: the baseline `mur run` must not be slower than. It closes on context done as
// mur does (a runner with a timeout needs it, and it changes the compiled code); the
// NoInterrupt variant shows what that costs.
func BenchmarkBareWazeroWarmCache(b *testing.B) { benchBare(b, true) }

// BenchmarkBareWazeroWarmCacheNoInterrupt is the bare program with wazero's default config.
func BenchmarkBareWazeroWarmCacheNoInterrupt(b *testing.B) { benchBare(b, false) }

func benchBare(b *testing.B, closeOnDone bool) {
	wasm := guesttest.Build(b, "hello")
	dir := filepath.Join(b.TempDir(), "bare")
	ctx := context.Background()
	once := func() {
		cache, err := wazero.NewCompilationCacheWithDir(dir)
		if err != nil {
			b.Fatal(err)
		}
		rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache).WithCloseOnContextDone(closeOnDone))
		wasi_snapshot_preview1.MustInstantiate(ctx, rt)
		cm, err := rt.CompileModule(ctx, wasm)
		if err != nil {
			b.Fatal(err)
		}
		mod, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithArgs("hello").WithStdout(io.Discard))
		if err != nil {
			b.Fatal(err)
		}
		mod.Close(ctx)
		rt.Close(ctx)
		cache.Close(ctx)
	}
	once() // warm
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		once()
	}
}

func BenchmarkColdCompile(b *testing.B) {
	wasm := guesttest.Build(b, "hello")
	ctx := context.Background()
	defer reportCPU(b, cputime.Self())
	for i := 0; i < b.N; i++ {
		r, err := New(ctx, Options{CacheDir: filepath.Join(b.TempDir(), "compiled")})
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Precompile(ctx, wasm); err != nil {
			b.Fatal(err)
		}
		r.Close(ctx)
	}
}

// BenchmarkWarmCompile loads a compiled module from a warm cache the way a run does (Precompile
// would find the entry and skip the load). wazero decodes the module and validates every function
// before its engine looks the module up in the cache, and no public setting skips either
// (docs/performance.md). The loop runs under the pprof label phase=warm, so that
//
//	go test -run '^$' -bench 'WarmCompile$' -benchtime 50x -cpuprofile cpu.prof ./sandbox
//	go tool pprof -tagfocus phase=warm -top -cum cpu.prof
//
// splits it into DecodeModule, Validate and the cache load without the cold compile that warms
// the cache.
func BenchmarkWarmCompile(b *testing.B) {
	wasm := guesttest.Build(b, "hello")
	dir := warmDir(b, wasm)
	ctx := context.Background()
	b.ResetTimer()
	defer reportCPU(b, cputime.Self())
	pprof.Do(ctx, pprof.Labels("phase", "warm"), func(ctx context.Context) {
		for i := 0; i < b.N; i++ {
			r, err := New(ctx, Options{CacheDir: dir})
			if err != nil {
				b.Fatal(err)
			}
			rt := wazero.NewRuntimeWithConfig(ctx, r.runtimeConfig())
			cm, err := r.compile(ctx, rt, wasm)
			if err != nil {
				b.Fatal(err)
			}
			cm.Close(ctx)
			rt.Close(ctx)
			r.Close(ctx)
		}
	})
}

// reportCPU reports the CPU per op taken since start, every thread included, as cpu-ms/op.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((cputime.Self()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}
