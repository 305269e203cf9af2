package errs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTokenSurvivesWrapping(t *testing.T) {
	t.Parallel()
	base := Wrap(fs.ErrNotExist, NotFound, "acme/grep@1.2.0 is not in the store")
	err := fmt.Errorf("pulling: %w", base)
	if !errors.Is(err, NotFound) {
		t.Fatal("errors.Is(err, NotFound) = false")
	}
	if errors.Is(err, Integrity) {
		t.Fatal("errors.Is(err, Integrity) = true for a not-found error")
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("cause is not reachable")
	}
	if got := TokenOf(err); got != NotFound {
		t.Fatalf("TokenOf = %q", got)
	}
	if got := Message(err); got != "acme/grep@1.2.0 is not in the store" {
		t.Fatalf("Message = %q", got)
	}
	if got := TokenOf(errors.New("plain")); got != Internal {
		t.Fatalf("TokenOf(plain) = %q", got)
	}
}

// A sentence that names the path already prints the system's cause alone.
func TestOSCause(t *testing.T) {
	t.Parallel()
	_, err := os.Open(filepath.Join(t.TempDir(), "absent"))
	if got := OSCause(err); got != fs.ErrNotExist && got.Error() != "no such file or directory" {
		t.Fatalf("OSCause(%v) = %v, want the bare cause", err, got)
	}
	if got := OSCause(err); strings.Contains(got.Error(), "absent") {
		t.Fatalf("OSCause(%v) = %v still names the path", err, got)
	}
	link := &os.LinkError{Op: "rename", Old: "a", New: "b", Err: fs.ErrExist}
	if got := OSCause(fmt.Errorf("wrapped: %w", link)); got != fs.ErrExist {
		t.Fatalf("OSCause of a LinkError = %v, want %v", got, fs.ErrExist)
	}
	plain := errors.New("plain")
	if got := OSCause(plain); got != plain {
		t.Fatalf("OSCause(plain) = %v, want it unchanged", got)
	}
}
