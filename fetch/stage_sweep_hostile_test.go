package fetch_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/lockedfile"
)

// gc sweeps the staging leftovers of killed pulls, and only those: a staged tool that has sat in
// tools/ for hours is the project's, however old it is.
func TestStagingSweepTakesOnlyLeftovers(t *testing.T) {
	w := newWorld(t)
	st := pulltest.LayoutStore(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 641)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	w.mustPull(w.puller(st), pulltest.Req(grep, "1.0.0"))
	staged := filepath.Join(w.Proj.ToolsDir(), "acme", "grep")
	leftover := filepath.Join(w.Proj.ToolsDir(), "acme", ".mur-tmp-grep-killed")
	must(t, os.MkdirAll(leftover, 0o755))
	old := time.Now().Add(-time.Hour)
	for _, d := range []string{staged, leftover} {
		must(t, os.Chtimes(d, old, old))
	}
	rep, err := fetch.GC(bg, fetch.GCInput{CAS: w.CAS, OlderThan: -1})
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

// plantStaging makes a staging leftover in tools/acme/ and ages it past the grace.
func plantStaging(t *testing.T, proj pull.Project, name string) string {
	t.Helper()
	dir := filepath.Join(proj.ToolsDir(), "acme", ".mur-tmp-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "capsule.wasm"), make([]byte, 1<<20), 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(dir, old, old)
	return dir
}

// Staging leftovers that no live process holds go at the next pull, and at gc.
func TestStagingLeftoversAreRemoved(t *testing.T) {
	w := newWorld(t)
	st := pulltest.LayoutStore(t)
	pulltest.Push(t, st, grep, "1.0.0", "any", pulltest.Pack(t, "grep", "1.0.0", 110))
	dead := plantStaging(t, w.Proj, "grep-dead")
	live := plantStaging(t, w.Proj, "grep-live")
	held, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	if err := lockedfile.TryLock(held); err != nil {
		t.Fatal(err)
	}
	young := filepath.Join(w.Proj.ToolsDir(), "acme", ".mur-tmp-grep-young")
	os.MkdirAll(young, 0o755)

	w.mustPull(w.puller(st), pulltest.Req(grep, "1.0.0"))
	if _, err := os.Stat(dead); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("the pull left a staging leftover no process holds")
	}
	for _, dir := range []string{live, young} {
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("the pull removed %s, which a live process may hold: %v", dir, err)
		}
	}
	held.Close()
	old := time.Now().Add(-time.Hour)
	os.Chtimes(young, old, old)
	dry, err := fetch.GC(context.Background(), fetch.GCInput{CAS: w.CAS, Project: w.Proj.Dir, OlderThan: -1, DryRun: true})
	if err != nil || len(dry.Staging) != 2 {
		t.Fatalf("gc --dry-run = %+v, %v; want both leftovers listed", dry.Staging, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatal("a dry run removed a leftover")
	}
	rep, err := fetch.GC(context.Background(), fetch.GCInput{CAS: w.CAS, OlderThan: -1})
	if err != nil || len(rep.Staging) != 2 {
		t.Fatalf("gc from outside the project (through its root) = %+v, %v", rep.Staging, err)
	}
	ents, _ := os.ReadDir(filepath.Join(w.Proj.ToolsDir(), "acme"))
	if len(ents) != 2 { // grep/ and its lock file
		t.Fatalf("tools/acme holds %d entries after gc", len(ents))
	}
}
