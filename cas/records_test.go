package cas_test

import (
	"testing"
	"time"

	"github.com/murmur-nexus/mur/cas"
)

func TestRecentKeepsTheNewestSince(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var recs []cas.Record
	for i := range 5 {
		recs = append(recs, cas.Record{Ref: string(rune('a' + i)), Time: t0.Add(time.Duration(i) * time.Hour)})
	}
	refs := func(rs []cas.Record) string {
		s := ""
		for _, r := range rs {
			s += r.Ref
		}
		return s
	}
	for _, tc := range []struct {
		since time.Time
		limit int
		want  string
	}{
		{time.Time{}, 0, "abcde"},
		{time.Time{}, 2, "de"},
		{time.Time{}, 9, "abcde"},
		{t0.Add(2 * time.Hour), 0, "cde"}, // at since is kept
		{t0.Add(2*time.Hour + time.Second), 0, "de"},
		{t0.Add(time.Hour), 2, "de"},
		{t0.Add(9 * time.Hour), 0, ""},
	} {
		if got := refs(cas.Recent(recs, tc.since, tc.limit)); got != tc.want {
			t.Errorf("Recent(since %v, limit %d) = %q, want %q", tc.since, tc.limit, got, tc.want)
		}
	}
	if refs(recs) != "abcde" {
		t.Fatalf("Recent changed its input: %q", refs(recs))
	}
}
