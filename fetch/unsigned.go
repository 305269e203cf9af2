package fetch

import (
	"fmt"
	"strings"

	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/internal/errs"
)

// UnsignedWarnings are the no-provenance lines of a command, one per scope whose artifacts no
// place held a bundle for, in the order the scopes first appear: a pull of twenty unsigned
// artifacts of one scope says so once, on one line, with both ways out. Each result still
// carries its own warning (Result.Unsigned) for --json.
func UnsignedWarnings(results []Result) []string {
	var scopes []string
	first := map[string]string{}
	count := map[string]int{}
	for _, r := range results {
		if r.Unsigned == "" {
			continue
		}
		scope, _, _ := strings.Cut(r.Name, "/")
		if count[scope] == 0 {
			scopes = append(scopes, scope)
			first[scope] = r.Name + "@" + r.Version
		}
		count[scope]++
	}
	out := make([]string, 0, len(scopes))
	for _, s := range scopes {
		what := first[s] + " is"
		if n := count[s]; n > 1 {
			what = fmt.Sprintf("%d artifacts of scope %s are", n, s)
		}
		out = append(out, fmt.Sprintf("%s: %s unsigned; %s", errs.NoProvenance, what, pull.ProvenanceWayOut))
	}
	return out
}
