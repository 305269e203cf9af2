//go:build unix

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/state"
)

// smallestModule is the smallest valid wasm module.
const smallestModule = "\x00asm\x01\x00\x00\x00"

var (
	hexGrep = strings.Repeat("1a", 32)
	hexCat  = strings.Repeat("2b", 32)
)

const fullCaps = `  filesystem: { scope: ".", read_only: ["docs", "a/b"] }
  state: {}
  env: { allow: ["MUR_T_LANG", "MUR_T_UNSET", "MUR_T_EMPTY"] }
  limits: { memory_mib: 256, timeout_s: 60 }
`

func TestBuildIsPure(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	c := w.capsule(t, capsuleYAML(fullCaps))
	before := snapshot(t, w.root)
	p, err := BuildPlan(w.input(c, "grep"))
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	p.Explain(&sb)
	sameSnapshot(t, "BuildPlan", before, snapshot(t, w.root))
	for _, o := range p.Preopens {
		if _, err := os.Lstat(o.HostPath); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("preopen %s exists after Build: %v", o.HostPath, err)
		}
	}
}

func TestBuildDefaults(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	p, err := BuildPlan(w.input(w.capsule(t, capsuleYAML("")), "acme/grep"))
	if err != nil {
		t.Fatal(err)
	}
	wd := filepath.Join(w.project, "workdir")
	if p.Workdir != wd {
		t.Errorf("Workdir = %s, want %s", p.Workdir, wd)
	}
	want := []Mount{{GuestPath: "/", HostPath: wd}}
	if !equalPreopens(p.Preopens, want) {
		t.Errorf("Preopens = %+v, want %+v", p.Preopens, want)
	}
	if p.Artifact != "acme/grep" || p.Version != "1.0.0" || p.Platform != ref.PlatformAny || p.Digest != "sha256:"+hexGrep || p.Argv0 != "grep" {
		t.Errorf("plan names %s@%s (%s) %s argv0 %s", p.Artifact, p.Version, p.Platform, p.Digest, p.Argv0)
	}
	if len(p.States) != 0 || len(p.EnvNames) != 0 {
		t.Errorf("nothing granted, yet states %v env %v", p.States, p.EnvNames)
	}
	if p.MemoryMiB != DefaultMemoryMiB || p.Timeout() != 0 || p.TimeoutS != 0 {
		t.Errorf("limits: memory %d timeout %v (%v s), want %d and none", p.MemoryMiB, p.Timeout(), p.TimeoutS, DefaultMemoryMiB)
	}
	if env := p.Env(func(string) (string, bool) { return "x", true }); len(env) != 1 || env[0] != "PWD=/" {
		t.Errorf("Env = %q, want only PWD=/", env)
	}
}

func TestBuildWorkdirFlag(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	c := w.capsule(t, capsuleYAML(""))
	elsewhere := filepath.Join(t.TempDir(), "wd")
	in := w.input(c, "grep")
	in.Workdir = elsewhere
	p, err := BuildPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Workdir != elsewhere || p.Preopens[0].HostPath != elsewhere {
		t.Errorf("workdir %s root %s, want %s", p.Workdir, p.Preopens[0].HostPath, elsewhere)
	}
	// A sibling of murmur.yaml inside the project is fine: it holds none of mur's files.
	in.Workdir = filepath.Join(w.project, "src")
	if _, err := BuildPlan(in); err != nil {
		t.Errorf("workdir project/src: %v", err)
	}
}

