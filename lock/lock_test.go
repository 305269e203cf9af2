package lock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/murmur-nexus/mur/internal/errs"
)

// h makes a distinct, valid hex hash from a small number.
func h(i int) string { return fmt.Sprintf("%064x", i) }

func sample() *Lock {
	return &Lock{
		Scopes: map[string]ScopePin{
			"zeta": {Source: "github:zeta/murmur-artifacts", OwnerID: 9, RepoID: 10},
			"acme": {Source: "github:acme/murmur-tools", OwnerID: 1234567, RepoID: 7654321},
		},
		Artifacts: []Entry{
			{Name: "acme/grep", ResolvedVersion: "1.2.0", SHA256: Hashes{Any: h(1)}, Origin: OriginOperator},
			{Name: "acme/cc", ResolvedVersion: "2.0.0", SHA256: Hashes{Platforms: map[string]string{
				"linux-x86_64": h(3), "darwin-aarch64": h(2)}}, Origin: OriginOperator},
		},
	}
}

const sampleText = `lock_version: 3
scopes:
  acme:
    source: github:acme/murmur-tools
    owner_id: 1234567
    repo_id: 7654321
  zeta:
    source: github:zeta/murmur-artifacts
    owner_id: 9
    repo_id: 10
artifacts:
  - name: acme/cc
    resolved_version: 2.0.0
    sha256:
      platforms:
        darwin-aarch64: "0000000000000000000000000000000000000000000000000000000000000002"
        linux-x86_64: "0000000000000000000000000000000000000000000000000000000000000003"
    origin: operator
  - name: acme/grep
    resolved_version: 1.2.0
    sha256:
      any: "0000000000000000000000000000000000000000000000000000000000000001"
    origin: operator
`

func TestMarshalIsCanonical(t *testing.T) {
	t.Parallel()
	l := sample()
	got := string(l.Marshal())
	if got != sampleText {
		t.Fatalf("Marshal =\n%s\nwant\n%s", got, sampleText)
	}
	if again := string(l.Marshal()); again != got {
		t.Fatal("Marshal is not stable across calls")
	}
	// Marshal must not reorder the caller's slice.
	if l.Artifacts[0].Name != "acme/grep" {
		t.Fatal("Marshal changed the lock")
	}
	if strings.Contains(got, "\r") {
		t.Fatal("CR in output")
	}
	parsed, err := Parse([]byte(got), "murmur.lock")
	if err != nil {
		t.Fatal(err)
	}
	want := sample()
	want.Artifacts[0], want.Artifacts[1] = want.Artifacts[1], want.Artifacts[0] // Parse sorts
	if !reflect.DeepEqual(parsed, want) {
		t.Fatalf("Parse(Marshal(l)) = %+v, want %+v", parsed, want)
	}
	if string(parsed.Marshal()) != got {
		t.Fatal("re-marshal differs")
	}
}

