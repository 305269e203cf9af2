package fetch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

const (
	hexA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	hexB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	hexC = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

var signed = &lock.Provenance{Kind: lock.ProvenanceKey, Bundle: "sha256:" + hexC, Signer: "a768"}

// pins builds a lock of name@version:hex entries; a name ending in "+" recorded provenance.
func pins(t *testing.T, specs ...string) *lock.Lock {
	t.Helper()
	l := &lock.Lock{Scopes: map[string]lock.ScopePin{}}
	for _, s := range specs {
		nv, hex, _ := strings.Cut(s, ":")
		name, version, _ := strings.Cut(nv, "@")
		withProv := strings.HasSuffix(name, "+")
		name = strings.TrimSuffix(name, "+")
		if err := l.Upsert(name, version, "any", hex, "", false); err != nil {
			t.Fatal(err)
		}
		if withProv {
			if err := l.SetProvenance(name, *signed); err != nil {
				t.Fatal(err)
			}
		}
	}
	return l
}

func capsule(t *testing.T, yaml string) *manifest.Capsule {
	t.Helper()
	c, err := manifest.Parse([]byte(yaml), "murmur.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func upsert(name, version, hex string, update bool) func(*lock.Lock) error {
	return func(l *lock.Lock) error { return l.Upsert(name, version, "any", hex, "", update) }
}

func TestNext(t *testing.T) {
	grepAndNotes := "name: p\nartifacts:\n  - name: acme/grep\n    version: 1.0.0\n  - name: acme/notes\n    version: latest\n"
	tests := []struct {
		name      string
		old       *lock.Lock
		yaml      string // "" is a project without murmur.yaml
		unclean   bool
		t         Transition
		want      *lock.Lock // nil when an error is wanted
		token     errs.Token
		declared  []string
		removed   []string
		inMessage string
	}{
		{
			name: "a pin is added and kept",
			old:  pins(t, "acme/grep@1.0.0:"+hexA),
			yaml: grepAndNotes,
			t:    Transition{Pin: upsert("acme/notes", "2.0.0", hexB, false)},
			want: pins(t, "acme/grep@1.0.0:"+hexA, "acme/notes@2.0.0:"+hexB),
		},
		{
			name:    "prune drops what murmur.yaml no longer declares",
			old:     pins(t, "acme/grep@1.0.0:"+hexA, "acme/gone@1.0.0:"+hexB),
			yaml:    grepAndNotes,
			t:       Transition{Prune: true},
			want:    pins(t, "acme/grep@1.0.0:"+hexA),
			removed: []string{"acme/gone"},
		},
		{
			name: "without prune an undeclared pin stays",
			old:  pins(t, "acme/grep@1.0.0:"+hexA, "acme/gone@1.0.0:"+hexB),
			yaml: grepAndNotes,
			t:    Transition{},
			want: pins(t, "acme/grep@1.0.0:"+hexA, "acme/gone@1.0.0:"+hexB),
		},
		{
			name: "no murmur.yaml prunes nothing",
			old:  pins(t, "acme/grep@1.0.0:"+hexA),
			t:    Transition{Prune: true},
			want: pins(t, "acme/grep@1.0.0:"+hexA),
		},
		{
			name:      "nothing is pruned from a murmur.yaml that did not parse cleanly",
			old:       pins(t, "acme/grep@1.0.0:"+hexA, "acme/notes@1.0.0:"+hexB),
			yaml:      "name: p\nartifact:\n  - name: acme/grep\n    version: 1.0.0\n",
			unclean:   true,
			t:         Transition{Prune: true},
			token:     errs.InvalidManifest,
			inMessage: "nothing was pruned",
		},
		{
			name:      "a pin murmur.yaml declares is never dropped",
			old:       pins(t, "acme/grep@1.0.0:"+hexA),
			yaml:      grepAndNotes,
			t:         Transition{Pin: func(l *lock.Lock) error { l.Remove("acme/grep"); return nil }},
			token:     errs.Internal,
			inMessage: "refusing to drop the pin of acme/grep",
		},
		{
			name:      "a pin with provenance does not move to a version without",
			old:       pins(t, "acme/grep+@1.0.0:"+hexA),
			yaml:      grepAndNotes,
			t:         Transition{Pin: upsert("acme/grep", "1.1.0", hexB, true)},
			token:     errs.ProvenanceMissing,
			inMessage: "recorded a verified bundle for 1.0.0",
		},
		{
			// The entry rewritten at the same version, one platform's payload another: other
			// bytes, which the record does not speak for.
			name: "a pin's record does not pass to another payload of one platform",
			old: func() *lock.Lock {
				l := pins(t)
				for _, p := range []struct{ plat, hex string }{{"linux-x86_64", hexA}, {"darwin-aarch64", hexB}} {
					if err := l.Upsert("acme/grep", "1.0.0", p.plat, p.hex, "", false); err != nil {
						t.Fatal(err)
					}
				}
				if err := l.SetProvenance("acme/grep", *signed); err != nil {
					t.Fatal(err)
				}
				return l
			}(),
			yaml: grepAndNotes,
			t: Transition{Pin: func(l *lock.Lock) error {
				l.Remove("acme/grep")
				if err := l.Upsert("acme/grep", "1.0.0", "linux-x86_64", hexA, "", false); err != nil {
					return err
				}
				return l.Upsert("acme/grep", "1.0.0", "darwin-aarch64", hexC, "", false)
			}},
			token:     errs.ProvenanceMissing,
			inMessage: "recorded a verified bundle for 1.0.0",
		},
		{
			name: "it moves to a version whose provenance verified",
			old:  pins(t, "acme/grep+@1.0.0:"+hexA),
			yaml: grepAndNotes,
			t: Transition{Pin: func(l *lock.Lock) error {
				if err := l.Upsert("acme/grep", "1.2.0", "any", hexB, "", true); err != nil {
					return err
				}
				return l.SetProvenance("acme/grep", *signed)
			}},
			want: pins(t, "acme/grep+@1.2.0:"+hexB),
		},
		{
			name: "it moves without provenance when the command forgets it",
			old:  pins(t, "acme/grep+@1.0.0:"+hexA),
			yaml: grepAndNotes,
			t:    Transition{Pin: upsert("acme/grep", "1.1.0", hexB, true), Forget: map[string]bool{"acme/grep": true}},
			want: pins(t, "acme/grep@1.1.0:"+hexB),
		},
		{
			name: "an unmoved pin keeps its record when a change rewrites its entry",
			old:  pins(t, "acme/grep+@1.0.0:"+hexA),
			yaml: grepAndNotes,
			t:    Transition{Pin: upsert("acme/grep", "1.0.0", hexA, true)},
			want: pins(t, "acme/grep+@1.0.0:"+hexA),
		},
		{
			name:     "a pin is declared with its commit",
			old:      pins(t),
			yaml:     "name: p\n",
			t:        Transition{Pin: upsert("acme/grep", "1.0.0", hexA, false), Declare: map[string]bool{"acme/grep": true}},
			want:     pins(t, "acme/grep@1.0.0:"+hexA),
			declared: []string{"acme/grep@1.0.0"},
		},
		{
			name: "a commit declares only the pins it changed",
			old:  pins(t, "acme/grep@1.0.0:"+hexA),
			yaml: "name: p\n",
			t:    Transition{Pin: upsert("acme/notes", "1.0.0", hexB, false), Declare: map[string]bool{"acme/grep": true, "acme/notes": true}},
			want: pins(t, "acme/grep@1.0.0:"+hexA, "acme/notes@1.0.0:"+hexB), declared: []string{"acme/notes@1.0.0"},
		},
		{
			name:     "the last transition declares a pin found in place, and prune keeps it",
			old:      pins(t, "acme/grep@1.0.0:"+hexA),
			yaml:     "name: p\n",
			t:        Transition{Declare: map[string]bool{"acme/grep": true}, Prune: true},
			want:     pins(t, "acme/grep@1.0.0:"+hexA),
			declared: []string{"acme/grep@1.0.0"},
		},
		{
			name: "an entry murmur.yaml declares at that version is not declared again",
			old:  pins(t, "acme/grep@1.0.0:"+hexA),
			yaml: grepAndNotes,
			t:    Transition{Declare: map[string]bool{"acme/grep": true}},
			want: pins(t, "acme/grep@1.0.0:"+hexA),
		},
		{
			name:     "--update of an exact entry moves murmur.yaml with the pin",
			old:      pins(t, "acme/grep@1.0.0:"+hexA),
			yaml:     grepAndNotes,
			t:        Transition{Pin: upsert("acme/grep", "1.1.0", hexB, true), Declare: map[string]bool{"acme/grep": true}},
			want:     pins(t, "acme/grep@1.1.0:"+hexB),
			declared: []string{"acme/grep@1.1.0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c *manifest.Capsule
			if tt.yaml != "" {
				c = capsule(t, tt.yaml)
			}
			before := tt.old.Clone()
			got, decl, pr, err := next(tt.old, intentRead{capsule: c, clean: !tt.unclean}, tt.t)
			if !reflect.DeepEqual(tt.old, before) {
				t.Errorf("next changed the lock it was handed")
			}
			if tt.want == nil {
				if err == nil || errs.TokenOf(err) != tt.token || !strings.Contains(err.Error(), tt.inMessage) {
					t.Fatalf("err = %v, want a %s: error that says %q", err, tt.token, tt.inMessage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Marshal()) != string(tt.want.Marshal()) {
				t.Errorf("lock:\n%s\nwant:\n%s", got.Marshal(), tt.want.Marshal())
			}
			var ds []string
			for _, d := range decl {
				ds = append(ds, d.name.String()+"@"+d.version)
			}
			if strings.Join(ds, " ") != strings.Join(tt.declared, " ") {
				t.Errorf("declared %v, want %v", ds, tt.declared)
			}
			if strings.Join(pr.removed, " ") != strings.Join(tt.removed, " ") {
				t.Errorf("removed %v, want %v", pr.removed, tt.removed)
			}
		})
	}
}

// writeLock re-reads murmur.yaml under the lock's file lock: a declaration another command wrote
// after this one read murmur.yaml keeps its pin from this one's prune.
func TestWriteLockReadsMurmurYAMLUnderTheLock(t *testing.T) {
	dir := t.TempDir()
	proj := Project{Dir: dir}
	yaml := filepath.Join(dir, "murmur.yaml")
	if err := os.WriteFile(yaml, []byte("name: p\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := writeLock(ctx, proj, yaml, Transition{Pin: upsert("acme/grep", "1.0.0", hexA, false), Declare: map[string]bool{"acme/grep": true}}); err != nil {
		t.Fatal(err)
	}
	// A command that read murmur.yaml before acme/grep was declared prunes now.
	tr, err := writeLock(ctx, proj, yaml, Transition{Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := lock.Read(proj.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	if l.Find("acme/grep") == nil || len(tr.Removed) != 0 {
		t.Fatalf("the prune dropped a pin murmur.yaml declares: removed %v, lock:\n%s", tr.Removed, l.Marshal())
	}
	data, _ := os.ReadFile(yaml)
	if !strings.Contains(string(data), "acme/grep") {
		t.Fatalf("murmur.yaml does not declare acme/grep:\n%s", data)
	}
	// mur rm: murmur.yaml first, then the pin, in one transition.
	tr, err = writeLock(ctx, proj, yaml, Transition{Undeclare: []ref.Name{{Scope: "acme", Name: "grep"}}, Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	if l, _ = lock.Read(proj.LockPath()); l.Find("acme/grep") != nil || strings.Join(tr.Removed, " ") != "acme/grep" {
		t.Fatalf("mur rm kept the pin: removed %v", tr.Removed)
	}
}

// The lock has one writer: no code outside transition.go calls lock.Update, and nothing writes
// a file named murmur.lock another way. Tests, and the packages that serve only tests (named
// …test, as pulltest and its plain lock writer), are not mur's code.
func TestOneWriterOfTheLock(t *testing.T) {
	root := filepath.Join("..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(filepath.Dir(path), "test") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			if !ok || x.Name != "lock" || sel.Sel.Name != "Update" {
				return true
			}
			if filepath.ToSlash(path) != "../fetch/transition.go" {
				t.Errorf("%s: lock.Update outside fetch/transition.go; hand the change to writeLock", fset.Position(sel.Pos()))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sameBytes tells one pin from another by every hash it holds.
func TestSameBytes(t *testing.T) {
	entry := func(version, any string, plats ...string) *lock.Entry {
		e := &lock.Entry{Name: "acme/grep", ResolvedVersion: version, SHA256: lock.Hashes{Any: any}}
		if len(plats) > 0 {
			e.SHA256.Platforms = map[string]string{}
			for i := 0; i+1 < len(plats); i += 2 {
				e.SHA256.Platforms[plats[i]] = plats[i+1]
			}
		}
		return e
	}
	linux, mac := "linux-x86_64", "darwin-aarch64"
	tests := []struct {
		name string
		a, b *lock.Entry
		want bool
	}{
		{"the same any pin", entry("1.0.0", hexA), entry("1.0.0", hexA), true},
		{"another version", entry("1.0.0", hexA), entry("1.0.1", hexA), false},
		{"another any hash", entry("1.0.0", hexA), entry("1.0.0", hexB), false},
		{"the same platform pins", entry("1.0.0", "", linux, hexA, mac, hexB), entry("1.0.0", "", mac, hexB, linux, hexA), true},
		{"one platform's hash differs", entry("1.0.0", "", linux, hexA, mac, hexB), entry("1.0.0", "", linux, hexA, mac, hexC), false},
		{"a platform more", entry("1.0.0", "", linux, hexA), entry("1.0.0", "", linux, hexA, mac, hexB), false},
		{"a platform fewer", entry("1.0.0", "", linux, hexA, mac, hexB), entry("1.0.0", "", linux, hexA), false},
		{"another platform, same hash", entry("1.0.0", "", linux, hexA), entry("1.0.0", "", mac, hexA), false},
		{"any against a platform", entry("1.0.0", hexA), entry("1.0.0", "", linux, hexA), false},
	}
	for _, tt := range tests {
		if got := sameBytes(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: sameBytes = %v, want %v", tt.name, got, tt.want)
		}
		if got := sameBytes(tt.b, tt.a); got != tt.want {
			t.Errorf("%s, swapped: sameBytes = %v, want %v", tt.name, got, tt.want)
		}
	}
}
