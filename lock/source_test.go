package lock

import (
	"strings"
	"testing"
)

func TestParseSource(t *testing.T) {
	t.Parallel()
	o, r, err := ParseSource("github:Acme-Co/murmur.tools_2")
	if err != nil || o != "Acme-Co" || r != "murmur.tools_2" {
		t.Fatalf("got %q %q %v", o, r, err)
	}
	for _, s := range []string{"", "github:", "github:acme", "github:acme/", "github:/x", "gitlab:acme/x",
		"github:-acme/x", "github:acme-/x", "github:acme/x/y", "github:acme/..", "github:a b/x", "github:" + strings.Repeat("a", 40) + "/x"} {
		if _, _, err := ParseSource(s); err == nil {
			t.Errorf("ParseSource(%q) accepted", s)
		}
	}
}