func TestEmptyLock(t *testing.T) {
	t.Parallel()
	l := &Lock{}
	want := "lock_version: 3\nscopes: {}\nartifacts: []\n"
	if got := string(l.Marshal()); got != want {
		t.Fatalf("got %q", got)
	}
	p, err := Parse([]byte(want), "")
	if err != nil || len(p.Scopes) != 0 || len(p.Artifacts) != 0 {
		t.Fatalf("%+v %v", p, err)
	}
	// Keys may be absent or null in a hand-trimmed lock.
	for _, s := range []string{"lock_version: 3\n", "lock_version: 3\nscopes:\nartifacts:\n"} {
		if _, err := Parse([]byte(s), ""); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
}

func TestAwkwardValuesSurviveOtherYAMLReaders(t *testing.T) {
	t.Parallel()
	versions := []string{"1.0", "1", "yes", "No", "ON", "true", "1e3", "0777", "1_000", "0x1F", "1.10", "nan", "Null", "1.2.0+build_7"}
	l := &Lock{Scopes: map[string]ScopePin{}} // what Parse gives for no scopes
	for i, v := range versions {
		if err := l.Upsert(fmt.Sprintf("acme/t%d", i), v, "any", h(i+1), "", false); err != nil {
			t.Fatal(err)
		}
	}
	data := l.Marshal()
	p, err := Parse(data, "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, l) {
		t.Fatalf("round trip: %+v vs %+v", p, l)
	}
	// A generic YAML reader must also see strings, not numbers or booleans.
	var generic struct {
		Artifacts []map[string]any `yaml:"artifacts"`
	}
	if err := yaml.Unmarshal(data, &generic); err != nil {
		t.Fatal(err)
	}
	for _, a := range generic.Artifacts {
		if _, ok := a["resolved_version"].(string); !ok {
			t.Errorf("%v: resolved_version read as %T", a["name"], a["resolved_version"])
		}
		hashes := a["sha256"].(map[string]any)
		if _, ok := hashes["any"].(string); !ok {
			t.Errorf("%v: hash read as %T", a["name"], hashes["any"])
		}
	}
	for _, v := range []string{"yes", "No", "ON"} {
		if !strings.Contains(string(data), `resolved_version: "`+v+`"`) {
			t.Errorf("YAML 1.1 boolean %q not quoted:\n%s", v, data)
		}
	}
}

func TestReadMissingIsEmpty(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := Read(filepath.Join(dir, FileName))
	if err != nil || l == nil || len(l.Artifacts) != 0 || l.Scopes == nil {
		t.Fatalf("%+v %v", l, err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(filepath.Join(dir, "d")); !errors.Is(err, errs.IO) {
		t.Fatalf("reading a folder: %v", err)
	}
}

func entryYAML(body string) string {
	return "lock_version: 3\nartifacts:\n" + body
}

func TestParseRefusals(t *testing.T) {
	t.Parallel()
	good := "  - name: acme/grep\n    resolved_version: 1.2.0\n    sha256:\n      any: " + h(1) + "\n"
	cases := []struct {
		name    string
		content string
		want    []string
	}{
		{"empty", "", []string{"empty"}},
		{"blank", "  \n\n", []string{"empty"}},
		{"comments only", "# nothing\n", []string{"no lock_version", "reads lock_version 3", "mur pull"}},
		{"missing version", "artifacts: []\n", []string{"no lock_version", "reads lock_version 3", "mur pull"}},
		{"old version", "lock_version: 2\n", []string{"lock_version is 2", "reads lock_version 3", "mur pull", "mv "}},
		{"newer version", "lock_version: 4\n", []string{"lock_version is 4", "upgrade mur"}},
		{"string version", "lock_version: \"3\"\n", []string{"must be the number 3"}},
		{"float version", "lock_version: 3.0\n", []string{"must be the number 3"}},
		{"truncated yaml", "lock_version: 3\nartifacts:\n  - name: \"acme/gr", []string{"not valid YAML", "mur pull"}},
		{"tab yaml", "lock_version: 3\n\tscopes: {}\n", []string{"not valid YAML"}},
		{"two docs", "lock_version: 3\n---\nlock_version: 3\n", []string{"more than one YAML document"}},
		{"not a mapping", "- a\n", []string{"expected a mapping"}},
		{"duplicate top key", "lock_version: 3\nlock_version: 3\n", []string{`"lock_version" twice`}},
		{"artifacts not list", "lock_version: 3\nartifacts: {}\n", []string{"artifacts must be a list"}},
		{"entry not mapping", entryYAML("  - acme/grep\n"), []string{"artifacts[0]", "must be a mapping"}},
		{"both any and platforms", entryYAML("  - name: acme/grep\n    resolved_version: 1.2.0\n    sha256:\n      any: " + h(1) + "\n      platforms: { linux-x86_64: " + h(2) + " }\n"),
			[]string{"artifacts[0] (acme/grep)", "both any and platforms", "line 6"}},
		{"neither", entryYAML("  - name: acme/grep\n    resolved_version: 1.2.0\n    sha256: {}\n"), []string{"artifacts[0] (acme/grep)", "neither any nor platforms"}},
		{"no sha256", entryYAML("  - name: acme/grep\n    resolved_version: 1.2.0\n"), []string{"artifacts[0] (acme/grep)", "has no sha256"}},
		{"sha256 scalar", entryYAML("  - name: acme/grep\n    resolved_version: 1.2.0\n    sha256: " + h(1) + "\n"), []string{"sha256 must be a mapping"}},
		{"uppercase hex", entryYAML("  - name: acme/grep\n    resolved_version: 1.2.0\n    sha256: { any: " + strings.ToUpper("ab"+h(1)[2:]) + " }\n"), []string{"artifacts[0] (acme/grep)", "sha256.any", "64 lowercase hex"}},
		{"short hex", entryYAML("  - name: acme/grep\n    resolved_version: 1.2.0\n    sha256: { any: abc }\n"), []string{"sha256.any", `"abc"`}},
		{"prefixed hex", entryYAML("  - name: acme/grep\n    resolved_version: 1.2.0\n    sha256: { any: \"sha256:" + h(1) + "\" }\n"), []string{"sha256.any"}},
		{"null hex", entryYAML("  - name: acme/grep\n    resolved_version: 1.2.0\n    sha256: { any: }\n"), []string{"sha256.any", "found nothing"}},
		{"unknown platform", entryYAML("  - name: acme/grep\n    resolved_version: 1.2.0\n    sha256: { platforms: { windows-x86_64: " + h(1) + " } }\n"), []string{"artifacts[0] (acme/grep)", "windows-x86_64", "linux-x86_64"}},
		{"any as platform key", entryYAML("  - name: acme/grep\n    resolved_version: 1.2.0\n    sha256: { platforms: { any: " + h(1) + " } }\n"), []string{"sha256.any instead"}},
		{"empty platforms", entryYAML("  - name: acme/grep\n    resolved_version: 1.2.0\n    sha256: { platforms: {} }\n"), []string{"sha256.platforms must map"}},
		{"bad platform hex", entryYAML("  - name: acme/grep\n    resolved_version: 1.2.0\n    sha256: { platforms: { linux-x86_64: zz } }\n"), []string{"sha256.platforms.linux-x86_64"}},
		{"bare name", entryYAML("  - name: grep\n    resolved_version: 1.2.0\n    sha256: { any: " + h(1) + " }\n"), []string{"artifacts[0] (grep)", "acme/grep"}},
		{"bad name", entryYAML("  - name: Acme/grep\n    resolved_version: 1.2.0\n    sha256: { any: " + h(1) + " }\n"), []string{"artifacts[0] (Acme/grep)"}},
		{"no name", entryYAML("  - resolved_version: 1.2.0\n    sha256: { any: " + h(1) + " }\n"), []string{"artifacts[0] has no name"}},
		{"name list", entryYAML("  - name: [a]\n    resolved_version: 1.2.0\n    sha256: { any: " + h(1) + " }\n"), []string{"name must be a string"}},
		{"reserved version", entryYAML("  - name: acme/grep\n    resolved_version: latest\n    sha256: { any: " + h(1) + " }\n"), []string{"artifacts[0] (acme/grep)", "resolved_version", "reserved"}},
		{"bad version", entryYAML("  - name: acme/grep\n    resolved_version: -1\n    sha256: { any: " + h(1) + " }\n"), []string{"resolved_version"}},
		{"no version", entryYAML("  - name: acme/grep\n    sha256: { any: " + h(1) + " }\n"), []string{"has no resolved_version"}},
		{"bad origin", entryYAML("  - name: acme/grep\n    resolved_version: 1.2.0\n    sha256: { any: " + h(1) + " }\n    origin: Some One\n"), []string{"origin"}},
		{"duplicate entry", entryYAML(good + strings.Replace(good, "1.2.0", "1.3.0", 1)), []string{"artifacts[1] (acme/grep)", "artifacts[0]", "remove one"}},
		{"duplicate entry key", entryYAML("  - name: acme/grep\n    name: acme/grep\n    resolved_version: 1.2.0\n    sha256: { any: " + h(1) + " }\n"), []string{`"name" twice`}},
		{"scopes list", "lock_version: 3\nscopes: []\n", []string{"scopes must be a mapping"}},
		{"scope not mapping", "lock_version: 3\nscopes: { acme: 1 }\n", []string{`scope "acme"`, "must be a mapping"}},
		{"zero owner", "lock_version: 3\nscopes: { acme: { source: github:acme/x, owner_id: 0, repo_id: 1 } }\n", []string{`scope "acme"`, "owner_id", "positive"}},
		{"negative repo", "lock_version: 3\nscopes: { acme: { source: github:acme/x, owner_id: 1, repo_id: -4 } }\n", []string{"repo_id", "positive"}},
		{"string id", "lock_version: 3\nscopes: { acme: { source: github:acme/x, owner_id: \"1\", repo_id: 1 } }\n", []string{"owner_id"}},
		{"hex id", "lock_version: 3\nscopes: { acme: { source: github:acme/x, owner_id: 0x10, repo_id: 1 } }\n", []string{"owner_id"}},
		{"huge id", "lock_version: 3\nscopes: { acme: { source: github:acme/x, owner_id: 99999999999999999999, repo_id: 1 } }\n", []string{"owner_id"}},
		{"missing id", "lock_version: 3\nscopes: { acme: { source: github:acme/x, owner_id: 1 } }\n", []string{"has no repo_id"}},
		{"bad source", "lock_version: 3\nscopes: { acme: { source: gitlab:acme/x, owner_id: 1, repo_id: 1 } }\n", []string{`scope "acme"`, "github:OWNER/REPO"}},
		{"missing source", "lock_version: 3\nscopes: { acme: { owner_id: 1, repo_id: 1 } }\n", []string{"has no source"}},
		{"bad scope name", "lock_version: 3\nscopes: { Acme: { source: github:acme/x, owner_id: 1, repo_id: 1 } }\n", []string{`scope "Acme"`}},
		{"not utf-8", "lock_version: 3\nartifacts: []\n# \xff\n", []string{"not UTF-8"}},
		{"two documents", "lock_version: 3\n---\nlock_version: 3\n", []string{"more than one YAML document"}},
		{"local scope", "lock_version: 3\nscopes: { local: { source: github:acme/x, owner_id: 1, repo_id: 1 } }\n", []string{"scope local is reserved"}},
		{"murmur hijack", "lock_version: 3\nscopes: { murmur: { source: github:evil/default-artifacts, owner_id: 1, repo_id: 1 } }\n", []string{"scope murmur is reserved", "github:evil/default-artifacts"}},
		{"duplicate scope", "lock_version: 3\nscopes:\n  acme: { source: github:acme/x, owner_id: 1, repo_id: 1 }\n  acme: { source: github:acme/x, owner_id: 1, repo_id: 1 }\n", []string{`scope "acme" is pinned twice`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Parse([]byte(tc.content), "/proj/murmur.lock")
			if err == nil {
				t.Fatalf("accepted: %+v", l)
			}
			if !errors.Is(err, errs.InvalidLock) {
				t.Fatalf("token %s: %v", errs.TokenOf(err), err)
			}
			msg := err.Error()
			if !strings.Contains(msg, "/proj/murmur.lock") {
				t.Errorf("message does not name the file: %s", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q: %s", w, msg)
				}
			}
		})
	}
}

func TestMurmurScopeMayBePinnedToItsSource(t *testing.T) {
	t.Parallel()
	src := "lock_version: 3\nscopes: { murmur: { source: github:murmur-nexus/default-artifacts, owner_id: 5, repo_id: 6 } }\n"
	l, err := Parse([]byte(src), "")
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := l.Pin("murmur"); !ok || p.OwnerID != 5 || p.RepoID != 6 {
		t.Fatalf("%+v %v", p, ok)
	}
}

func TestUnknownKeysWarnAndAreDropped(t *testing.T) {
	t.Parallel()
	src := "lock_version: 3\nfuture: 1\nscopes:\n  acme: { source: github:acme/x, owner_id: 1, repo_id: 2, note: hi }\nartifacts:\n  - name: acme/grep\n    resolved_version: 1.2.0\n    size: 7\n    sha256: { any: " + h(1) + " }\n"
	l, err := Parse([]byte(src), "murmur.lock")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Warnings) != 3 {
		t.Fatalf("warnings = %q", l.Warnings)
	}
	for i, w := range []string{`"future"`, `"note"`, `"size"`} {
		if !strings.Contains(l.Warnings[i], w) || !strings.Contains(l.Warnings[i], "murmur.lock: line") {
			t.Errorf("warning %d = %q, want it to mention %s", i, l.Warnings[i], w)
		}
	}
	out := string(l.Marshal())
	for _, k := range []string{"future", "note", "size"} {
		if strings.Contains(out, k) {
			t.Errorf("%s written back:\n%s", k, out)
		}
	}
	if l.Find("acme/grep").Origin != OriginOperator {
		t.Fatal("missing origin is not operator")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestMarshalQuotesWhatIsNotPlain(t *testing.T) {
	t.Parallel()
	// Marshal takes any Lock built in code; whatever it holds must come back as the same string.
	odd := []string{"", "a b", "line\nbreak", "github:", "1:20", "-", "#x", "é", "tab\there", `q"uote`, "~", "null", "- x", "[a]", "+1", ".inf"}
	l := &Lock{Scopes: map[string]ScopePin{}}
	for i, v := range odd {
		l.Artifacts = append(l.Artifacts, Entry{Name: fmt.Sprintf("n%02d", i), ResolvedVersion: v, SHA256: Hashes{Any: v}, Origin: Origin(v + "x")})
	}
	var generic struct {
		Artifacts []struct {
			Name    string            `yaml:"name"`
			Version any               `yaml:"resolved_version"`
			SHA256  map[string]string `yaml:"sha256"`
		} `yaml:"artifacts"`
	}
	data := l.Marshal()
	if err := yaml.Unmarshal(data, &generic); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if len(generic.Artifacts) != len(odd) {
		t.Fatalf("%d artifacts read back", len(generic.Artifacts))
	}
	for i, a := range generic.Artifacts {
		if a.Version != odd[i] || a.SHA256["any"] != odd[i] {
			t.Errorf("%q read back as %#v / %q", odd[i], a.Version, a.SHA256["any"])
		}
	}
}
