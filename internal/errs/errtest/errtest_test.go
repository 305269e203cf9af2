package errtest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
)

// recorder is a testing.TB that records failures instead of failing the real test.
type recorder struct {
	testing.TB
	fatal  bool
	errors int
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.errors++ }
func (r *recorder) Fatalf(string, ...any) {
	r.fatal = true
	panic(r) // stands in for runtime.Goexit, which would end the real test
}

func check(err error, tok errs.Token, mentions ...string) (r *recorder) {
	r = &recorder{}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
	}()
	WantToken(r, err, tok, mentions...)
	return r
}

func TestWantToken(t *testing.T) {
	t.Parallel()
	notFound := fmt.Errorf("resolving: %w", errs.New(errs.NotFound, "acme/grep@1.0.0 is not in the store"))
	for _, c := range []struct {
		what     string
		err      error
		tok      errs.Token
		mentions []string
		fatal    bool
		errors   int
	}{
		{"match", notFound, errs.NotFound, []string{"acme/grep", "1.0.0"}, false, 0},
		{"nil error", nil, errs.NotFound, nil, true, 0},
		{"other token", notFound, errs.Integrity, nil, true, 0},
		{"untyped error", errors.New("boom"), errs.Network, nil, true, 0},
		{"missing mentions", notFound, errs.NotFound, []string{"acme/grep", "acme/cat", "2.0.0"}, false, 2},
	} {
		r := check(c.err, c.tok, c.mentions...)
		if r.fatal != c.fatal || r.errors != c.errors {
			t.Errorf("%s: fatal %v, %d errors; want fatal %v, %d errors", c.what, r.fatal, r.errors, c.fatal, c.errors)
		}
	}
}
