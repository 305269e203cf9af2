package e2e

import "strings"

// floorRepos turns the refs of the RTT row (host/repo:tag) into the repositories that the floor
// client, testdata/floorpull, asks for.
func floorRepos(refs []string) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		_, path, _ := strings.Cut(r, "/")
		out[i], _, _ = strings.Cut(path, ":")
	}
	return out
}
