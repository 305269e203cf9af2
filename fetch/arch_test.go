package fetch_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/murmur-nexus/mur/"

// imports lists what the non-test files of the package in dir (relative to the module) import
// from the module.
func imports(t *testing.T, dir string) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join("..", dir))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", dir, e.Name()), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if strings.HasPrefix(p, module) {
				out[strings.TrimPrefix(p, module)] = true
			}
		}
	}
	return out
}

// The arrows of the architecture run one way (../shared/ARCHITECTURE.md): the verbs above the
// pipeline, the pipeline above the stores' contract, the stores below it all.
func TestArchitectureArrows(t *testing.T) {
	never := map[string][]string{
		"cmd/mur":             {"fetch/pull"},
		"fetch/ocistore":      {"fetch", "fetch/pull"},
		"fetch/github":        {"fetch", "fetch/pull"},
		"fetch/pull":          {"fetch", "fetch/verify"},
		"fetch/verify":        {"fetch"},
		"fetch/publish":       {"fetch", "fetch/pull"},
		"fetch/config":        {"fetch", "fetch/pull"},
		"sandbox":             {"fetch"},
		"fetch/provenance":    {"fetch", "fetch/pull", "fetch/provenance/sigstore"},
		"cmd/mur-provenance":  {"fetch", "fetch/pull"},
		"fetch/pull/pulltest": {"fetch", "fetch/verify"},
	}
	for pkg, bad := range never {
		got := imports(t, pkg)
		for _, b := range bad {
			if got[b] {
				t.Errorf("%s imports %s", pkg, b)
			}
		}
	}
	// store and stage import nothing of fetch but store and fetch/internal/...
	for _, pkg := range []string{"fetch/store", "fetch/stage"} {
		for im := range imports(t, pkg) {
			if strings.HasPrefix(im, "fetch") && im != "fetch/store" && !strings.HasPrefix(im, "fetch/internal/") {
				t.Errorf("%s imports %s", pkg, im)
			}
		}
	}
}
