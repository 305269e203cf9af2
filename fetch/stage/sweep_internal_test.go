package stage

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/murmur-nexus/mur/internal/ref"
)

// A failed staging removes the folders it made only while they are empty: a concurrent pull may
// have staged its own tool into tools/<scope>/ meanwhile, and that tool stays.
func TestRemoveCreatedKeepsWhatAnotherPullStaged(t *testing.T) {
	proj := Tools{Project: t.TempDir()}
	h, err := openScope(proj, ref.Name{Scope: "acme", Name: "grep"})
	if err != nil || len(h.created) != 2 {
		t.Fatalf("made %v, %v", h, err)
	}
	tools := proj.Dir()
	other := filepath.Join(tools, "acme", "sed", "capsule.wasm")
	if err := os.MkdirAll(filepath.Dir(other), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte("\x00asm"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.close(true)
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("a failed staging took another pull's tool: %v", err)
	}

	// Alone, the failed staging leaves no tools/ behind.
	os.RemoveAll(tools)
	h, err = openScope(proj, ref.Name{Scope: "acme", Name: "grep"})
	if err != nil {
		t.Fatal(err)
	}
	h.close(true)
	if _, err := os.Stat(tools); err == nil {
		t.Fatal("the failed staging's own empty folders are still there")
	}
}
