package manifest

import (
	"testing"

	"github.com/murmur-nexus/mur/internal/atomicfile"
)

func FuzzParse(f *testing.F) {
	f.Add([]byte(full))
	f.Add([]byte("name: c\ncapabilities: { filesystem: { scope: ../x } }\n"))
	f.Add([]byte("a: &a [*a, *a]\nname: *a\n"))
	f.Add([]byte("name: c\nartifacts:\n  - name: a/b\n    capabilities: { state: null, install: { from: [] } }\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "murmur.yaml")
		if err != nil {
			return
		}
		if c.Name == "" || c.Capabilities.Filesystem.Scope == "" {
			t.Fatalf("accepted a capsule without name or scope: %+v", c)
		}
		for i := range c.Artifacts {
			a := &c.Artifacts[i]
			e := c.Effective(a)
			if !atomicfile.Within(e.Filesystem.Scope, c.Capabilities.Filesystem.Scope) {
				t.Fatalf("artifact %s widened the scope to %q", a.Name, e.Filesystem.Scope)
			}
			if e.State != nil && c.Capabilities.State == nil {
				t.Fatalf("artifact %s gained state", a.Name)
			}
			for _, s := range e.Install.From {
				if !contains(c.Capabilities.Install.From, s) {
					t.Fatalf("artifact %s gained source %q", a.Name, s)
				}
			}
			if found, err := c.Find(a.Name.String()); err != nil || found != a {
				t.Fatalf("Find(%s) = %v, %v", a.Name, found, err)
			}
		}
	})
}
