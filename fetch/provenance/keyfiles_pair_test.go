package provenance

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// A public key that can't be written once the private one is (its name taken between the check
// and the write) leaves no half pair: the private key is taken back, and the file that took the
// name is left as it was.
func TestWritePairLeavesNoHalfPair(t *testing.T) {
	dir := t.TempDir()
	kp := KeyPair{Private: filepath.Join(dir, "team.key"), Public: filepath.Join(dir, "team.pub")}
	if err := os.WriteFile(kp.Public, []byte("theirs"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := writePair(kp, []byte("private"), []byte("public"))
	errtest.WantToken(t, err, errs.Usage, kp.Public+" already exists")
	if _, err := os.Lstat(kp.Private); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a pair whose public half failed left %s: %v", kp.Private, err)
	}
	if got, _ := os.ReadFile(kp.Public); string(got) != "theirs" {
		t.Fatalf("%s was replaced: %q", kp.Public, got)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("the folder holds %d entries, want the one that was there", len(ents))
	}
}
