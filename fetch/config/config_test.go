package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/lock"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadMergesProjectFirst(t *testing.T) {
	dir := t.TempDir()
	homeCfg := filepath.Join(dir, "home", "config.yaml")
	proj := filepath.Join(dir, "proj")
	write(t, homeCfg, `
stores: [ "oci://registry.internal:5000/murmur", "oci-layout:/srv/murmur-store", "oci-layout:rel-home" ]
sources: { acme: "github:acme/murmur-tools", beta: "github:beta/things" }
`)
	write(t, filepath.Join(proj, ".murmur", "config.yaml"), `
stores:
  - oci-layout:vendor/store
  - oci://registry.internal:5000/murmur
sources:
  acme: github:acme-fork/tools
`)
	c, err := Load(homeCfg, proj)
	if err != nil {
		t.Fatal(err)
	}
	wantStores := []string{
		"oci-layout:" + filepath.Join(proj, "vendor/store"),
		"oci://registry.internal:5000/murmur",
		"oci-layout:/srv/murmur-store",
		"oci-layout:" + filepath.Join(dir, "home", "rel-home"),
	}
	if !reflect.DeepEqual(c.Stores, wantStores) {
		t.Fatalf("stores = %q, want %q", c.Stores, wantStores)
	}
	wantSources := map[string]string{"acme": "github:acme-fork/tools", "beta": "github:beta/things"}
	if !reflect.DeepEqual(c.Sources, wantSources) {
		t.Fatalf("sources = %v, want %v", c.Sources, wantSources)
	}
	if len(c.Warnings) != 0 {
		t.Fatalf("warnings = %q", c.Warnings)
	}
}

func TestLoadMissingFilesAreEmpty(t *testing.T) {
	dir := t.TempDir()
	c, err := Load(filepath.Join(dir, "nope", "config.yaml"), filepath.Join(dir, "proj"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Stores) != 0 || len(c.Sources) != 0 {
		t.Fatalf("got %+v", c)
	}
	c, err = Load("", "")
	if err != nil || c == nil || c.Sources == nil {
		t.Fatalf("Load(\"\", \"\") = %+v, %v", c, err)
	}
	// Empty and null documents are empty configs too.
	write(t, filepath.Join(dir, "empty.yaml"), "")
	write(t, filepath.Join(dir, "null.yaml"), "# nothing yet\n~\n")
	for _, f := range []string{"empty.yaml", "null.yaml"} {
		if c, err := Load(filepath.Join(dir, f), ""); err != nil || len(c.Stores) != 0 {
			t.Fatalf("%s: %+v, %v", f, c, err)
		}
	}
}

func TestUnknownKeysWarn(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.yaml")
	write(t, p, "stores: []\ndefaults: { jobs: 8 }\n")
	c, err := Load(p, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], `"defaults"`) || !strings.Contains(c.Warnings[0], p) {
		t.Fatalf("warnings = %q", c.Warnings)
	}
}

func TestSourceFor(t *testing.T) {
	c := &Config{Sources: map[string]string{"acme": "github:acme/murmur-tools"}}
	cases := map[string]string{
		"acme":   "github:acme/murmur-tools",
		"beta":   "github:beta/murmur-artifacts",
		"murmur": lock.MurmurSource,
		"local":  "",
	}
	for scope, want := range cases {
		if got := c.SourceFor(scope); got != want {
			t.Errorf("SourceFor(%q) = %q, want %q", scope, got, want)
		}
	}
	// A hand-built config can't redirect the reserved scopes either.
	evil := &Config{Sources: map[string]string{"murmur": "github:evil/x", "local": "github:evil/y"}}
	if evil.SourceFor("murmur") != lock.MurmurSource || evil.SourceFor("local") != "" {
		t.Fatal("reserved scope redirected")
	}
	var nilCfg *Config
	if nilCfg.SourceFor("acme") != "github:acme/murmur-artifacts" {
		t.Fatal("nil config")
	}
}

