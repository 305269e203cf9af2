package fetch

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/internal/errs"
)

// Blocked is the one error of a command whose artifacts failed at their stores and sources,
// said once per cause rather than once per artifact: "no store is configured" first when none
// is, then each store or source that failed, with its reason and the artifacts it blocked. A
// store that is down fails every artifact with the same reason, and a paragraph each would
// bury the fix. covered marks the results it speaks for; err is nil, and covered empty, when
// fewer than two results failed at their places, since one artifact's own message says it best.
func Blocked(results []Result) (err error, covered []bool) {
	type cause struct {
		tok     errs.Token
		msg     string
		blocked []string
	}
	var (
		causes  []*cause
		byKey   = map[string]*cause{}
		noStore []string // blocked by the missing store alone: nothing else was asked
		asked   []string
		tok     errs.Token
		// anyNoStore: some request's install.from names stores, and none is configured.
		anyNoStore bool
		hints      []string
	)
	covered = make([]bool, len(results))
	for i, r := range results {
		var ce *pull.ChainError
		if r.Err == nil || !errors.As(r.Err, &ce) {
			continue
		}
		covered[i] = true
		asked = append(asked, ce.What)
		if tok == "" {
			tok = errs.TokenOf(r.Err)
		}
		if ce.NoStore && len(ce.Places) == 0 {
			noStore = append(noStore, ce.What)
		}
		for _, pf := range ce.Places {
			msg := strings.TrimSuffix(pf.Cause, ".")
			if !strings.Contains(msg, pf.Place) {
				msg = pf.Place + ": " + msg
			}
			key := string(pf.Token) + "\x00" + msg
			c := byKey[key]
			if c == nil {
				c = &cause{tok: pf.Token, msg: msg}
				byKey[key] = c
				causes = append(causes, c)
			}
			c.blocked = append(c.blocked, ce.What)
		}
		anyNoStore = anyNoStore || ce.NoStore
		for _, h := range ce.Hints {
			if !slices.Contains(hints, h) {
				hints = append(hints, h)
			}
		}
	}
	if len(asked) < 2 {
		return nil, make([]bool, len(results))
	}
	var b strings.Builder
	if anyNoStore {
		b.WriteString(pull.NoStoreHint)
		if len(noStore) > 0 {
			fmt.Fprintf(&b, "; nothing was asked for %s", strings.Join(noStore, ", "))
		}
	} else {
		fmt.Fprintf(&b, "%d artifacts could not be pulled", len(asked))
	}
	if len(causes) > 0 {
		b.WriteString("; each store or source that failed, and what it blocked:")
	}
	for _, c := range causes {
		fmt.Fprintf(&b, "\n  %s: %s", c.tok, c.msg)
		if len(c.blocked) > 1 || !strings.Contains(c.msg, c.blocked[0]) {
			fmt.Fprintf(&b, "; it blocked %s", strings.Join(c.blocked, ", "))
		}
	}
	for _, h := range hints {
		fmt.Fprintf(&b, "\n  %s", h)
	}
	return errs.New(tok, "%s", b.String()), covered
}
