package fetch

import (
	"fmt"
	"sort"
	"strings"
)

// IntegritySummary is the line a pull ends with when some artifact was pulled only after a
// store failed its integrity checks, naming the artifacts and the stores; "" when none did. A
// pull that fell through bad bytes succeeded, but it is not a clean pull.
func IntegritySummary(results []Result) string {
	var arts []string
	places := map[string]bool{}
	for _, r := range results {
		bad := false
		for _, s := range r.Skipped {
			if s.IntegrityFailure() {
				bad = true
				places[s.Place] = true
			}
		}
		if bad {
			arts = append(arts, r.Name)
		}
	}
	if len(arts) == 0 {
		return ""
	}
	var ps []string
	for p := range places {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	what := "artifact was"
	if len(arts) > 1 {
		what = "artifacts were"
	}
	return fmt.Sprintf("%d %s pulled only after %s served bytes that failed the integrity check (%s); the bytes pinned were verified, but check or remove those stores", len(arts), what, strings.Join(ps, ", "), strings.Join(arts, ", "))
}
