//go:build unix

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
)

func TestBuildRefusesReach(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, w *world) (workdir, scope string)
	}{
		{"workdir is the project", func(t *testing.T, w *world) (string, string) { return w.project, "" }},
		{"workdir is the project's parent", func(t *testing.T, w *world) (string, string) { return w.root, "" }},
		{"workdir is the file system root", func(t *testing.T, w *world) (string, string) { return "/", "" }},
		{"scope reaches the project", func(t *testing.T, w *world) (string, string) { return w.root, "project" }},
		{"workdir inside tools", func(t *testing.T, w *world) (string, string) {
			return filepath.Join(w.project, "tools", "acme"), ""
		}},
		{"workdir is tools", func(t *testing.T, w *world) (string, string) { return filepath.Join(w.project, "tools"), "" }},
		{"workdir inside .murmur", func(t *testing.T, w *world) (string, string) { return filepath.Join(w.project, ".murmur", "x"), "" }},
		{"workdir is murmur.lock", func(t *testing.T, w *world) (string, string) { return filepath.Join(w.project, "murmur.lock"), "" }},
		{"workdir is a symlink to the project", func(t *testing.T, w *world) (string, string) {
			link := filepath.Join(t.TempDir(), "wd")
			if err := os.Symlink(w.project, link); err != nil {
				t.Fatal(err)
			}
			return link, ""
		}},
		{"workdir below a symlink into tools", func(t *testing.T, w *world) (string, string) {
			if err := os.MkdirAll(filepath.Join(w.project, "tools"), 0o755); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(t.TempDir(), "wd")
			if err := os.Symlink(filepath.Join(w.project, "tools"), link); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(link, "not-yet"), ""
		}},
		{"home inside the workdir", func(t *testing.T, w *world) (string, string) {
			wd := t.TempDir()
			w.home = filepath.Join(wd, ".murmur")
			return wd, ""
		}},
		{"workdir inside the home", func(t *testing.T, w *world) (string, string) {
			return filepath.Join(w.home, "state"), ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			if err := os.WriteFile(filepath.Join(w.project, "murmur.lock"), []byte("lock_version: 3\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			wd, scope := tt.setup(t, w)
			caps := ""
			if scope != "" {
				caps = "  filesystem: { scope: " + scope + " }\n"
			}
			in := w.input(w.capsule(t, capsuleYAML(caps)), "grep")
			in.Workdir = wd
			before := snapshot(t, w.root)
			p, err := BuildPlan(in)
			errtest.WantToken(t, err, errs.Denied)
			if p != nil {
				t.Errorf("a refused Build returned a plan: %+v", p)
			}
			if !strings.Contains(errs.Message(err), "workdir") {
				t.Errorf("the refusal does not say what to do: %v", err)
			}
			sameSnapshot(t, "a refused BuildPlan", before, snapshot(t, w.root))
		})
	}
}

func TestBuildRelativeProjectDir(t *testing.T) {
	w := newWorld(t)
	w.home = filepath.Join(t.TempDir(), "home") // out of the way of the check below
	c := w.capsule(t, capsuleYAML(""))
	t.Chdir(w.root)
	in := w.input(c, "grep")
	in.ProjectDir = "project"
	p, err := BuildPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(w.project, "workdir"); p.Workdir != want {
		t.Errorf("Workdir = %s, want %s", p.Workdir, want)
	}
	// The project's parent, named relatively, is still refused.
	in.Workdir = "."
	_, err = BuildPlan(in)
	errtest.WantToken(t, err, errs.Denied)
}

func TestBuildNotPulled(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	c := w.capsule(t, capsuleYAML("", "  - name: acme/fresh\n    version: \"1.0.0\"\n"))
	_, err := BuildPlan(w.input(c, "fresh"))
	errtest.WantToken(t, err, errs.NotFound)
	if !strings.Contains(err.Error(), "mur pull acme/fresh") {
		t.Errorf("the error does not give the pull command: %v", err)
	}
}

func TestBuildPlatforms(t *testing.T) {
	t.Parallel()
	host := ref.HostPlatform()
	other := "darwin-aarch64"
	if host == other {
		other = "linux-x86_64"
	}
	w := newWorld(t)
	otherHex, hostHex := strings.Repeat("4d", 32), strings.Repeat("5e", 32)
	if err := w.lock.Upsert("acme/multi", "3.0.0", other, otherHex, "", false); err != nil {
		t.Fatal(err)
	}
	c := w.capsule(t, capsuleYAML("", "  - name: acme/multi\n    version: \"3.0.0\"\n"))
	if host != ref.PlatformAny {
		_, err := BuildPlan(w.input(c, "multi"))
		errtest.WantToken(t, err, errs.NotFound)
		for _, want := range []string{"acme/multi@3.0.0", host, "mur pull acme/multi@3.0.0"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error does not mention %q: %v", want, err)
			}
		}
	}
	in := w.input(c, "multi")
	in.Platform = other
	p, err := BuildPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Platform != other || p.Digest != "sha256:"+otherHex {
		t.Errorf("platform %s digest %s, want %s %s", p.Platform, p.Digest, other, otherHex)
	}
	if host == ref.PlatformAny {
		return
	}
	if err := w.lock.Upsert("acme/multi", "3.0.0", host, hostHex, "", false); err != nil {
		t.Fatal(err)
	}
	p, err = BuildPlan(w.input(c, "multi"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Platform != host || p.Digest != "sha256:"+hostHex {
		t.Errorf("platform %s digest %s, want %s %s", p.Platform, p.Digest, host, hostHex)
	}
}

func TestBuildNames(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if err := w.lock.Upsert("other/grep", "1.0.0", ref.PlatformAny, strings.Repeat("6f", 32), "", false); err != nil {
		t.Fatal(err)
	}
	c := w.capsule(t, capsuleYAML("  limits: { memory_mib: 100 }\n"))
	p, err := BuildPlan(w.input(c, "cat"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Artifact != "acme/cat" || p.Digest != "sha256:"+hexCat || p.MemoryMiB != 100 {
		t.Errorf("bare cat resolved to %s %s memory %d", p.Artifact, p.Digest, p.MemoryMiB)
	}
	_, err = BuildPlan(w.input(c, "nosuch"))
	errtest.WantToken(t, err, errs.NotFound)

	amb := w.capsule(t, capsuleYAML("", "  - name: acme/grep\n    version: \"1.0.0\"\n", "  - name: other/grep\n    version: \"1.0.0\"\n"))
	_, err = BuildPlan(w.input(amb, "grep"))
	if err == nil || !strings.Contains(err.Error(), "acme/grep") || !strings.Contains(err.Error(), "other/grep") {
		t.Fatalf("an ambiguous bare name: %v", err)
	}
	errtest.WantToken(t, err, errs.Usage)
	if p, err := BuildPlan(w.input(amb, "other/grep")); err != nil || p.Artifact != "other/grep" {
		t.Fatalf("the scoped name of an ambiguous one: %v %+v", err, p)
	}
	_, err = BuildPlan(w.input(nil, "grep"))
	if err == nil {
		t.Fatal("a bare name without murmur.yaml was accepted")
	}
}
