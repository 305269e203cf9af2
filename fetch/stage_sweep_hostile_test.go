package fetch_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch"
)

// gc sweeps the staging leftovers of killed pulls, and only those: a staged tool that has sat in
// tools/ for hours is the project's, however old it is.
func TestStagingSweepTakesOnlyLeftovers(t *testing.T) {
	w := newWorld(t)
	st := layoutStore(t)
	p := pack(t, "grep", "1.0.0", 641)
	push(t, st, grep, "1.0.0", "any", p)
	w.mustPull(w.puller(st), req(grep, "1.0.0"))
	staged := filepath.Join(w.proj.ToolsDir(), "acme", "grep")
	leftover := filepath.Join(w.proj.ToolsDir(), "acme", ".mur-tmp-grep-killed")
	must(t, os.MkdirAll(leftover, 0o755))
	old := time.Now().Add(-time.Hour)
	for _, d := range []string{staged, leftover} {
		must(t, os.Chtimes(d, old, old))
	}
	rep, err := fetch.GC(bg, fetch.GCInput{CAS: w.cas, OlderThan: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(staged, "murmur.yaml")); err != nil {
		t.Fatalf("gc swept a staged tool: %v (swept %v)", err, rep.Staging)
	}
	if _, err := os.Stat(leftover); err == nil || len(rep.Staging) != 1 || rep.Staging[0] != leftover {
		t.Fatalf("gc kept a killed pull's staging folder: swept %v", rep.Staging)
	}
}
