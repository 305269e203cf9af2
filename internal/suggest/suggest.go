// Package suggest finds the word someone most likely meant, for "did you mean" hints: one rule
// for mistyped commands and mistyped keys alike.
package suggest

// Nearest is the candidate closest to word by edit distance, if one is close enough to be a
// likely typo: at most 2 edits, or 3 for words of 8 letters or more. Ties go to the earlier
// candidate.
func Nearest(word string, candidates []string) (string, bool) {
	best, bestD := "", -1
	limit := 2
	if len(word) >= 8 {
		limit = 3
	}
	for _, c := range candidates {
		if d := Distance(word, c); d <= limit && (bestD < 0 || d < bestD) {
			best, bestD = c, d
		}
	}
	return best, bestD >= 0
}

// Distance is the Levenshtein distance between a and b, in bytes.
func Distance(a, b string) int {
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
