package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

// A pin that recorded provenance moves only to a version whose provenance verified, on every path
// that moves pins: `mur lock` after murmur.yaml is bumped (what an update bot runs), and
// `mur pull --update`. An unsigned release is refused with provenance-missing and the lock is
// unchanged byte for byte; a signed one moves the pin and records its provenance from metadata.
func TestLockCarriesProvenance(t *testing.T) {
	t.Parallel()
	layout := t.TempDir()
	w := newWorld(t)
	dir := t.TempDir()
	keyFile, pubPEM := teamKey(t, dir)
	hint := ""
	publish := func(v struct {
		version string
		signed  bool
	}) {
		f := artifacttest.File(t, t.TempDir(), "grep", v.version, artifacttest.Tagged("grep"+v.version))
		args := []string{"push", "--json", f, "--scope", "acme", "--store", "oci-layout:" + layout}
		if v.signed {
			args = append(args, "--sign-key", keyFile)
		}
		out := w.ok(args...)
		var pushed struct {
			Results []struct {
				Hint string `json:"signed_with"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(out.stdout), &pushed); err != nil || len(pushed.Results) != 1 {
			t.Fatalf("push --json: %v\n%s", err, out.stdout)
		}
		if v.signed {
			hint = pushed.Results[0].Hint
		}
	}
	type release = struct {
		version string
		signed  bool
	}
	publish(release{"1.0.0", true})
	publish(release{"1.1.0", false})
	home := "scopes:\n  acme:\n    trusted_keys:\n      - hint: " + hint + "\n        pem: |\n"
	for _, line := range strings.Split(strings.TrimSpace(pubPEM), "\n") {
		home += "          " + line + "\n"
	}
	if err := os.MkdirAll(w.home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.home, "config.yaml"), []byte(home), 0o644); err != nil {
		t.Fatal(err)
	}
	w.stores("oci-layout:" + layout)
	manifest := func(version string) {
		w.write("murmur.yaml", "name: p\nartifacts:\n  - name: acme/grep\n    version: "+version+"\n")
	}
	manifest("1.0.0")
	w.ok("pull", "--no-precompile")
	if e := w.lock().Find("acme/grep"); e == nil || e.Provenance == nil {
		t.Fatalf("the signed pin recorded no provenance:\n%s", w.lockBytes())
	}

	// Unsigned 1.1.0: refused on every path, the lock unchanged byte for byte.
	before := w.lockBytes()
	manifest("1.1.0")
	r := w.fails("provenance-missing", "lock")
	if !strings.Contains(r.stderr, "acme/grep") {
		t.Errorf("the refusal does not name the pin:\n%s", r)
	}
	if got := w.lockBytes(); got != before {
		t.Fatalf("mur lock changed the lock:\n%s", got)
	}
	// The Renovate preset's post-upgrade task is this same command: its pull request fails
	// instead of moving the pin to unsigned bytes.
	task := renovateTask(t, "acme/grep")
	r = w.fails("provenance-missing", task...)
	if got := w.lockBytes(); got != before {
		t.Fatalf("the Renovate task (mur %s) changed the lock:\n%s", strings.Join(task, " "), got)
	}
	manifest("1.0.0")
	w.fails("provenance-missing", "pull", "--update", "acme/grep@1.1.0", "--no-precompile")
	if got := w.lockBytes(); got != before {
		t.Fatalf("mur pull --update changed the lock:\n%s", got)
	}
	// --bump NAME, with the unsigned 1.1.0 the newest: refused too.
	w.fails("provenance-missing", "lock", "--bump", "acme/grep")
	if got := w.lockBytes(); got != before {
		t.Fatalf("mur lock --bump changed the lock:\n%s", got)
	}
	publish(release{"1.2.0", true})
	// With the signed 1.2.0 the newest, --bump moves murmur.yaml and the lock and records it.
	w.ok("lock", "--bump", "acme/grep")
	if e := w.lock().Find("acme/grep"); e == nil || e.ResolvedVersion != "1.2.0" || e.Provenance == nil {
		t.Fatalf("mur lock --bump to a signed version: %+v", e)
	}
	if err := os.WriteFile(filepath.Join(w.project, "murmur.lock"), []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}

	// Signed 1.2.0: mur lock moves the pin and records the new version's provenance.
	manifest("1.2.0")
	w.ok("lock")
	e := w.lock().Find("acme/grep")
	if e == nil || e.ResolvedVersion != "1.2.0" || e.Provenance == nil || e.Provenance.Signer != hint {
		t.Fatalf("mur lock to a signed version: %+v\n%s", e, w.lockBytes())
	}
	// The next pull takes the recorded bundle as it is.
	w.ok("pull", "--no-precompile")
	if got := w.lock().Find("acme/grep"); got.Provenance == nil || got.Provenance.Bundle != e.Provenance.Bundle {
		t.Fatalf("the pull after mur lock changed the provenance record: %+v", got.Provenance)
	}
}

// The lock is a function of the artifacts, not of the cache: a pull of the same project from a
// home that already holds the blob and its verified bundle writes the same murmur.lock as a
// fresh home.
func TestWarmAndFreshHomesWriteOneLock(t *testing.T) {
	t.Parallel()
	layout := t.TempDir()
	w := newWorld(t)
	keyFile, pubPEM := teamKey(t, t.TempDir())
	f := artifacttest.File(t, t.TempDir(), "grep", "1.0.0", artifacttest.Tagged("grep"))
	out := w.ok("push", "--json", f, "--scope", "acme", "--store", "oci-layout:"+layout, "--sign-key", keyFile)
	var pushed struct {
		Results []struct {
			Hint string `json:"signed_with"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out.stdout), &pushed); err != nil || len(pushed.Results) != 1 {
		t.Fatalf("push --json: %v", err)
	}
	home := "scopes:\n  acme:\n    trusted_keys:\n      - hint: " + pushed.Results[0].Hint + "\n        pem: |\n"
	for _, line := range strings.Split(strings.TrimSpace(pubPEM), "\n") {
		home += "          " + line + "\n"
	}
	yaml := "name: p\nartifacts:\n  - name: acme/grep\n    version: 1.0.0\n"
	setup := func(x *world) {
		if err := os.MkdirAll(x.home, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(x.home, "config.yaml"), []byte(home), 0o644); err != nil {
			t.Fatal(err)
		}
		x.stores("oci-layout:" + layout)
		x.write("murmur.yaml", yaml)
	}
	setup(w)
	// The warm home pulls once with provenance off: its blob is cached and the lock records no
	// bundle; another project of the home's then verifies the bundle.
	w.ok("pull", "--no-precompile", "--provenance", "off")
	noBlock := w.lockBytes()
	other := &world{t: t, home: w.home, project: filepath.Join(t.TempDir(), "other"), env: w.env}
	if err := os.MkdirAll(filepath.Join(other.project, ".murmur"), 0o755); err != nil {
		t.Fatal(err)
	}
	other.stores("oci-layout:" + layout)
	other.write("murmur.yaml", yaml)
	other.ok("pull", "--no-precompile")

	fresh := newWorld(t)
	setup(fresh)
	for _, x := range []*world{w, fresh} {
		if err := os.WriteFile(filepath.Join(x.project, "murmur.lock"), []byte(noBlock), 0o644); err != nil {
			t.Fatal(err)
		}
		x.ok("pull", "--no-precompile")
	}
	if w.lockBytes() != fresh.lockBytes() {
		t.Fatalf("the warm home wrote\n%s\nthe fresh home wrote\n%s", w.lockBytes(), fresh.lockBytes())
	}
	if !strings.Contains(fresh.lockBytes(), "provenance") {
		t.Fatalf("the fresh home recorded no provenance:\n%s", fresh.lockBytes())
	}
}

// renovateTask is the preset's post-upgrade command for depName, as contrib/renovate/murmur.json
// gives it, without its leading "mur".
func renovateTask(t *testing.T, depName string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "contrib", "renovate", "murmur.json"))
	if err != nil {
		t.Fatal(err)
	}
	var preset struct {
		PackageRules []struct {
			PostUpgradeTasks struct {
				Commands []string `json:"commands"`
			} `json:"postUpgradeTasks"`
		} `json:"packageRules"`
	}
	if err := json.Unmarshal(data, &preset); err != nil || len(preset.PackageRules) == 0 || len(preset.PackageRules[0].PostUpgradeTasks.Commands) != 1 {
		t.Fatalf("the preset's post-upgrade task: %v", err)
	}
	cmd := strings.ReplaceAll(preset.PackageRules[0].PostUpgradeTasks.Commands[0], "{{{depName}}}", depName)
	fields := strings.Fields(cmd)
	if len(fields) < 2 || fields[0] != "mur" {
		t.Fatalf("the preset's post-upgrade task is not a mur command: %q", cmd)
	}
	return fields[1:]
}
