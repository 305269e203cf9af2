package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

// Eight commands into one project at once, as two terminals and an update bot would: every one
// exits 0, and every pin is in murmur.lock, murmur.yaml and tools/ afterwards. Each command pins
// and declares its artifact under one file lock, and prunes only what murmur.yaml, read under
// that lock, does not declare, so no command prunes another's pin as undeclared.
func TestConcurrentCommandsLoseNoPin(t *testing.T) {
	t.Parallel()
	const n, rounds = 8, 10
	layout := t.TempDir()
	seed := newWorld(t)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("tool%d", i)
		f := artifacttest.File(t, t.TempDir(), name, "1.0.0", artifacttest.Tagged(name))
		seed.ok("push", f, "--scope", "acme", "--store", "oci-layout:"+layout)
	}
	for _, verb := range []string{"pull", "add"} {
		t.Run(verb, func(t *testing.T) {
			for round := 0; round < rounds; round++ {
				w := newWorld(t)
				w.stores("oci-layout:" + layout)
				w.write("murmur.yaml", "name: racing\n")
				var wg sync.WaitGroup
				results := make([]result, n)
				for i := 0; i < n; i++ {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						args := []string{verb, fmt.Sprintf("acme/tool%d@1.0.0", i), "--no-precompile"}
						results[i] = w.runCmd(w.cmd(args...), args)
					}(i)
				}
				wg.Wait()
				for i, r := range results {
					if r.code != 0 {
						t.Fatalf("round %d: mur %s acme/tool%d: %s", round, verb, i, r)
					}
				}
				l := w.lock()
				yaml, _ := os.ReadFile(filepath.Join(w.project, "murmur.yaml"))
				for i := 0; i < n; i++ {
					name := fmt.Sprintf("acme/tool%d", i)
					if l.Find(name) == nil {
						t.Errorf("round %d: murmur.lock lost %s:\n%s", round, name, w.lockBytes())
					}
					if !strings.Contains(string(yaml), name) {
						t.Errorf("round %d: murmur.yaml lost %s:\n%s", round, name, yaml)
					}
					if _, err := os.Stat(filepath.Join(w.project, "tools", "acme", fmt.Sprintf("tool%d", i))); err != nil {
						t.Errorf("round %d: tools/ lost %s: %v", round, name, err)
					}
				}
				if t.Failed() {
					return
				}
			}
		})
	}
}

// A mistyped key in murmur.yaml never prunes or pins: a command that would write murmur.lock or
// tools/ refuses it with invalid-manifest and the key it most likely meant, and changes nothing.
func TestManifestTyposChangeNothing(t *testing.T) {
	t.Parallel()
	layout := t.TempDir()
	w := newWorld(t)
	for _, name := range []string{"notes", "grep"} {
		f := artifacttest.File(t, t.TempDir(), name, "1.0.0", artifacttest.Tagged(name))
		w.ok("push", f, "--scope", "acme", "--store", "oci-layout:"+layout)
	}
	w.stores("oci-layout:" + layout)
	w.write("murmur.yaml", "name: typos\nartifacts:\n  - name: acme/notes\n    version: 1.0.0\n")
	w.ok("pull", "--no-precompile")
	before := w.lockBytes()
	blobs := w.blobCount()
	for _, c := range []struct{ yaml, want string }{
		{"name: typos\nartifact:\n  - name: acme/notes\n    version: 1.0.0\n", `unknown key "artifact"; did you mean artifacts?`},
		{"name: typos\nartifacts:\n  - name: acme/notes\n    verison: 1.0.0\n", `did you mean version?`},
	} {
		w.write("murmur.yaml", c.yaml)
		for _, args := range [][]string{{"pull", "--no-precompile"}, {"lock"}, {"add", "acme/grep@1.0.0", "--no-precompile"}} {
			r := w.fails("invalid-manifest", args...)
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("mur %v: the error does not say %q:\n%s", args, c.want, r)
			}
			w.assertUnchanged(blobs, before)
			if _, err := os.Stat(filepath.Join(w.project, "tools", "acme", "notes")); err != nil {
				t.Errorf("mur %v removed tools/acme/notes: %v", args, err)
			}
		}
	}
}

// The air-gap hand-over: `mur warm --layout DIR` on a machine with the network, then a fresh
// home pulls from DIR with the network off. A layout is a folder on disk, not the network.
func TestOfflinePullFromAWarmedLayout(t *testing.T) {
	t.Parallel()
	layout := t.TempDir()
	w := newWorld(t)
	f := artifacttest.File(t, t.TempDir(), "notes", "1.0.0", artifacttest.Tagged("notes"))
	w.ok("push", f, "--scope", "acme", "--store", "oci-layout:"+layout)
	w.stores("oci-layout:" + layout)
	w.write("murmur.yaml", "name: air\nartifacts:\n  - name: acme/notes\n    version: 1.0.0\n")
	w.ok("pull", "--no-precompile")
	handover := filepath.Join(t.TempDir(), "handover")
	r := w.ok("warm", "--layout", handover)
	if !strings.Contains(r.stdout, "mur pull --store oci-layout:"+handover) {
		t.Errorf("warm --layout does not say how to pull from what it wrote:\n%s", r)
	}

	fresh := newWorld(t)
	fresh.write("murmur.yaml", "name: air\nartifacts:\n  - name: acme/notes\n    version: 1.0.0\n")
	if err := os.WriteFile(filepath.Join(fresh.project, "murmur.lock"), []byte(w.lockBytes()), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh.ok("pull", "--offline", "--frozen", "--no-precompile", "--store", "oci-layout:"+handover)
	if _, err := os.Stat(filepath.Join(fresh.project, "tools", "acme", "notes")); err != nil {
		t.Fatalf("the offline pull staged nothing: %v", err)
	}
	// Without a layout the network is still off.
	other := newWorld(t)
	other.write("murmur.yaml", "name: air\nartifacts:\n  - name: acme/notes\n    version: 1.0.0\n")
	other.fails("offline", "pull", "--offline", "--no-precompile")
}

// The small verbs say what they did and take what a person types: mur add of another version of
// a declared artifact says the move, and mur rm takes the bare name of a declared artifact and
// offers "did you mean" for a near miss.
func TestAddAndRmSpeakPlainly(t *testing.T) {
	t.Parallel()
	layout := t.TempDir()
	w := newWorld(t)
	for _, v := range []string{"0.9.0", "1.0.0"} {
		f := artifacttest.File(t, t.TempDir(), "grep", v, artifacttest.Tagged("grep"+v))
		w.ok("push", f, "--scope", "acme", "--store", "oci-layout:"+layout)
	}
	w.stores("oci-layout:" + layout)
	w.write("murmur.yaml", "name: p\nartifacts:\n  - name: acme/grep\n    version: 1.0.0\n")
	w.ok("pull", "--no-precompile")
	if r := w.ok("add", "acme/grep@0.9.0", "--no-precompile"); !strings.Contains(r.stdout, "acme/grep: 1.0.0 → 0.9.0") {
		t.Errorf("mur add of another version does not say the move:\n%s", r)
	}
	if r := w.fails("not-found", "rm", "acme/gerp"); !strings.Contains(r.stderr, "did you mean acme/grep?") {
		t.Errorf("mur rm of a near miss offers nothing:\n%s", r)
	}
	w.ok("rm", "grep")
	if w.lock().Find("acme/grep") != nil {
		t.Fatalf("mur rm grep kept the pin:\n%s", w.lockBytes())
	}
}
