package errs

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestTokenSurvivesWrapping(t *testing.T) {
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
