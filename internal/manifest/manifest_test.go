package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

const full = `name: my-capsule
version: "1.0.0"
artifacts:
  - name: acme/grep
    version: "1.2.0"
    capabilities:
      filesystem: { scope: "data/in", read_only: ["docs/api", "data/in/ro"] }
      state: null
      env: { allow: ["LANG", "NOPE"] }
      limits: { memory_mib: 512, timeout_s: 10 }
      install: { from: [sources] }
  - name: acme/sed
  - name: other/grep
    version: LATEST
    capabilities: { state: {}, env: { allow: [] } }
capabilities:
  filesystem: { scope: ".", read_only: ["docs"] }
  state: { store: shared }
  env: { allow: ["LANG", "TZ"] }
  limits: { memory_mib: 256, timeout_s: 60 }
  install: { from: [stores, sources] }
`

func mustParse(t *testing.T, y string) *Capsule {
	t.Helper()
	c, err := Parse([]byte(y), "murmur.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func TestParseFull(t *testing.T) {
	t.Parallel()
	c := mustParse(t, full)
	if c.Name != "my-capsule" || c.Version != "1.0.0" || c.Path != "murmur.yaml" || len(c.Warnings) != 0 {
		t.Fatalf("capsule = %+v", c)
	}
	if len(c.Artifacts) != 3 {
		t.Fatalf("artifacts = %+v", c.Artifacts)
	}
	a0, a1, a2 := c.Artifacts[0], c.Artifacts[1], c.Artifacts[2]
	if a0.Name != (ref.Name{Scope: "acme", Name: "grep"}) || a0.Version != "1.2.0" || a0.Line != 4 {
		t.Errorf("artifact 0 = %+v", a0)
	}
	if a1.Version != ref.Latest || a1.Capabilities != nil || a1.Line != 12 {
		t.Errorf("artifact 1 = %+v", a1)
	}
	if a2.Version != ref.Latest {
		t.Errorf("artifact 2 version = %q", a2.Version)
	}
	want := Capabilities{
		Filesystem: Filesystem{Scope: ".", ReadOnly: []string{"docs"}},
		State:      &State{Store: "shared"},
		Env:        Env{Allow: []string{"LANG", "TZ"}},
		Limits:     Limits{MemoryMiB: 256, TimeoutS: 60},
		Install:    Install{From: []string{"stores", "sources"}},
	}
	if !reflect.DeepEqual(c.Capabilities, want) {
		t.Errorf("capabilities = %+v", c.Capabilities)
	}
	if c.StoreName() != "shared" {
		t.Errorf("StoreName = %q", c.StoreName())
	}

	e0 := c.Effective(&c.Artifacts[0])
	want0 := Capabilities{
		Filesystem: Filesystem{Scope: "data/in", ReadOnly: []string{"docs", "docs/api", "data/in/ro"}},
		State:      nil,
		Env:        Env{Allow: []string{"LANG"}},
		Limits:     Limits{MemoryMiB: 256, TimeoutS: 10},
		Install:    Install{From: []string{"sources"}},
	}
	if !reflect.DeepEqual(e0, want0) {
		t.Errorf("Effective(acme/grep) = %+v\nwant %+v", e0, want0)
	}
	e1 := c.Effective(&c.Artifacts[1])
	if !reflect.DeepEqual(e1, want) {
		t.Errorf("Effective(acme/sed) = %+v; want the capsule's", e1)
	}
	e2 := c.Effective(&c.Artifacts[2])
	if e2.State == nil || e2.State.Store != "shared" || e2.Env.Allow == nil || len(e2.Env.Allow) != 0 {
		t.Errorf("Effective(other/grep) = %+v", e2)
	}
	// Effective hands out copies: changing one does not change the capsule.
	e1.Env.Allow[0] = "CHANGED"
	if c.Capabilities.Env.Allow[0] != "LANG" {
		t.Error("Effective shares slices with the capsule")
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c := mustParse(t, "name: cap\nartifacts:\n  - name: acme/grep\n    version: 1.0.0\n")
	want := Capabilities{Filesystem: Filesystem{Scope: "."}, Install: Install{From: []string{"stores", "sources"}}}
	if !reflect.DeepEqual(c.Capabilities, want) {
		t.Errorf("defaults = %+v", c.Capabilities)
	}
	if got := c.Effective(&c.Artifacts[0]); !reflect.DeepEqual(got, want) {
		t.Errorf("Effective = %+v", got)
	}
	if c.StoreName() != "cap" {
		t.Errorf("StoreName = %q", c.StoreName())
	}
	c = mustParse(t, "name: cap\ncapabilities:\n  state: {}\n")
	if e := c.Effective(nil); e.State == nil || e.State.Store != "cap" || c.StoreName() != "cap" {
		t.Errorf("state {} = %+v", e.State)
	}
	c = mustParse(t, "name: cap\ncapabilities:\n  state:\n  install: { from: [] }\n")
	if c.Capabilities.State != nil || c.Capabilities.Install.From == nil || len(c.Capabilities.Install.From) != 0 {
		t.Errorf("state null / from [] = %+v", c.Capabilities)
	}
	c = mustParse(t, "name: cap\ncapabilities:\n  install: { from: [sources, stores, sources] }\n  filesystem: { scope: ./data/ }\n")
	if !reflect.DeepEqual(c.Capabilities.Install.From, []string{"sources", "stores"}) || c.Capabilities.Filesystem.Scope != "data" {
		t.Errorf("from/scope = %+v", c.Capabilities)
	}
}

func TestLimitsNarrowing(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `name: cap
capabilities: { limits: { timeout_s: 30 } }
artifacts:
  - name: a/a
    capabilities: { limits: { memory_mib: 64, timeout_s: 90 } }
  - name: a/b
    capabilities: { install: { from: [stores] }, filesystem: { read_only: [docs] } }
`)
	if got := c.Effective(&c.Artifacts[0]).Limits; got != (Limits{MemoryMiB: 64, TimeoutS: 30}) {
		t.Errorf("limits = %+v", got)
	}
	e := c.Effective(&c.Artifacts[1])
	if !reflect.DeepEqual(e.Install.From, []string{"stores"}) || !reflect.DeepEqual(e.Filesystem.ReadOnly, []string{"docs"}) {
		t.Errorf("a/b = %+v", e)
	}
}

func TestWarnings(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `name: cap
description: other tools read this
capabilities:
  filesystem: { scope: "." }
artifacts:
  - name: acme/grep
    pinned: yes
  - name: acme/sed
    capabilites: { filesystem: { scope: "." } }
capabilites: { state: {} }
`)
	want := []string{
		`murmur.yaml:2: unknown key "description" ignored`,
		`murmur.yaml:7: unknown key "artifacts[0].pinned" ignored`,
	}
	if !reflect.DeepEqual(c.Warnings, want) {
		t.Errorf("warnings = %q\nwant %q", c.Warnings, want)
	}
	// A mistyped capabilities key is not an error (it is not under capabilities), but it
	// concerns the sandbox: it goes where -q can't hide it.
	grant := []string{
		`murmur.yaml:10: unknown key "capabilites" ignored; did you mean capabilities? Without it the guest gets the default grants (the workdir, no state store, default limits)`,
		`murmur.yaml:9: unknown key "artifacts[1].capabilites" ignored; did you mean capabilities? Without it the guest gets the capsule's grants, not narrowed`,
	}
	if !reflect.DeepEqual(c.GrantWarnings, grant) {
		t.Errorf("grant warnings = %q\nwant %q", c.GrantWarnings, grant)
	}
}

