package lock

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
)

func FuzzParse(f *testing.F) {
	f.Add([]byte(sampleText))
	f.Add([]byte("lock_version: 3\nscopes: {}\nartifacts: []\n"))
	f.Add([]byte("lock_version: 3\nartifacts:\n  - {name: a/b, resolved_version: \"1.0\", sha256: {any: " + h(7) + "}, origin: ci}\n"))
	f.Add([]byte("lock_version: 3\nscopes: { murmur: { source: github:murmur-nexus/default-artifacts, owner_id: 5, repo_id: 6 } }\n"))
	f.Add([]byte("lock_version: 2\n"))
	f.Add([]byte("lock_version: 3\nartifacts: &a [*a]\n"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Parse(data, "murmur.lock")
		if err != nil {
			if !errors.Is(err, errs.InvalidLock) {
				t.Fatalf("error without invalid-lock token: %v", err)
			}
			return
		}
		out := l.Marshal()
		l2, err := Parse(out, "murmur.lock")
		if err != nil {
			t.Fatalf("re-parse of marshalled lock failed: %v\n%s", err, out)
		}
		l.Warnings = nil
		if !reflect.DeepEqual(l, l2) {
			t.Fatalf("round trip changed the lock:\n%+v\n%+v", l, l2)
		}
		if !bytes.Equal(l2.Marshal(), out) {
			t.Fatal("marshal not stable")
		}
	})
}

func bigLock(n int) []byte {
	l := &Lock{Scopes: map[string]ScopePin{}}
	for i := range n {
		scope := fmt.Sprintf("scope%d", i%50)
		l.Scopes[scope] = ScopePin{Source: "github:" + scope + "/murmur-artifacts", OwnerID: int64(i + 1), RepoID: int64(i + 2)}
		name := fmt.Sprintf("%s/tool-%d", scope, i)
		if i%3 == 0 {
			l.Upsert(name, "1.2."+strconv.Itoa(i), "linux-x86_64", h(i*7+1), "", false)
			l.Upsert(name, "1.2."+strconv.Itoa(i), "darwin-aarch64", h(i*7+2), "", false)
		} else {
			l.Upsert(name, "1.2."+strconv.Itoa(i), "any", h(i*7+3), "", false)
		}
	}
	return l.Marshal()
}

func TestBigLockRoundTrip(t *testing.T) {
	t.Parallel()
	data := bigLock(1000)
	l, err := Parse(data, "")
	must(t, err)
	if len(l.Artifacts) != 1000 || len(l.Scopes) != 50 {
		t.Fatalf("%d artifacts, %d scopes", len(l.Artifacts), len(l.Scopes))
	}
	if !bytes.Equal(l.Marshal(), data) {
		t.Fatal("1000-entry lock does not round-trip byte for byte")
	}
}

func BenchmarkParseMarshal1000(b *testing.B) {
	data := bigLock(1000)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		l, err := Parse(data, "")
		if err != nil {
			b.Fatal(err)
		}
		if len(l.Marshal()) != len(data) {
			b.Fatal("size changed")
		}
	}
}