func TestValidateStoreAddress(t *testing.T) {
	good := []string{
		"oci://registry.internal:5000/murmur",
		"oci://localhost/murmur",
		"oci://127.0.0.1:5000/a/b-c/d.e",
		"oci://[::1]:5000/murmur",
		"oci://[::1]/murmur",
		"oci://ghcr.io/acme/murmur__x",
		"oci-layout:/srv/murmur-store",
		"oci-layout:relative/store",
	}
	for _, s := range good {
		if err := store.ValidateStoreAddress(s); err != nil {
			t.Errorf("ValidateStoreAddress(%q) = %v", s, err)
		}
	}
	bad := []string{
		"", "registry:5000/murmur", "https://registry/murmur", "oci://registry:5000", "oci://registry:5000/",
		"oci://:5000/x", "oci://host:/x", "oci://host:0/x", "oci://host:65536/x", "oci://host:05000/x",
		"oci://host:abc/x", "oci://ho_st/x", "oci://-host/x", "oci://host/UPPER", "oci://host/a//b",
		"oci://host/a/", "oci://host/-a", "oci://user@host/x", "oci://host/x?y", "oci://[::1/x",
		"oci://[1.2.3.4]/x", "oci://[::1]x/y", "oci-layout:", "oci-layout:a\x00b",
	}
	for _, s := range bad {
		err := store.ValidateStoreAddress(s)
		if err == nil {
			t.Errorf("ValidateStoreAddress(%q) accepted", s)
			continue
		}
		if !errors.Is(err, errs.Usage) || !strings.Contains(err.Error(), "store") {
			t.Errorf("ValidateStoreAddress(%q) = %v", s, err)
		}
	}
}

func TestRefusals(t *testing.T) {
	cases := []struct{ content, want string }{
		{"stores: [", "not valid YAML"},
		{"- a\n- b\n", "expected a mapping"},
		{"stores: 5000\n", "stores[0]"},
		{"stores: oci://x/\n", "stores[0]: store \"oci://x\" is not a valid"},
		{"stores: [ {a: b} ]\n", "stores[0] has no url"},
		{"stores: [ [x] ]\n", "stores[0] must be an address or {url: ADDRESS, plain_http: true, fallback: any-error}"},
		{"stores:\n  - url: oci://r:5000/m\n    plain_http: maybe\n", "line 3: stores[0].plain_http must be true or false"},
		{"stores:\n  - {url: oci-layout:/x, plain_http: true}\n", "plain_http applies to oci:// registries"},
		{"stores:\n  - {url: \"https://x/y\"}\n", "line 2: stores[0].url"},
		{"stores: [ \"https://x/y\" ]\n", "stores[0]"},
		{"sources: [ a ]\n", "sources must map"},
		{"sources: { Acme: github:acme/x }\n", `sources key "Acme"`},
		{"sources: { acme: gitlab:acme/x }\n", "sources.acme"},
		{"sources: { acme: [x] }\n", "sources.acme must be a string"},
		{"sources: { local: github:acme/x }\n", "sources.local"},
		{"sources: { murmur: github:evil/default-artifacts }\n", "sources.murmur"},
		{"sources: { acme: github:a/b, acme: github:a/c }\n", "appears twice"},
		{"stores: []\nstores: []\n", `key "stores" appears twice`},
		{"stores: []\n---\nstores: []\n", "line 2: a second YAML document starts here"},
		{"stores: []\n# \xff\n", "line 2: the file is not UTF-8"},
		{"stores:\n  - {url: oci://r:5000/m, fallback: sometimes}\n", "line 2: stores[0].fallback \"sometimes\" is not one of not-found"},
		{"stores:\n  - {url: oci://r:5000/m, fallback: [x]}\n", "stores[0].fallback must be not-found or any-error"},
		{"mirror: oci-layout:/x\n", "line 1: mirror must be a registry"},
		{"mirror: {url: oci://r:5000/m, fallback: any-error}\n", "mirror takes no fallback"},
		{"mirror: [x]\n", "mirror must be an address"},
		{"mirror_required: yes please\n", "line 1: mirror_required must be true or false"},
	}
	for _, tc := range cases {
		dir := t.TempDir()
		write(t, filepath.Join(dir, ".murmur", "config.yaml"), tc.content)
		_, err := Load("", dir)
		if err == nil {
			t.Errorf("%q: accepted", tc.content)
			continue
		}
		if !errors.Is(err, errs.InvalidConfig) {
			t.Errorf("%q: token %s", tc.content, errs.TokenOf(err))
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.want) || !strings.Contains(msg, filepath.Join(dir, ".murmur", "config.yaml")) {
			t.Errorf("%q: %s (want it to mention %q and the file)", tc.content, msg, tc.want)
		}
		if !strings.Contains(msg, "line ") {
			t.Errorf("%q: %s names no line", tc.content, msg)
		}
	}
}

