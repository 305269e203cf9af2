package lockedfile

import (
	"os"
	"path/filepath"
	"testing"
)

// Two open files of one path conflict as two processes would: an exclusive lock shuts out both
// kinds, and shared locks admit each other.
func TestTryLockConflicts(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "x")
	open := func() *os.File {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	a, b, c := open(), open(), open()
	if err := TryRLock(a); err != nil {
		t.Fatal(err)
	}
	if err := TryRLock(b); err != nil {
		t.Fatalf("a second shared lock: %v", err)
	}
	if err := TryLock(c); !Busy(err) {
		t.Fatalf("an exclusive lock beside shared ones: %v, want busy", err)
	}
	a.Close()
	b.Close()
	if err := TryLock(c); err != nil {
		t.Fatalf("an exclusive lock once the shared ones are closed: %v", err)
	}
	if err := TryRLock(open()); !Busy(err) {
		t.Fatalf("a shared lock beside an exclusive one: %v, want busy", err)
	}
}