func equalPreopens(got, want []Mount) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func TestBuildFilesystem(t *testing.T) {
	t.Parallel()
	const narrowed = "  - name: acme/grep\n    version: \"1.0.0\"\n    capabilities:\n      filesystem: { scope: sub }\n"
	tests := []struct {
		name      string
		caps      string
		artifacts []string
		want      []Mount // the root, then the read-only subtrees inside it; hosts relative to the workdir
	}{
		{"read-only subtrees", `  filesystem: { scope: ".", read_only: ["docs", "a/b"] }` + "\n", nil,
			[]Mount{{"/", ".", false}, {"/a/b", "a/b", true}, {"/docs", "docs", true}}},
		{"read-only equal to the scope", `  filesystem: { scope: ".", read_only: ["."] }` + "\n", nil,
			[]Mount{{"/", ".", true}}},
		{"sub scope", `  filesystem: { scope: data, read_only: ["data/in"] }` + "\n", nil,
			[]Mount{{"/", "data", false}, {"/in", "data/in", true}}},
		{"sub scope equal to read-only", `  filesystem: { scope: data, read_only: [data] }` + "\n", nil,
			[]Mount{{"/", "data", true}}},
		{"read-only outside the scope", `  filesystem: { scope: data, read_only: [other] }` + "\n", nil,
			[]Mount{{"/", "data", false}}},
		{"scope inside a read-only subtree", `  filesystem: { scope: data/out, read_only: [data] }` + "\n", nil,
			[]Mount{{"/", "data/out", true}}},
		// The artifact narrows the scope into a read-only workdir: narrowing must not make it writable.
		{"narrowed into a read-only workdir", `  filesystem: { scope: ".", read_only: ["."] }` + "\n", []string{narrowed},
			[]Mount{{"/", "sub", true}}},
	}
	for _, tt := range tests {
		for _, exists := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/exists=%v", tt.name, exists), func(t *testing.T) {
				w := newWorld(t)
				c := w.capsule(t, capsuleYAML(tt.caps, tt.artifacts...))
				if exists {
					// The same answer whether the folders are judged by name or as opened.
					for _, d := range []string{"docs", "a/b", "data/in", "data/out", "other", "sub"} {
						if err := os.MkdirAll(filepath.Join(w.project, "workdir", d), 0o755); err != nil {
							t.Fatal(err)
						}
					}
				}
				p, err := BuildPlan(w.input(c, "grep"))
				if err != nil {
					t.Fatal(err)
				}
				want := make([]Mount, len(tt.want))
				for i, o := range tt.want {
					want[i] = Mount{GuestPath: o.GuestPath, HostPath: filepath.Join(p.Workdir, filepath.FromSlash(o.HostPath)), ReadOnly: o.ReadOnly}
				}
				got := append(append([]Mount(nil), p.Preopens...), p.Subtrees...)
				if !equalPreopens(got, want) || len(p.Preopens) != 1 {
					t.Errorf("Preopens and Subtrees =\n%+v\nwant\n%+v", got, want)
				}
				if exists {
					// And RunPlan's root agrees about what is read-only.
					fsys, err := p.open()
					if err != nil {
						t.Fatal(err)
					}
					defer fsys.Close()
					if fsys.work.readOnly != want[0].ReadOnly || len(fsys.work.roRoots) != len(want)-1 {
						t.Errorf("the opened root: read-only %v with %d read-only subtrees, want %v and %d", fsys.work.readOnly, len(fsys.work.roRoots), want[0].ReadOnly, len(want)-1)
					}
				}
			})
		}
	}
}

func TestBuildState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		caps      string
		artifacts []string
		store     string // "" means no state preopen
	}{
		{"default store is the capsule name", "  state: {}\n", nil, "demo"},
		{"named store", "  state: { store: notes }\n", nil, "notes"},
		{"not granted", "  env: { allow: [LANG] }\n", nil, ""},
		{"dropped by the artifact", "  state: {}\n", []string{"  - name: acme/grep\n    version: \"1.0.0\"\n    capabilities:\n      state: null\n"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			p, err := BuildPlan(w.input(w.capsule(t, capsuleYAML(tt.caps, tt.artifacts...)), "grep"))
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Preopens) != 1 || p.Preopens[0].GuestPath != "/" {
				t.Fatalf("Preopens = %+v, want \"/\" alone", p.Preopens)
			}
			var statePreopens []Mount
			for _, o := range p.Subtrees {
				if o.GuestPath == "/"+state.GuestDir {
					statePreopens = append(statePreopens, o)
				}
			}
			if tt.store == "" {
				if len(statePreopens) != 0 || len(p.States) != 0 {
					t.Fatalf("no state granted, yet preopens %+v states %+v", statePreopens, p.States)
				}
				return
			}
			host := filepath.Join(w.home, "state", tt.store)
			if len(statePreopens) != 1 || statePreopens[0].HostPath != host || statePreopens[0].ReadOnly {
				t.Fatalf("state routes %+v, want one read-write /state at %s", statePreopens, host)
			}
			want := state.Report{Artifact: "acme/grep", Store: tt.store, HostPath: host}
			if len(p.States) != 1 || p.States[0] != want {
				t.Fatalf("States = %+v, want %+v", p.States, want)
			}
		})
	}
}

func TestBuildUndeclaredScopedNameGetsNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if err := w.lock.Upsert("other/tool", "2.0.0", ref.PlatformAny, strings.Repeat("3c", 32), "", false); err != nil {
		t.Fatal(err)
	}
	p, err := BuildPlan(w.input(w.capsule(t, capsuleYAML(fullCaps)), "other/tool"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Preopens) != 1 || p.Preopens[0].ReadOnly || len(p.States) != 0 || len(p.EnvNames) != 0 || p.MemoryMiB != DefaultMemoryMiB {
		t.Fatalf("an undeclared artifact got grants: %+v", p)
	}
	// Without murmur.yaml at all, the same holds.
	p, err = BuildPlan(w.input(nil, "acme/grep"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Preopens) != 1 || len(p.States) != 0 {
		t.Fatalf("no capsule, yet grants: %+v", p)
	}
}

func TestEnv(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	p, err := BuildPlan(w.input(w.capsule(t, capsuleYAML(fullCaps)), "grep"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"MUR_T_EMPTY", "MUR_T_LANG", "MUR_T_UNSET"}; strings.Join(p.EnvNames, ",") != strings.Join(want, ",") {
		t.Errorf("EnvNames = %v, want %v", p.EnvNames, want)
	}
	host := map[string]string{"MUR_T_LANG": "C.UTF-8", "MUR_T_EMPTY": "", "HOME": "/root", "PATH": "/bin"}
	got := p.Env(func(k string) (string, bool) { v, ok := host[k]; return v, ok })
	want := []string{"MUR_T_EMPTY=", "MUR_T_LANG=C.UTF-8", "PWD=/"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Env = %q, want %q", got, want)
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	narrow := func(lim string) string {
		return "  - name: acme/grep\n    version: \"1.0.0\"\n    capabilities:\n      limits: " + lim + "\n"
	}
	tests := []struct {
		name      string
		caps      string
		artifacts []string
		flag      time.Duration
		memory    int
		timeout   time.Duration
	}{
		{"defaults", "", nil, 0, DefaultMemoryMiB, 0},
		{"capsule", "  limits: { memory_mib: 256, timeout_s: 60 }\n", nil, 0, 256, 60 * time.Second},
		{"artifact narrows", "  limits: { memory_mib: 256, timeout_s: 60 }\n", []string{narrow("{ memory_mib: 64, timeout_s: 5 }")}, 0, 64, 5 * time.Second},
		{"artifact can't widen", "  limits: { memory_mib: 256, timeout_s: 60 }\n", []string{narrow("{ memory_mib: 1024, timeout_s: 600 }")}, 0, 256, 60 * time.Second},
		{"artifact sets what the capsule leaves unset", "", []string{narrow("{ memory_mib: 32 }")}, 0, 32, 0},
		{"--timeout overrides", "  limits: { timeout_s: 60 }\n", nil, 1500 * time.Millisecond, DefaultMemoryMiB, 1500 * time.Millisecond},
		{"--timeout without a capsule limit", "", nil, 2 * time.Minute, DefaultMemoryMiB, 2 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			in := w.input(w.capsule(t, capsuleYAML(tt.caps, tt.artifacts...)), "grep")
			in.Timeout = tt.flag
			p, err := BuildPlan(in)
			if err != nil {
				t.Fatal(err)
			}
			if p.MemoryMiB != tt.memory || p.Timeout() != tt.timeout || p.TimeoutS != tt.timeout.Seconds() {
				t.Errorf("memory %d timeout %v (%v s), want %d and %v", p.MemoryMiB, p.Timeout(), p.TimeoutS, tt.memory, tt.timeout)
			}
		})
	}
}

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

func TestOpenCreatesAndHolds(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	c := w.capsule(t, capsuleYAML(fullCaps))
	p, err := BuildPlan(w.input(c, "grep"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // again: open is idempotent
		fsys, err := p.open()
		if err != nil {
			t.Fatal(err)
		}
		fsys.Close()
	}
	for _, o := range append(append([]Mount(nil), p.Preopens...), p.Subtrees...) {
		fi, err := os.Stat(o.HostPath)
		if err != nil || !fi.IsDir() {
			t.Fatalf("%s: %v", o.HostPath, err)
		}
	}
	for _, dir := range []string{filepath.Join(w.home, "state"), filepath.Join(w.home, "state", "demo")} {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v, want a 0700 folder", dir, fi, err)
		}
	}
	// A store loosened by hand is tightened again.
	store := filepath.Join(w.home, "state", "demo")
	if err := os.Chmod(store, 0o755); err != nil {
		t.Fatal(err)
	}
	fsys, err := p.open()
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if fi, _ := os.Stat(store); fi.Mode().Perm() != 0o700 {
		t.Fatalf("state store is %v after open, want 0700", fi.Mode().Perm())
	}
	// What is held is what is written to, whatever happens to the paths afterwards.
	work := p.Preopens[0].HostPath
	outside := filepath.Join(w.root, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(work, work+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, work); err != nil {
		t.Fatal(err)
	}
	f, e := fsys.OpenFile("held.txt", experimentalsys.O_WRONLY|experimentalsys.O_CREAT, 0o644)
	if e != 0 {
		t.Fatal(e)
	}
	f.Close()
	if _, err := os.Stat(filepath.Join(work+".moved", "held.txt")); err != nil {
		t.Errorf("the write did not land in the folder that was opened: %v", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("the write followed the path to %v", ents)
	}
}

// packed builds a packed artifact holding wasm.
func packed(t *testing.T, name, version string, wasm []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte("name: "+name+"\nversion: \""+version+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "capsule.wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := artifact.Pack(dir, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestLoad(t *testing.T) {
	t.Parallel()
	store, err := cas.Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wasm := []byte(smallestModule + "\x00\x04\x03abc") // a custom section makes it our own
	blob := packed(t, "grep", "1.0.0", wasm)
	d, err := store.Ingest(ctx, bytes.NewReader(blob), int64(len(blob)), digest.FromBytes(blob))
	if err != nil {
		t.Fatal(err)
	}
	got, a, err := LoadPayload(ctx, store, d, "")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, wasm) || a.Manifest.Name != "grep" || a.Manifest.Version != "1.0.0" {
		t.Fatalf("Load = %q (%+v), want %q", got, a.Manifest, wasm)
	}

	_, _, err = LoadPayload(ctx, store, digest.FromString("never ingested"), "")
	errtest.WantToken(t, err, errs.NotFound)

	path := store.Path(d)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	tampered := append([]byte(nil), blob...)
	tampered[len(tampered)/2] ^= 0xff
	if err := os.WriteFile(path, tampered, 0o444); err != nil {
		t.Fatal(err)
	}
	got, a, err = LoadPayload(ctx, store, d, "")
	errtest.WantToken(t, err, errs.Integrity)
	if got != nil || a != nil {
		t.Errorf("Load of a tampered blob returned a payload")
	}
	if store.Has(d) {
		t.Errorf("the tampered blob is still in the CAS")
	}
	q, err := os.ReadDir(filepath.Join(store.Root(), "quarantine"))
	if err != nil || len(q) != 1 || !strings.HasPrefix(q[0].Name(), d.Encoded()) {
		t.Fatalf("quarantine holds %v (%v), want the tampered blob", q, err)
	}
}

// TestLoadKeepsPayloads: a kept payload spares the inflate on the next load, and a kept payload
// that no longer matches the verified zip's CRC-32 is inflated again and replaced.
func TestLoadKeepsPayloads(t *testing.T) {
	t.Parallel()
	store, err := cas.Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wasm := []byte(smallestModule + "\x00\x04\x03xyz")
	blob := packed(t, "grep", "1.0.0", wasm)
	d, err := store.Ingest(context.Background(), bytes.NewReader(blob), int64(len(blob)), digest.FromBytes(blob))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "compiled", "payloads")
	kept := filepath.Join(dir, d.Encoded()+".wasm")
	if got, _, err := LoadPayload(ctx, store, d, dir); err != nil || !bytes.Equal(got, wasm) {
		t.Fatalf("first Load = %q, %v", got, err)
	}
	if b, err := os.ReadFile(kept); err != nil || !bytes.Equal(b, wasm) {
		t.Fatalf("payload not kept: %q, %v", b, err)
	}
	if fi, _ := os.Stat(dir); fi == nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("payload folder mode: %v", fi)
	}
	// A second load uses the kept payload: it is not written again (a rewrite is a rename,
	// so it would be a new inode).
	before, _ := os.Stat(kept)
	if got, _, err := LoadPayload(ctx, store, d, dir); err != nil || !bytes.Equal(got, wasm) {
		t.Fatalf("second Load = %q, %v", got, err)
	}
	if after, _ := os.Stat(kept); !os.SameFile(before, after) {
		t.Fatal("the kept payload was inflated and written again")
	}
	damaged := append([]byte(nil), wasm...)
	damaged[len(damaged)-1] ^= 0xff
	if err := os.WriteFile(kept, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	got, _, err := LoadPayload(ctx, store, d, dir)
	if err != nil || !bytes.Equal(got, wasm) {
		t.Fatalf("Load with a damaged kept payload = %q, %v; want the zip's payload", got, err)
	}
	if b, _ := os.ReadFile(kept); !bytes.Equal(b, wasm) {
		t.Fatalf("the damaged kept payload was not replaced: %q", b)
	}
	// Truncated too.
	os.WriteFile(kept, wasm[:4], 0o600)
	if got, _, err := LoadPayload(ctx, store, d, dir); err != nil || !bytes.Equal(got, wasm) {
		t.Fatalf("Load with a truncated kept payload = %q, %v", got, err)
	}
	// The blob is still verified first: a tampered blob is refused even with a good payload kept.
	os.Chmod(store.Path(d), 0o644)
	tampered := append([]byte(nil), blob...)
	tampered[len(tampered)/2] ^= 0xff
	os.WriteFile(store.Path(d), tampered, 0o444)
	if _, _, err := LoadPayload(ctx, store, d, dir); !errors.Is(err, errs.Integrity) {
		t.Fatalf("Load of a tampered blob with a kept payload: %v", err)
	}
}

func TestExplain(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	p, err := BuildPlan(w.input(w.capsule(t, capsuleYAML(fullCaps)), "grep"))
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	p.Explain(&sb)
	text := sb.String()
	lines := strings.Split(text, "\n")
	for _, o := range append(append([]Mount(nil), p.Preopens...), p.Subtrees...) {
		mode := "(read-write)"
		switch {
		case o.GuestPath == "/state":
			mode = "(read-write, the state store)"
		case o.ReadOnly:
			mode = "(read-only)"
		}
		found := false
		for _, l := range lines {
			if strings.Contains(l, " "+o.GuestPath+" ") && strings.Contains(l, o.HostPath) && strings.HasSuffix(l, mode) {
				found = true
			}
		}
		if !found {
			t.Errorf("Explain has no line for %s -> %s %s:\n%s", o.GuestPath, o.HostPath, mode, text)
		}
	}
	if n := strings.Count(text, "-> "); n != 5 {
		t.Errorf("Explain shows %d folders, want 5 (/, /state, /a/b, /docs and the state store line):\n%s", n, text)
	}
	for _, want := range []string{
		"acme/grep@1.0.0", "sha256:" + hexGrep,
		"acme/grep: demo -> " + filepath.Join(w.home, "state", "demo"),
		"MUR_T_EMPTY, MUR_T_LANG, MUR_T_UNSET, PWD=/",
		"memory 256 MiB, timeout 1m0s",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("Explain does not mention %q:\n%s", want, text)
		}
	}

	p, err = BuildPlan(w.input(w.capsule(t, capsuleYAML("")), "grep"))
	if err != nil {
		t.Fatal(err)
	}
	sb.Reset()
	p.Explain(&sb)
	for _, want := range []string{"(none granted)", "PWD=/ only", "timeout none", "(read-write)"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("Explain without grants does not mention %q:\n%s", want, sb.String())
		}
	}
}

// TestPrunePayloads: a kept payload goes with its blob, whether the CAS lost it or gc removes it
// now; in a dry run the blobs gc would remove count as gone too.
func TestPrunePayloads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := cas.Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	cacheDir := filepath.Join(t.TempDir(), "compiled")
	dir := PayloadDir(cacheDir)
	if gone, err := PrunePayloads(cacheDir, store, cas.GCReport{}, false); err != nil || gone != nil {
		t.Fatalf("missing folder: %v, %v", gone, err)
	}
	keep, err := store.Ingest(ctx, strings.NewReader("keep"), -1, "")
	if err != nil {
		t.Fatal(err)
	}
	doomed, err := store.Ingest(ctx, strings.NewReader("doomed"), -1, "")
	if err != nil {
		t.Fatal(err)
	}
	drop := digest.FromString("never in the CAS")
	os.MkdirAll(dir, 0o700)
	for _, name := range []string{keep.Encoded() + ".wasm", doomed.Encoded() + ".wasm", drop.Encoded() + ".wasm", "junk.tmp"} {
		os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600)
	}
	gc := cas.GCReport{Blobs: []cas.RemovedBlob{{BlobInfo: cas.BlobInfo{Digest: doomed}}}}
	gone, err := PrunePayloads(cacheDir, store, gc, true)
	if err != nil || len(gone) != 3 {
		t.Fatalf("dry run: %v, %v", gone, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 4 {
		t.Fatalf("a dry run removed files: %v", ents)
	}
	if gone, err = PrunePayloads(cacheDir, store, gc, false); err != nil || len(gone) != 3 {
		t.Fatalf("prune: %v, %v", gone, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != keep.Encoded()+".wasm" {
		t.Fatalf("left %v, want only the kept blob's payload", ents)
	}
}
