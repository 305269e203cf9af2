package fetch_test

import (
	"context"
	"crypto/sha256"
	"hash"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
)

// FindProject walks up from start to the first folder that holds murmur.yaml or murmur.lock, and
// returns start itself (made absolute) when none does.
func TestFindProject(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	touch := func(rel string) {
		if err := os.WriteFile(filepath.Join(root, rel), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk("a/b/c")
	mk("lockonly/x")
	mk("none/y")
	mk("decoy/murmur.yaml/z") // a folder named murmur.yaml is not a manifest
	touch("a/murmur.yaml")
	touch("a/b/c/file.txt")
	touch("lockonly/murmur.lock")

	cases := []struct{ start, want string }{
		{"a/b/c", "a"},             // nearest parent with murmur.yaml
		{"a", "a"},                 // the folder itself
		{"lockonly/x", "lockonly"}, // murmur.lock alone marks a project
		{"none/y", "none/y"},       // nothing above: start itself
		{"decoy/murmur.yaml/z", "decoy/murmur.yaml/z"},
		{"a/b/c/file.txt", "a"}, // a file as start does not break the walk
	}
	for _, tc := range cases {
		got, err := fetch.FindProject(filepath.Join(root, tc.start))
		if err != nil {
			t.Fatalf("%s: %v", tc.start, err)
		}
		if want := filepath.Join(root, tc.want); got != want {
			t.Errorf("fetch.FindProject(%s) = %s, want %s", tc.start, got, want)
		}
	}

	// A relative start is made absolute.
	t.Chdir(filepath.Join(root, "a", "b"))
	got, err := fetch.FindProject(".")
	if err != nil || got != filepath.Join(root, "a") {
		t.Fatalf("fetch.FindProject(.) = %q, %v", got, err)
	}

	// Nearer murmur.lock wins over a farther murmur.yaml.
	touch("a/b/murmur.lock")
	if got, _ := fetch.FindProject(filepath.Join(root, "a/b/c")); got != filepath.Join(root, "a/b") {
		t.Fatalf("got %s", got)
	}
}

// openRecorder opens every address as a layout store of its own and remembers what was opened.
type openRecorder struct {
	t       *testing.T
	opened  []string
	plain   map[string]bool
	mirrors []string
	stores  map[string]fstore.Store
}

func newOpenRecorder(t *testing.T) *openRecorder {
	return &openRecorder{t: t, plain: map[string]bool{}, stores: map[string]fstore.Store{}}
}

func (o *openRecorder) store(addr string, plain bool) (fstore.Store, error) {
	o.opened = append(o.opened, addr)
	o.plain[addr] = plain
	if s, ok := o.stores[addr]; ok {
		return s, nil
	}
	s := pulltest.LayoutStore(o.t)
	o.stores[addr] = s
	return s, nil
}

func (o *openRecorder) mirror(addr string, plain bool) (fstore.Store, error) {
	o.mirrors = append(o.mirrors, addr)
	o.plain[addr] = plain
	return o.store(addr, plain)
}

// options are po with its stores and mirror opened by o, and no source.
func (o *openRecorder) options(po fetch.PullerOptions) fetch.PullerOptions {
	return po.OpenWith(o.store, o.mirror, nil)
}

// fakeCompiledCache has compiled nothing.
type fakeCompiledCache struct{}

func (fakeCompiledCache) ModuleKey() hash.Hash                  { return sha256.New() }
func (fakeCompiledCache) HasCompiled([]byte) bool               { return false }
func (fakeCompiledCache) BlobKey(digest.Digest) ([]byte, bool)  { return nil, false }
func (fakeCompiledCache) RememberBlobKey(digest.Digest, []byte) {}

// The one assembly of a command's Puller: --store first in the order given, then the configured
// stores, each once; the configuration's fallbacks, cache cap and mirror, which --mirror replaces.
func TestWorkspacePuller(t *testing.T) {
	dir := t.TempDir()
	ws := &fetch.Workspace{Project: pull.Project{Dir: dir}, Config: &config.Config{
		Stores:       []string{"oci://config.example/a", "oci-layout:" + filepath.Join(dir, "shared")},
		PlainHTTP:    map[string]bool{"oci://config.example/a": true, "oci://mirror.example/m": true},
		Fallbacks:    map[string]fstore.Fallback{"oci://config.example/a": fstore.FallbackAnyError},
		Mirror:       "oci://mirror.example/m",
		MaxCacheSize: 1 << 30,
	}}
	rec := newOpenRecorder(t)
	compiled := 0
	cache := fakeCompiledCache{}
	pl, err := ws.Puller(rec.options(fetch.PullerOptions{
		Stores: []string{"oci://flag.example/x", "oci-layout:shared"}, WorkDir: dir, PlainHTTP: true,
		Connections: 3, Jobs: 2, CASOnly: true,
		Precompile: func(context.Context, []byte) error { compiled++; return nil }, Compiled: cache,
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"oci://flag.example/x", "oci-layout:" + filepath.Join(dir, "shared"), "oci://config.example/a"}
	if strings.Join(rec.opened[:len(want)], " ") != strings.Join(want, " ") || len(pl.Pipeline().Stores) != 3 {
		t.Fatalf("opened %v (%d stores), want %v then the mirror", rec.opened, len(pl.Pipeline().Stores), want)
	}
	if !rec.plain["oci://flag.example/x"] || !rec.plain["oci://config.example/a"] {
		t.Fatalf("plain HTTP %v: --plain-http applies to --store, config.yaml's to its own", rec.plain)
	}
	if strings.Join(rec.mirrors, " ") != "oci://mirror.example/m" || pl.Pipeline().Mirror.Store == nil || !rec.plain["oci://mirror.example/m"] {
		t.Fatalf("mirrors opened %v", rec.mirrors)
	}
	if pl.Pipeline().Limits.Connections != 3 || pl.Pipeline().Limits.Jobs != 2 || pl.MaxCacheSize() != 1<<30 || pl.Pipeline().Chain.Fallbacks["oci://config.example/a"] != fstore.FallbackAnyError {
		t.Fatalf("puller %+v", pl)
	}
	if c := pl.Pipeline().Compile; !pl.Pipeline().CASOnly || c.Cache != cache || c.Precompile == nil || c.Precompile(context.Background(), nil) != nil || compiled != 1 {
		t.Fatalf("the pipeline pulls outside a project %v, compiles with %+v: want what the options said", pl.Pipeline().CASOnly, c)
	}

	// --mirror replaces config.yaml's; it must be a registry.
	rec = newOpenRecorder(t)
	if _, err := ws.Puller(rec.options(fetch.PullerOptions{Mirror: "oci://other.example/m", Connections: 1})); err != nil || strings.Join(rec.mirrors, " ") != "oci://other.example/m" {
		t.Fatalf("--mirror: %v, mirrors %v", err, rec.mirrors)
	}
	for _, bad := range []fetch.PullerOptions{
		{Mirror: "oci-layout:/tmp/x", Connections: 1},
		{PlainHTTP: true, Connections: 1},
		{Connections: 0},
		{Stores: []string{"http://nope"}, Connections: 1},
	} {
		if _, err := ws.Puller(newOpenRecorder(t).options(bad)); errs.TokenOf(err) != errs.Usage {
			t.Errorf("%+v: %v, want a usage error", bad, err)
		}
	}
}

// Which mirror is the project's own: one only .murmur/config.yaml names.
func TestConfigSaysWhoseMirrorItIs(t *testing.T) {
	home := t.TempDir() + "/config.yaml"
	proj := t.TempDir()
	write := func(p, s string) {
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(s), 0o644))
	}
	write(proj+"/.murmur/config.yaml", "mirror: oci://evil.example/murmur\n")
	c, err := config.Load(home, proj)
	if err != nil || c.Mirror != "oci://evil.example/murmur" || !c.MirrorFromProject {
		t.Fatalf("project only: %+v, %v", c, err)
	}
	write(home, "mirror: oci://evil.example/murmur\n")
	if c, err = config.Load(home, proj); err != nil || c.MirrorFromProject {
		t.Fatalf("named by both: %+v, %v", c, err)
	}
	write(home, "mirror: oci://team.example/murmur\n")
	if c, err = config.Load(home, proj); err != nil || c.Mirror != "oci://evil.example/murmur" || !c.MirrorFromProject {
		t.Fatalf("the home names another: %+v, %v", c, err)
	}
}

// The Puller of a command marks the mirror as the project's only when --mirror did not name
// one: --mirror is the operator's choice, as the home's config is.
func TestWorkspacePullerMarksAProjectsMirror(t *testing.T) {
	ws := &fetch.Workspace{Project: pull.Project{Dir: t.TempDir()}, Config: &config.Config{
		Mirror: "oci://evil.example/m", MirrorFromProject: true,
	}}
	rec := newOpenRecorder(t)
	pl, err := ws.Puller(rec.options(fetch.PullerOptions{Connections: 1}))
	if err != nil || !pl.Pipeline().Mirror.FromProject {
		t.Fatalf("the project's mirror: %v, from project %v", err, pl != nil && pl.Pipeline().Mirror.FromProject)
	}
	pl, err = ws.Puller(rec.options(fetch.PullerOptions{Mirror: "oci://evil.example/m", Connections: 1}))
	if err != nil || pl.Pipeline().Mirror.FromProject {
		t.Fatalf("--mirror naming it: %v, from project %v", err, pl != nil && pl.Pipeline().Mirror.FromProject)
	}
}