// A mistyped grant would widen what the guest may do (readonly for read_only mounts docs/
// read-write; limit for limits keeps the default memory cap), so under capabilities, the
// capsule's or an artifact's, every unknown key is an error that names its line and the key
// meant.
func TestUnknownGrantsAreErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ yaml, want string }{
		{"name: c\ncapabilities:\n  filesystem: { scope: \".\", readonly: [docs] }\n",
			`murmur.yaml:3: capabilities.filesystem has no key "readonly"; did you mean read_only?`},
		{"name: c\ncapabilities:\n  limit: { memory_mib: 64 }\n",
			`murmur.yaml:3: capabilities has no key "limit"; did you mean limits?`},
		{"name: c\ncapabilities:\n  network: true\n",
			`murmur.yaml:3: capabilities has no key "network"; its keys are filesystem, state, env, limits, install.`},
		{"name: c\ncapabilities:\n  limits: { memory: 64 }\n",
			`capabilities.limits has no key "memory"; its keys are memory_mib, timeout_s, state_mib.`},
		{"name: c\ncapabilities:\n  state: { stor: x }\n", `did you mean store?`},
		{"name: c\ncapabilities:\n  env: { allows: [A] }\n", `did you mean allow?`},
		{"name: c\ncapabilities:\n  install: { form: [stores] }\n", `did you mean from?`},
		{"name: c\ncapabilities: { state: {} }\nartifacts:\n  - name: acme/grep\n    capabilities:\n      filesystem: { scpoe: data }\n",
			`murmur.yaml:6: artifacts[0].capabilities.filesystem has no key "scpoe"; did you mean scope?`},
		{"name: c\nartifacts:\n  - name: acme/grep\n    capabilities: { limts: { memory_mib: 1 } }\n",
			`murmur.yaml:4: artifacts[0].capabilities has no key "limts"; did you mean limits?`},
	} {
		_, err := Parse([]byte(c.yaml), "murmur.yaml")
		if errs.TokenOf(err) != errs.InvalidManifest || err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "refused") {
			t.Errorf("%s: err = %v, want invalid-manifest with %q", c.yaml, err, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml, want string
	}{
		{"not utf-8", "name: caps\xff\n", "not UTF-8"},
		{"two documents", "name: c\n---\nname: d\n", "murmur.yaml:2: a second YAML document"},
		{"not yaml", "name: [x\n", "not valid YAML"},
		{"empty", "", "is empty"},
		{"a list", "- a\n", "the document must be a mapping"},
		{"no name", "version: 1\n", "no name"},
		{"empty name", "name: \"\"\n", "murmur.yaml:1: name is empty"},
		{"list name", "name: [a]\n", "murmur.yaml:1: name must be a string"},
		{"duplicate key", "name: a\nname: b\n", "murmur.yaml:2: name appears twice (first on line 1)"},
		{"absolute scope", "name: c\ncapabilities:\n  filesystem: { scope: /etc }\n", `murmur.yaml:3: capabilities.filesystem.scope "/etc" is absolute`},
		{"dotdot scope", "name: c\ncapabilities:\n  filesystem: { scope: a/../.. }\n", `murmur.yaml:3: capabilities.filesystem.scope "a/../.." climbs out`},
		{"empty scope", "name: c\ncapabilities:\n  filesystem: { scope: '' }\n", "scope is empty"},
		{"backslash scope", "name: c\ncapabilities:\n  filesystem: { scope: 'a\\b' }\n", "backslash"},
		{"drive scope", "name: c\ncapabilities:\n  filesystem: { scope: 'C:/x' }\n", "is absolute"},
		{"dotdot read_only", "name: c\ncapabilities:\n  filesystem:\n    read_only:\n      - docs\n      - ../secret\n", `murmur.yaml:6: capabilities.filesystem.read_only "../secret" climbs out`},
		{"absolute read_only", "name: c\ncapabilities:\n  filesystem: { read_only: [/home] }\n", "is absolute"},
		{"read_only not list", "name: c\ncapabilities:\n  filesystem: { read_only: docs }\n", "must be a list"},
		{"bad from", "name: c\ncapabilities:\n  install: { from: [stores, registry] }\n", `murmur.yaml:3: capabilities.install.from entry "registry" is not one of stores, sources`},
		{"state scalar", "name: c\ncapabilities:\n  state: yes\n", "capabilities.state must be a mapping"},
		{"env name", "name: c\ncapabilities:\n  env: { allow: [\"A=B\"] }\n", `"A=B" is not an environment variable name`},
		{"memory words", "name: c\ncapabilities:\n  limits: { memory_mib: 256Mi }\n", "memory_mib must be a whole number of MiB"},
		{"memory negative", "name: c\ncapabilities:\n  limits: { memory_mib: -1 }\n", "whole number"},
		{"memory huge", "name: c\ncapabilities:\n  limits: { memory_mib: 5000 }\n", "at most 4096"},
		{"timeout float", "name: c\ncapabilities:\n  limits: { timeout_s: 1.5 }\n", "timeout_s must be a whole number of seconds"},
		{"artifacts map", "name: c\nartifacts: { a: b }\n", "artifacts must be a list"},
		{"artifact no name", "name: c\nartifacts:\n  - version: 1.0.0\n", "murmur.yaml:3: artifacts[0] has no name"},
		{"artifact bare name", "name: c\nartifacts:\n  - name: grep\n", "murmur.yaml:3: artifacts[0].name artifact name \"grep\" has no scope; write it as <scope>/grep"},
		{"artifact bad name", "name: c\nartifacts:\n  - name: Acme/grep\n", "names are lowercase"},
		{"artifact duplicate", "name: c\nartifacts:\n  - name: a/b\n  - name: a/b\n", "murmur.yaml:4: artifacts[1].name declares a/b again (first on line 3)"},
		{"artifact version reserved", "name: c\nartifacts:\n  - name: a/b\n    version: stable\n", "murmur.yaml:4: artifacts[0].version version \"stable\" is reserved"},
		{"artifact version chars", "name: c\nartifacts:\n  - name: a/b\n    version: 1/2\n", "may hold only"},
		{"artifact scope outside", "name: c\ncapabilities: { filesystem: { scope: data } }\nartifacts:\n  - name: a/b\n    capabilities: { filesystem: { scope: other } }\n", `murmur.yaml:5: artifacts[0].capabilities.filesystem.scope "other" lies outside the capsule's scope "data"`},
		{"artifact scope prefix trick", "name: c\ncapabilities: { filesystem: { scope: data } }\nartifacts:\n  - name: a/b\n    capabilities: { filesystem: { scope: data2 } }\n", "lies outside"},
		{"artifact scope dotdot", "name: c\nartifacts:\n  - name: a/b\n    capabilities: { filesystem: { scope: ../x } }\n", "climbs out"},
		{"artifact read_only outside", "name: c\ncapabilities: { filesystem: { scope: data, read_only: [docs] } }\nartifacts:\n  - name: a/b\n    capabilities: { filesystem: { read_only: [secrets] } }\n", `"secrets" lies outside everything the capsule grants`},
		{"artifact state not granted", "name: c\nartifacts:\n  - name: a/b\n    capabilities: { state: {} }\n", "the capsule's capabilities grant none"},
		{"artifact other store", "name: c\ncapabilities: { state: {} }\nartifacts:\n  - name: a/b\n    capabilities: { state: { store: other } }\n", `names store "other", but the capsule grants "c"`},
		{"artifact bad from", "name: c\nartifacts:\n  - name: a/b\n    capabilities: { install: { from: [cdn] } }\n", `entry "cdn" is not one of stores, sources`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), "murmur.yaml")
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", c)
			}
			if !errors.Is(err, errs.InvalidManifest) {
				t.Fatalf("token %s: %v", errs.TokenOf(err), err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestArtifactNarrowingAccepted(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `name: c
capabilities: { filesystem: { scope: data, read_only: [docs] }, state: { store: s } }
artifacts:
  - name: a/b
    capabilities: { filesystem: { scope: data/x, read_only: [docs/api, data/y] }, state: { store: s } }
  - name: a/c
    capabilities: { filesystem: { scope: data } }
`)
	e := c.Effective(&c.Artifacts[0])
	if e.Filesystem.Scope != "data/x" || e.State == nil || e.State.Store != "s" {
		t.Errorf("Effective = %+v", e)
	}
}

func TestFind(t *testing.T) {
	t.Parallel()
	c := mustParse(t, full)
	for _, tt := range []struct {
		in   string
		want string
		tok  errs.Token
	}{
		{"acme/grep", "acme/grep", ""},
		{"other/grep", "other/grep", ""},
		{"sed", "acme/sed", ""},
		{"acme/sed", "acme/sed", ""},
		{"grep", "", errs.Usage},
		{"awk", "", errs.NotFound},
		{"acme/awk", "", errs.NotFound},
		{"Acme/grep", "", errs.Usage},
		{"", "", errs.Usage},
	} {
		a, err := c.Find(tt.in)
		if tt.tok == "" {
			if err != nil || a.Name.String() != tt.want {
				t.Errorf("Find(%q) = %v, %v", tt.in, a, err)
			}
			continue
		}
		if !errors.Is(err, tt.tok) {
			t.Errorf("Find(%q) = %v, %v; want %s", tt.in, a, err, tt.tok)
		}
	}
	_, err := c.Find("grep")
	if !strings.Contains(err.Error(), "acme/grep or other/grep") {
		t.Errorf("ambiguous error %q does not list the candidates", err)
	}
	_, err = c.Find("awk")
	if !strings.Contains(err.Error(), "declared: acme/grep, acme/sed, other/grep") {
		t.Errorf("not-found error %q does not list what is declared", err)
	}
}

func TestNarrowFrom(t *testing.T) {
	t.Parallel()
	both := []string{"stores", "sources"}
	for _, tt := range []struct {
		from, flag, want []string
		tok              errs.Token
	}{
		{both, nil, both, ""},
		{both, []string{"sources"}, []string{"sources"}, ""},
		{both, []string{"sources", "stores", "sources"}, []string{"sources", "stores"}, ""},
		{[]string{"stores"}, []string{"sources"}, nil, errs.NotGranted},
		{both, []string{"cdn"}, nil, errs.Usage},
		{[]string{}, nil, []string{}, ""},
	} {
		got, err := NarrowFrom(tt.from, tt.flag)
		if tt.tok != "" {
			if !errors.Is(err, tt.tok) {
				t.Errorf("NarrowFrom(%q, %q) = %q, %v; want %s", tt.from, tt.flag, got, err, tt.tok)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("NarrowFrom(%q, %q) = %q, %v; want %q", tt.from, tt.flag, got, err, tt.want)
		}
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "murmur.yaml")
	if err := os.WriteFile(p, []byte(full), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil || c.Path != p || c.Name != "my-capsule" {
		t.Fatalf("Load = %+v, %v", c, err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, errs.NotFound) {
		t.Errorf("Load(missing) = %v", err)
	}
	os.WriteFile(p, []byte("name: c\ncapabilities:\n  filesystem: { scope: /x }\n"), 0o644)
	if _, err := Load(p); !errors.Is(err, errs.InvalidManifest) || !strings.Contains(err.Error(), p+":3:") {
		t.Errorf("Load(bad) = %v; want the file and line", err)
	}
}

// TestStoreNamesRecorded: the parser leaves store names to state.ValidateStoreName, and records
// each one with the key and line it stands on.
func TestStoreNamesRecorded(t *testing.T) {
	t.Parallel()
	c := mustParse(t, "name: .cap\ncapabilities:\n  state: {}\nartifacts:\n  - name: a/b\n    capabilities: { state: { store: .cap } }\n")
	want := []StoreName{
		{Store: ".cap", Key: "name", Line: 1},
		{Store: ".cap", Key: "artifacts[0].capabilities.state.store", Line: 6},
	}
	if !reflect.DeepEqual(c.StoreNames, want) {
		t.Fatalf("StoreNames = %+v, want %+v", c.StoreNames, want)
	}
	c = mustParse(t, "name: c\ncapabilities:\n  state: { store: a/b }\n")
	if want := []StoreName{{Store: "a/b", Key: "capabilities.state.store", Line: 3}}; !reflect.DeepEqual(c.StoreNames, want) {
		t.Fatalf("StoreNames = %+v, want %+v", c.StoreNames, want)
	}
}
