package renovate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/github"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

// A version listed several times (one entry per platform) is released, to Renovate, when its
// last entry was published: an entry backdated by whoever can edit the index can't make a new
// version look old enough for minimumReleaseAge. Times are compared as times, not as strings,
// so an entry written with a far-east offset, whose text sorts after the others, does not win
// either.
func TestPresetReleaseIsTheLastPublished(t *testing.T) {
	needQuery(t)
	dir := t.TempDir()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	ix := &github.Index{IndexVersion: github.IndexVersion, Scope: "acme"}
	add := func(version, platform string, at time.Time) {
		t.Helper()
		file := artifacttest.File(t, t.TempDir(), "grep", version, artifacttest.Tagged(version+platform))
		more, err := github.IndexFilesAt([]string{file}, "acme", "v"+version, platform, at)
		if err != nil {
			t.Fatal(err)
		}
		if err := ix.Merge(more); err != nil {
			t.Fatal(err)
		}
	}
	add("1.0.0", "any", now.AddDate(0, -2, 0))
	// 2.0.0 came out now, and someone added a backdated entry for another platform.
	add("2.0.0", "any", now)
	add("2.0.0", "linux-x86_64", now.AddDate(-1, 0, 0))
	// 3.0.0's second entry is twelve hours older than its first, but written at +23:00, so
	// that its text sorts after the first's.
	add("3.0.0", "any", now)
	add("3.0.0", "linux-x86_64", now)
	for i, e := range ix.Artifacts {
		if e.Version == "3.0.0" && e.Platform == "linux-x86_64" {
			ix.Artifacts[i].Published = now.Add(-12 * time.Hour).In(time.FixedZone("", 23*3600)).Format(time.RFC3339)
		}
	}
	indexPath := filepath.Join(dir, "murmur-index.json")
	if err := os.WriteFile(indexPath, ix.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	manifestJSON := writeJSON(t, dir, "murmur.json", map[string]any{
		"artifacts": []any{map[string]any{"name": "acme/grep", "version": "1.0.0"}},
	})
	out := query(t, manifestJSON, indexPath)
	var got struct {
		Releases map[string][]struct {
			Version          string `json:"version"`
			ReleaseTimestamp string `json:"releaseTimestamp"`
		} `json:"releases"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string]time.Time{"1.0.0": now.AddDate(0, -2, 0), "2.0.0": now, "3.0.0": now}
	seen := 0
	for _, r := range got.Releases["acme/grep"] {
		at, err := time.Parse(time.RFC3339, r.ReleaseTimestamp)
		if err != nil {
			t.Errorf("%s: releaseTimestamp %q: %v", r.Version, r.ReleaseTimestamp, err)
			continue
		}
		if w, ok := want[r.Version]; !ok || !at.Equal(w) {
			t.Errorf("%s is released at %s, want %s (its last entry's time)", r.Version, at.UTC(), w)
		}
		seen++
	}
	if seen != len(want) {
		t.Errorf("the datasource found %d releases of acme/grep, want %d: %s", seen, len(want), out)
	}
}
