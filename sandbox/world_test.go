//go:build unix

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// The one world of the run's tests.

// world is a project folder, a Murmur home beside it and a lock pinning acme/grep and acme/cat.
type world struct {
	root    string // holds project/ and home/
	project string
	home    string // the Murmur home
	lock    *lock.Lock
}

func newWorld(t *testing.T) *world {
	t.Helper()
	root := t.TempDir()
	w := &world{root: root, project: filepath.Join(root, "project"), home: filepath.Join(root, "home")}
	if err := os.MkdirAll(w.project, 0o755); err != nil {
		t.Fatal(err)
	}
	w.lock = &lock.Lock{Scopes: map[string]lock.ScopePin{}}
	for _, e := range []struct{ name, hex string }{{"acme/cat", hexCat}, {"acme/grep", hexGrep}} {
		if err := w.lock.Upsert(e.name, "1.0.0", ref.PlatformAny, e.hex, "", false); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// capsule writes murmur.yaml into the project and parses it.
func (w *world) capsule(t *testing.T, yaml string) *manifest.Capsule {
	t.Helper()
	p := filepath.Join(w.project, "murmur.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := manifest.Load(p)
	if err != nil {
		t.Fatalf("murmur.yaml: %v\n%s", err, yaml)
	}
	return c
}

func (w *world) input(c *manifest.Capsule, artifact string) PlanInput {
	return PlanInput{ProjectDir: w.project, Capsule: c, Lock: w.lock, Home: w.home, StateDir: filepath.Join(w.home, "state"), Artifact: artifact}
}

func capsuleYAML(caps string, artifacts ...string) string {
	var b strings.Builder
	b.WriteString("name: demo\nversion: \"1.0.0\"\nartifacts:\n")
	if len(artifacts) == 0 {
		artifacts = []string{"  - name: acme/grep\n    version: \"1.0.0\"\n", "  - name: acme/cat\n    version: \"1.0.0\"\n"}
	}
	for _, a := range artifacts {
		b.WriteString(a)
	}
	if caps != "" {
		b.WriteString("capabilities:\n" + caps)
	}
	return b.String()
}
