package ref

import (
	"fmt"
	"strings"
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

// Closest is the name among names nearest to name by edit distance, when it is near enough to
// be a typo (fewer edits than a third of its length); "" otherwise, and when name is among them.
func Closest(name string, names []string) string {
	best, bestD := "", len(name)/3+1
	for _, n := range names {
		if n == name {
			return "" // it exists: nothing to suggest
		}
		if d := editDistance(name, n); d < bestD || d == bestD && best != "" && n < best {
			best, bestD = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
