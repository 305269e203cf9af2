package ref

import (
	"fmt"
	"strings"

	"github.com/murmur-nexus/mur/internal/suggest"
)

// ShownVersions is how many versions a "no such version" message lists.
const ShownVersions = 10

// ListVersions names the newest ShownVersions of versions, newest first, for a message that
// says which versions exist: "1.2.0, 1.1.0 and 1.0.0", or "… (the newest 10 of 14)".
func ListVersions(versions []string) string {
	vs := NewestFirst(versions)
	if len(vs) <= ShownVersions {
		return strings.Join(vs, ", ")
	}
	return fmt.Sprintf("%s (the newest %d of %d)", strings.Join(vs[:ShownVersions], ", "), ShownVersions, len(vs))
}

// Closest is the name among names nearest to name by edit distance (suggest.Distance), when it
// is near enough to be a typo (fewer edits than a third of its length: names are longer than
// the keys and commands suggest.Nearest serves); "" otherwise, and when name is among them.
func Closest(name string, names []string) string {
	best, bestD := "", len(name)/3+1
	for _, n := range names {
		if n == name {
			return "" // it exists: nothing to suggest
		}
		if d := suggest.Distance(name, n); d < bestD || d == bestD && best != "" && n < best {
			best, bestD = n, d
		}
	}
	return best
}

// DropV is the version among versions that version names with a leading "v" ("1.2.0" for
// "v1.2.0"): Git tags are often written so, and mur's versions never are. "" when version has
// no leading v, or when versions don't hold the rest.
func DropV(version string, versions []string) string {
	rest, ok := strings.CutPrefix(version, "v")
	if !ok {
		rest, ok = strings.CutPrefix(version, "V")
	}
	if !ok || rest == "" {
		return ""
	}
	for _, v := range versions {
		if v == rest {
			return rest
		}
	}
	return ""
}
