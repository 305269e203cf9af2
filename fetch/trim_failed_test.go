package fetch_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/ref"
)

// A pull in which everything failed trims nothing: the cache may be all this machine has while
// the stores are unreachable, and a failed pull brought nothing in to make room for (issue 22,
// item 17). A pull with one success among the failures still trims.
func TestPullThatAllFailedDoesNotTrim(t *testing.T) {
	w := newWorld(t)
	st := pulltest.LayoutStore(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 211)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	old := w.Ingest(pulltest.Pack(t, "old", "1.0.0", 212))
	at := time.Now().Add(-10 * time.Hour)
	os.Chtimes(w.CAS.Path(old), at, at)
	os.Chtimes(filepath.Join(w.CAS.Root(), "uses", old.Encoded()), at, at)
	var evicted []digest.Digest
	pl := w.puller(st)
	pl.SetTrim(1, func(ctx context.Context, d digest.Digest, dryRun bool) []string {
		evicted = append(evicted, d)
		return nil
	})
	pl.Pipeline().Report.Warn = func(string) {}
	if _, err := w.pull(pl, pulltest.Req(grep, "9.9.9")); err == nil {
		t.Fatal("a pull of a version no store has succeeded")
	}
	if !w.CAS.Has(old) || len(evicted) != 0 {
		t.Fatalf("a pull that all failed trimmed the cache: old blob kept %v, evicted %v", w.CAS.Has(old), evicted)
	}
	// The same cap, with one success among the failures: the trim runs.
	w.pull(pl, pulltest.Req(grep, "1.0.0"), pulltest.Req(ref.Name{Scope: "acme", Name: "nothere"}, "1.0.0"))
	if w.CAS.Has(old) {
		t.Fatal("a pull with a success did not trim to the cap")
	}
}
