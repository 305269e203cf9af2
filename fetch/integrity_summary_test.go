package fetch_test

import (
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/pull"
)

func TestIntegritySummaryNamesWhatFellThroughBadBytes(t *testing.T) {
	clean := pull.Result{Name: "acme/a", Skipped: []pull.Skipped{{Place: "oci://x/m", Token: "not-found"}, {Place: "oci://y/m", Token: "network"}}}
	if s := fetch.IntegritySummary([]pull.Result{clean}); s != "" {
		t.Fatalf("a pull that met no bad bytes: %q", s)
	}
	bad := pull.Result{Name: "acme/b", Skipped: []pull.Skipped{{Place: "oci://evil/m", Token: "integrity"}}}
	s := fetch.IntegritySummary([]pull.Result{clean, bad})
	for _, want := range []string{"1 artifact was pulled only after", "oci://evil/m", "acme/b", "integrity check"} {
		if !strings.Contains(s, want) {
			t.Fatalf("summary %q lacks %q", s, want)
		}
	}
}
