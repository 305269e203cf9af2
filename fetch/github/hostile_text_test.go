package github

import (
	"net/http"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// GitHub's message in an error body is quoted escaped and, when long, cut with a note: a hostile
// server can neither drive the terminal nor flood the log through it.
func TestHostileAPIMessageIsEscapedAndCut(t *testing.T) {
	fake, c := setup(t)
	fake.AlwaysFail(http.StatusForbidden)
	fake.FailMessage("\x1b]52;c;aGFja2Vk\x07" + strings.Repeat("A", 3000))
	_, _, err := fetchGrep(t, c, "1.2.0", nil)
	errtest.WantToken(t, err, errs.Denied, `\x1b]52;c;aGFja2Vk\x07`, "(cut: ")
	if strings.ContainsAny(err.Error(), "\x1b\x07") || strings.Count(err.Error(), "A") > 600 {
		t.Fatalf("the message is raw or whole: %d bytes", len(err.Error()))
	}
}