func TestPlainHTTPStores(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, ".murmur", "config.yaml"), `
stores:
  - {url: "oci://registry:5000/murmur", plain_http: true}
  - url: oci://lab.internal/murmur
    plain_http: false
  - oci://secure.internal/murmur
  - {url: oci-layout:store, colour: blue}
`)
	c, err := Load("", dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"oci://registry:5000/murmur", "oci://lab.internal/murmur", "oci://secure.internal/murmur", "oci-layout:" + filepath.Join(dir, "store")}
	if !reflect.DeepEqual(c.Stores, want) {
		t.Fatalf("Stores = %v, want %v", c.Stores, want)
	}
	if !reflect.DeepEqual(c.PlainHTTP, map[string]bool{"oci://registry:5000/murmur": true}) {
		t.Fatalf("PlainHTTP = %v; only the store that says so is plain HTTP", c.PlainHTTP)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], `unknown key "colour" in stores[3]`) || !strings.Contains(c.Warnings[0], "line 7") {
		t.Fatalf("Warnings = %q", c.Warnings)
	}
}

func TestMurmurSourceMayBeSpelledOut(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.yaml")
	write(t, p, "sources: { murmur: \""+lock.MurmurSource+"\" }\n")
	c, err := Load(p, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.SourceFor("murmur") != lock.MurmurSource {
		t.Fatal(c.SourceFor("murmur"))
	}
}

func TestUnreadableConfigIsIOError(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.yaml")
	if err := os.Mkdir(p, 0o700); err != nil { // a folder where the file should be
		t.Fatal(err)
	}
	_, err := Load(p, "")
	if !errors.Is(err, errs.IO) {
		t.Fatalf("got %v", err)
	}
}

func TestResolveStore(t *testing.T) {
	cases := map[string]string{
		"oci-layout:store":       "oci-layout:/base/store",
		"oci-layout:../up/store": "oci-layout:/up/store",
		"oci-layout:/abs/store":  "oci-layout:/abs/store",
		"oci://host:5000/murmur": "oci://host:5000/murmur",
	}
	for in, want := range cases {
		if got := store.ResolveStore(in, "/base"); got != want {
			t.Errorf("ResolveStore(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"1000000": 1000000, "512M": 512 << 20, "512mb": 512 << 20, "20GiB": 20 << 30, "1.5G": 3 << 29, "2 TB": 2 << 40, "64KiB": 64 << 10, "100B": 100,
	} {
		if got, err := cas.ParseSize(in); err != nil || got != want {
			t.Errorf("cas.ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "abc", "-5G", "0", "0.1", "10 parsecs", "1e9", "0x10", "G", "NaN", "Inf", "99999999T"} {
		if _, err := cas.ParseSize(bad); !errors.Is(err, errs.Usage) {
			t.Errorf("cas.ParseSize(%q) = %v, want a usage error", bad, err)
		}
	}
}

func TestCacheMaxSize(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home", "config.yaml")
	proj := filepath.Join(dir, "proj")
	write(t, home, "cache: { max_size: 20GiB, keep: forever }\n")
	c, err := Load(home, proj)
	if err != nil || c.MaxCacheSize != 20<<30 || len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "cache.keep") {
		t.Fatalf("home cache = %d, %v, warnings %q", c.MaxCacheSize, err, c.Warnings)
	}
	write(t, filepath.Join(proj, ".murmur", "config.yaml"), "cache:\n  max_size: 1G\n")
	if c, err = Load(home, proj); err != nil || c.MaxCacheSize != 1<<30 {
		t.Fatalf("the project's max_size does not win: %d, %v", c.MaxCacheSize, err)
	}
	for content, want := range map[string]string{
		"cache: 5G\n":                 "cache must be a mapping",
		"cache: { max_size: lots }\n": "cache.max_size",
		"cache: { max_size: [1] }\n":  "cache.max_size must be a size",
	} {
		write(t, filepath.Join(proj, ".murmur", "config.yaml"), content)
		_, err := Load(home, proj)
		if !errors.Is(err, errs.InvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an invalid-config error mentioning %q", content, err, want)
		}
	}
}

func TestFallbacksAndMirror(t *testing.T) {
	dir := t.TempDir()
	homeCfg := filepath.Join(dir, "home", "config.yaml")
	proj := filepath.Join(dir, "proj")
	write(t, homeCfg, `
stores:
  - {url: oci://team:5000/murmur, fallback: not-found}
  - {url: oci://backup:5000/murmur, fallback: any-error}
mirror: {url: oci://team:5000/murmur, plain_http: true}
mirror_required: true
`)
	write(t, filepath.Join(proj, ".murmur", "config.yaml"), `
stores:
  - {url: oci://team:5000/murmur, fallback: any-error}
  - {url: oci-layout:vendor, fallback: any-error}
mirror_required: false
`)
	c, err := Load(homeCfg, proj)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]store.Fallback{
		"oci://team:5000/murmur":                      store.FallbackAnyError, // the project's entry decides
		"oci-layout:" + filepath.Join(proj, "vendor"): store.FallbackAnyError,
		"oci://backup:5000/murmur":                    store.FallbackAnyError,
	}
	if !reflect.DeepEqual(c.Fallbacks, want) {
		t.Fatalf("fallbacks = %v, want %v", c.Fallbacks, want)
	}
	if c.Mirror != "oci://team:5000/murmur" || !c.PlainHTTP["oci://team:5000/murmur"] || c.MirrorRequired {
		t.Fatalf("mirror %q plain %v required %v", c.Mirror, c.PlainHTTP, c.MirrorRequired)
	}
	c, err = Load(homeCfg, "")
	if err != nil || !c.MirrorRequired || c.Fallbacks["oci://team:5000/murmur"] != store.FallbackNotFound {
		t.Fatalf("home alone: %+v, %v", c, err)
	}
}

// One store needs no list, and a trailing slash names the same store.
func TestStoresAsOneAddress(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, ".murmur", "config.yaml"), "stores: oci://registry.internal:5000/murmur/\nmirror: {url: oci://mirror:5000/m/}\n")
	c, err := Load("", dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Stores) != 1 || c.Stores[0] != "oci://registry.internal:5000/murmur" {
		t.Fatalf("stores %q", c.Stores)
	}
	if got := store.CleanStoreAddress("oci-layout:/srv/store//"); got != "oci-layout:/srv/store" {
		t.Errorf("CleanStoreAddress = %q", got)
	}
}

// A mistyped top-level key is named with the key it most likely meant.
func TestUnknownKeySuggests(t *testing.T) {
	f, err := parseConfig([]byte("store:\n  - oci-layout:/x\n"), "config.yaml", t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.warnings) != 1 || !strings.Contains(f.warnings[0], `unknown key "store" ignored; did you mean stores?`) {
		t.Fatalf("warnings = %q", f.warnings)
	}
}

// The home decides trust; a cloned project's config may only tighten it. What would loosen is
// ignored with a warning that names what the home says, and trust material never comes from a
// project.
func TestProjectOnlyTightensProvenance(t *testing.T) {
	tests := []struct {
		name, home, project string
		scope               string
		want                ProvenancePolicy
		warn                []string // each must appear in some warning; nil: no warning at all
	}{
		{
			name:    "the home's require holds against the project's off",
			home:    "scopes:\n  acme:\n    provenance: require\n",
			project: "provenance: off\nscopes:\n  acme:\n    provenance: off\n",
			scope:   "acme",
			want:    ProvenancePolicy{Mode: ProvenanceRequire},
			warn:    []string{"provenance: off ignored (the home's provenance: prefer holds)", "scopes.acme.provenance: off ignored (the home's require holds)"},
		},
		{
			name:    "a project may tighten prefer to require",
			project: "scopes:\n  acme:\n    provenance: require\n",
			scope:   "acme",
			want:    ProvenancePolicy{Mode: ProvenanceRequire},
		},
		{
			name:    "a project may require for every scope",
			home:    "scopes:\n  acme:\n    provenance: off\n",
			project: "provenance: require\n",
			scope:   "acme",
			want:    ProvenancePolicy{Mode: ProvenanceRequire},
		},
		{
			name:    "allow_self_hosted: true from a project is ignored",
			project: "scopes:\n  acme:\n    allow_self_hosted: true\n",
			scope:   "acme",
			want:    ProvenancePolicy{Mode: ProvenancePrefer},
			warn:    []string{"scopes.acme.allow_self_hosted: true ignored"},
		},
		{
			name:    "allow_self_hosted: false from a project holds",
			home:    "scopes:\n  acme:\n    allow_self_hosted: true\n",
			project: "scopes:\n  acme:\n    allow_self_hosted: false\n",
			scope:   "acme",
			want:    ProvenancePolicy{Mode: ProvenancePrefer},
		},
		{
			name:  "the home's signer_workflow reaches the policy",
			home:  "scopes:\n  acme:\n    signer_workflow: https://github.com/acme/tools/.github/workflows/\n",
			scope: "acme",
			want:  ProvenancePolicy{Mode: ProvenancePrefer, SignerWorkflow: "https://github.com/acme/tools/.github/workflows/"},
		},
		{
			name:    "a project's signer_workflow that narrows holds",
			home:    "scopes:\n  acme:\n    signer_workflow: https://github.com/acme/tools/.github/workflows/\n",
			project: "scopes:\n  acme:\n    signer_workflow: https://github.com/acme/tools/.github/workflows/release.yml@\n",
			scope:   "acme",
			want:    ProvenancePolicy{Mode: ProvenancePrefer, SignerWorkflow: "https://github.com/acme/tools/.github/workflows/release.yml@"},
		},
		{
			name:    "a project's signer_workflow outside the home's is ignored",
			home:    "scopes:\n  acme:\n    signer_workflow: https://github.com/acme/tools/.github/workflows/\n",
			project: "scopes:\n  acme:\n    signer_workflow: https://github.com/evil/tools/.github/workflows/\n",
			scope:   "acme",
			want:    ProvenancePolicy{Mode: ProvenancePrefer, SignerWorkflow: "https://github.com/acme/tools/.github/workflows/"},
			warn:    []string{"does not narrow the home's"},
		},
		{
			name:    "trust material never comes from a project",
			project: "trusted_root: /path/to/token\ntrusted_keys:\n  - {hint: ab, pem: x}\nscopes:\n  acme:\n    trusted_keys:\n      - {hint: cd, pem: y}\n",
			scope:   "acme",
			want:    ProvenancePolicy{Mode: ProvenancePrefer},
			warn:    []string{"trusted_root ignored", "trusted_keys ignored", "scopes.acme.trusted_keys ignored"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			homeFile := filepath.Join(dir, "home", "config.yaml")
			proj := filepath.Join(dir, "project")
			for path, text := range map[string]string{homeFile: tt.home, filepath.Join(proj, ProjectFile): tt.project} {
				if text == "" {
					continue
				}
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			c, err := Load(homeFile, proj)
			if err != nil {
				t.Fatal(err)
			}
			got := c.ProvenanceFor(tt.scope)
			if got.Mode != tt.want.Mode || got.AllowSelfHosted != tt.want.AllowSelfHosted || got.SignerWorkflow != tt.want.SignerWorkflow ||
				got.Trust.RootFile != "" || len(got.Trust.Keys) != 0 {
				t.Errorf("policy = %+v, want %+v and no trust material", got, tt.want)
			}
			all := strings.Join(c.Warnings, "\n")
			if tt.warn == nil && all != "" {
				t.Errorf("warnings:\n%s", all)
			}
			for _, w := range tt.warn {
				if !strings.Contains(all, w) {
					t.Errorf("no warning says %q:\n%s", w, all)
				}
			}
		})
	}
}
