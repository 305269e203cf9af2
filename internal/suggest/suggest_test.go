package suggest

import "testing"

func TestNearest(t *testing.T) {
	t.Parallel()
	keys := []string{"scope", "read_only"}
	for _, c := range []struct {
		word, want string
		ok         bool
	}{
		{"readonly", "read_only", true},
		{"read-only", "read_only", true},
		{"scop", "scope", true},
		{"mounts", "", false},
		{"", "", false},
	} {
		if got, ok := Nearest(c.word, keys); got != c.want || ok != c.ok {
			t.Errorf("Nearest(%q) = %q, %v; want %q, %v", c.word, got, ok, c.want, c.ok)
		}
	}
	if got, _ := Nearest("limit", []string{"filesystem", "state", "env", "limits", "install"}); got != "limits" {
		t.Errorf("Nearest(limit) = %q", got)
	}
	if got, ok := Nearest("capabilites", []string{"name", "version", "artifacts", "capabilities"}); got != "capabilities" || !ok {
		t.Errorf("Nearest(capabilites) = %q", got)
	}
	if d := Distance("pul", "pull"); d != 1 {
		t.Errorf("Distance(pul, pull) = %d", d)
	}
}
