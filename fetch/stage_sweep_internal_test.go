package fetch

import (
	"os"
	"path/filepath"
	"testing"
)

// A failed staging removes the folders it made only while they are empty: a concurrent pull may
// have staged its own tool into tools/<scope>/ meanwhile, and that tool stays.
func TestRemoveCreatedKeepsWhatAnotherPullStaged(t *testing.T) {
	proj := t.TempDir()
	tools := filepath.Join(proj, "tools")
	made, err := mkdirAllRecorded(filepath.Join(tools, "acme", ".mur-tmp-grep"), proj)
	if err != nil || len(made) != 3 {
		t.Fatalf("made %v, %v", made, err)
	}
	other := filepath.Join(tools, "acme", "sed", "capsule.wasm")
	if err := os.MkdirAll(filepath.Dir(other), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte("\x00asm"), 0o644); err != nil {
		t.Fatal(err)
	}
	removeCreated(made)
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("a failed staging took another pull's tool: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tools, "acme", ".mur-tmp-grep")); err == nil {
		t.Fatal("the failed staging's own empty folder is still there")
	}
}
