package sandbox

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

// Past maxCustomSections of custom sections ("name" aside), a module is compiled without its
// debug info; below it, and for a module too malformed to walk, with.
func TestKeepsDebugInfo(t *testing.T) {
	over := artifacttest.Padded("namf", maxCustomSections+1)
	named := artifacttest.Padded("name", maxCustomSections+1) // one letter from over
	for name, c := range map[string]struct {
		wasm []byte
		want bool
	}{
		"a small section":           {artifacttest.Padded("pad", 1<<20), true},
		"over the bound":            {over, false},
		"a large name section":      {named, true},
		"no sections":               {[]byte(artifacttest.EmptyModule), true},
		"a section past the end":    {append([]byte(artifacttest.EmptyModule), 0, 0xff, 0xff, 0x7f), true},
		"a name past its section":   {append([]byte(artifacttest.EmptyModule), 0, 2, 9, 'x'), true},
		"a size that is not LEB128": {append([]byte(artifacttest.EmptyModule), 0, 0xff), true},
	} {
		if got := keepsDebugInfo(c.wasm); got != c.want {
			t.Errorf("%s: keepsDebugInfo = %v, want %v", name, got, c.want)
		}
	}
}

// Compiling a module padded with 64 MiB of custom section allocates a small part of that: wazero
// is not asked to copy the section for its debug info. Allocation is counted across the call,
// whatever the collector did meanwhile.
func TestPrecompileCopiesNoHugeCustomSection(t *testing.T) {
	const size = maxCustomSections + 1
	wasm := artifacttest.Padded("pad", size)
	r := newRunner(t, Options{CacheDir: filepath.Join(t.TempDir(), "compiled")})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := r.Precompile(context.Background(), wasm); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/4 {
		t.Errorf("compiling a module with a %d MiB custom section allocated %d MiB", size>>20, alloc>>20)
	}
}
