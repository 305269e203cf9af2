// Package errtest holds the one assertion that tests of every package make about a user-facing
// error: it carries the expected token and its sentence names what it should.
package errtest

import (
	"errors"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
)

// WantToken fails t unless err's outermost token, the one `mur: <token>:` prints, is tok; it then
// reports (without stopping t) each of mentions that err's text does not contain.
func WantToken(t testing.TB, err error, tok errs.Token, mentions ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", tok)
	}
	if got := errs.TokenOf(err); got != tok || !errors.Is(err, tok) {
		t.Fatalf("got %v (token %s), want token %s", err, got, tok)
	}
	for _, m := range mentions {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("error %q does not mention %q", err, m)
		}
	}
}
