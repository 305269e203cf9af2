// barewazero is the peer of `mur run` in the benchmarks: the smallest wazero program that loads
// a module from a warm compilation cache and runs it with WASI, with no checks at all.
//
//	barewazero CACHE-DIR NAME.wasm ARGS...
//
// The guest's argv[0] is NAME, as `mur run` gives it the artifact's name: the tests' Go guest
// behaves as the command its argv[0] names (hello.wasm says hello, grow.wasm grows).
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

func main() {
	ctx := context.Background()
	wasm, err := os.ReadFile(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cache, err := wazero.NewCompilationCacheWithDir(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache))
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	mod, err := r.CompileModule(ctx, wasm)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	argv0 := strings.TrimSuffix(filepath.Base(os.Args[2]), ".wasm")
	cfg := wazero.NewModuleConfig().WithStdout(os.Stdout).WithStderr(os.Stderr).WithArgs(append([]string{argv0}, os.Args[3:]...)...).
		WithSysWalltime().WithSysNanotime().WithSysNanosleep()
	if _, err := r.InstantiateModule(ctx, mod, cfg); err != nil {
		if e, ok := err.(*sys.ExitError); ok {
			os.Exit(int(e.ExitCode()))
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
