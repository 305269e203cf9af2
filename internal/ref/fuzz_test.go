package ref

import (
	"strings"
	"testing"
)

func FuzzParseName(f *testing.F) {
	for _, s := range []string{"acme/grep", "grep", "Acme/grep", "a/b/c", "-a/b", "", "/", strings.Repeat("a", 101) + "/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseName(s)
		if err != nil {
			if n != (Name{}) {
				t.Fatalf("ParseName(%q) returned %v with error %v", s, n, err)
			}
			return
		}
		if n.String() != s {
			t.Fatalf("ParseName(%q).String() = %q", s, n.String())
		}
		if ValidateSegment(n.Scope) != nil || ValidateSegment(n.Name) != nil {
			t.Fatalf("ParseName(%q) accepted invalid segments %+v", s, n)
		}
		again, err := ParseName(n.String())
		if err != nil || again != n {
			t.Fatalf("round trip of %q: %+v, %v", s, again, err)
		}
	})
}

func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"acme/grep@1.2.0", "acme/grep", "acme/grep@LATEST", "x.mur.zip", "acme/grep@", "acme/grep@1@2", "acme/grep@stable", "a/b@1.0.0+x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRef(s)
		if err != nil {
			return
		}
		again, err := ParseRef(r.String())
		if err != nil || again != r {
			t.Fatalf("ParseRef(%q) = %+v does not round-trip through %q: %+v, %v", s, r, r.String(), again, err)
		}
		if !r.IsFile() {
			if r.Version != Latest && ValidateVersion(r.Version) != nil {
				t.Fatalf("ParseRef(%q) accepted version %q", s, r.Version)
			}
			if _, err := ParseName(r.Name.String()); err != nil {
				t.Fatalf("ParseRef(%q) accepted name %q: %v", s, r.Name, err)
			}
		}
	})
}
