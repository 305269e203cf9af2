//go:build unix

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
