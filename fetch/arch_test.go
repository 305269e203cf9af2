package fetch_test

import (
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// cmdImports are the packages of the module the Layout of docs/ARCHITECTURE.md lets cmd/mur
// import, besides the internal leaves: the backquoted packages of its cmd/mur arrow, up to the
// arrow's "never".
func cmdImports(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, arrow, ok := strings.Cut(string(b), "\n- `cmd/mur` →")
	if !ok {
		t.Fatal("docs/ARCHITECTURE.md has no arrow of cmd/mur (- `cmd/mur` → ...)")
	}
	arrow, _, _ = strings.Cut(arrow, "\n- ")
	arrow, _, ok = strings.Cut(arrow, "never")
	if !ok {
		t.Fatal("the arrow of cmd/mur in docs/ARCHITECTURE.md says nothing of what it never imports")
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z/]+)`").FindAllStringSubmatch(arrow, -1) {
		if goFiles, _ := filepath.Glob(filepath.Join("..", m[1], "*.go")); len(goFiles) > 0 {
			out[m[1]] = true
		}
	}
	return out
}

// cmd/mur imports fetch, sandbox, cas, lock, state and the sub-packages of fetch whose words it
// prints or parses, exactly as the Layout names them: a new import of the pipeline's machinery
// fails here, and so does a package the Layout names that cmd/mur no longer needs.
func TestCmdMurImportsWhatTheLayoutSays(t *testing.T) {
	want := cmdImports(t)
	for _, p := range []string{"fetch", "sandbox", "cas", "lock", "state"} {
		if !want[p] {
			t.Errorf("the Layout's arrow of cmd/mur does not name %s", p)
		}
	}
	got := map[string]bool{}
	for im := range imports(t, "cmd/mur") {
		if !strings.HasPrefix(im, "internal/") {
			got[im] = true
		}
	}
	for _, im := range slices.Sorted(maps.Keys(got)) {
		if !want[im] {
			t.Errorf("cmd/mur imports %s, which the Layout of docs/ARCHITECTURE.md does not let it: go through fetch, or name it in the arrow of cmd/mur with the words cmd/mur prints or parses of it", im)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if !got[p] {
			t.Errorf("the Layout of docs/ARCHITECTURE.md lets cmd/mur import %s, which it does not: take it out of the arrow", p)
		}
	}
}
