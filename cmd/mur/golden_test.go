package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/lock"
)

// The --json goldens: testdata/golden/<step>.json holds, for each command, what it prints under
// --json in one small project, normalised (paths, times, durations and the build's own version
// are placeholders) so that the files are stable. Rewrite them with
//
//	go test ./cmd/mur -run TestJSONGolden -update
//
// and read the diff: each golden is the documented shape of its command (docs/json.md).
var update = flag.Bool("update", false, "rewrite testdata/golden from the commands' output")

// goldenStep is one command of the golden walk and the exit status it must have.
type goldenStep struct {
	name string
	code int
	args []string
}

// minimalWasm is the smallest valid module: it compiles, so a pull precompiles it as it would a
// real tool, and --explain-scope needs nothing more.
const minimalWasm = "\x00asm\x01\x00\x00\x00"

// goldenWorld builds the world the walk runs in: two packed tools pushed to an OCI layout, a
// project that declares one of them, and a home; it returns the folder everything is in and
// the steps, in order (later steps depend on what earlier ones did).
func goldenWorld(t *testing.T) (string, []goldenStep) {
	work, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	write := func(rel, data string) {
		t.Helper()
		p := filepath.Join(work, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("src/notes/murmur.yaml", "name: notes\nversion: 1.0.0\nruntime: tool\n")
	write("src/notes/capsule.wasm", minimalWasm)
	write("src/other/murmur.yaml", "name: other\nversion: 2.0.0\nruntime: tool\n")
	write("src/other/capsule.wasm", minimalWasm+"\x01\x01\x00")
	write("project/murmur.yaml", `name: hello
version: "1.0.0"
artifacts:
  - name: acme/notes
    version: "1.0.0"
capabilities:
  filesystem: { scope: "." }
  state: {}
  env: { allow: [LANG] }
  limits: { memory_mib: 128, timeout_s: 30 }
  install: { from: [stores] }
`)
	write("project/.murmur/config.yaml", "stores:\n  - oci-layout:../store\n")
	write("home/state/notes/notes.txt", "one note\n")
	write("alone/.keep", "")
	home := filepath.Join(work, "home")
	store := "oci-layout:" + filepath.Join(work, "store")
	w := func(rel string) string { return filepath.Join(work, rel) }
	g := func(args ...string) []string { return append([]string{"--home", home, "--json"}, args...) }
	return work, []goldenStep{
		{"version", 0, g("version")},
		{"pack", 0, g("pack", w("src/notes"), "-o", w("notes-1.0.0.mur.zip"))},
		{"pack-other", 0, g("pack", w("src/other"), "-o", w("other-2.0.0.mur.zip"))},
		{"push", 0, g("push", w("notes-1.0.0.mur.zip"), "--scope", "acme", "--store", store)},
		{"push-other", 0, g("push", w("other-2.0.0.mur.zip"), "--scope", "acme", "--store", store)},
		{"index", 0, g("index", w("notes-1.0.0.mur.zip"), "--scope", "acme", "--release", "v1", "-o", w("murmur-index.json"))},
		{"cd", 0, []string{"cd", w("project")}},
		{"lock-check-mismatch", 1, g("lock", "--check")},
		{"lock-dry-run", 0, g("lock", "--dry-run")},
		{"pull", 0, g("pull")},
		{"pull-cache-hit", 0, g("pull")},
		{"add", 0, g("add", "acme/other@2.0.0")},
		{"lock-check", 0, g("lock", "--check")},
		// Before warm, whose records of its artifacts are written in the order they finish.
		{"cache-records", 0, g("cache", "records")},
		{"outdated", 0, g("outdated")},
		{"verify", 0, g("verify")},
		{"warm", 0, g("warm")},
		{"ls", 0, g("ls")},
		{"info", 0, g("info", "acme/notes")},
		{"run-explain-scope", 0, g("run", "--explain-scope", "notes")},
		{"run-json-refused", 2, g("run", "notes")},
		{"rm", 0, g("rm", "acme/other")},
		{"state-ls", 0, g("state", "ls")},
		{"state-rm", 0, g("state", "rm", "notes")},
		{"cache-ls", 0, g("cache", "ls")},
		{"cache-verify", 0, g("cache", "verify")},
		{"cache-gc", 0, g("cache", "gc", "--dry-run")},
		{"cache-path", 0, g("cache", "path")},
		{"cache-export", 0, g("cache", "export", "--lock", "murmur.lock", "-o", w("bundle.tar.zst"))},
		{"cache-import", 0, g("cache", "import", w("bundle.tar.zst"))},
		{"pin-scope", 0, []string{"pin-scope"}},
		{"lock-forget-scope", 0, g("lock", "forget-scope", "acme")},
		{"cd", 0, []string{"cd", w("alone")}},
		{"pull-outside", 0, g("pull", "--store", store, "acme/notes@1.0.0", "-o", w("alone"))},
		{"ls-outside", 0, g("ls")},
		{"pull-failed", 1, g("--offline", "pull", "acme/missing@1.0.0")},
		{"error-usage", 2, g("pull")},
		{"error-flag", 2, g("pull", "--no-such-flag")},
		{"error-unknown-command", 2, g("pul")},
		{"error-global-flag", 2, []string{"--json", "--no-such-flag", "version"}},
	}
}

// normalise makes a command's output stable: the work folder, times, durations and the build's
// version become placeholders.
var normalisers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"`), `"<time>"`},
	{regexp.MustCompile(`"duration_ms": \d+`), `"duration_ms": 0`},
	{regexp.MustCompile(`"(revision|go|wazero|version_built)": "[^"]*"`), `"$1": "<$1>"`},
	{regexp.MustCompile(`"modified": (true|false)`), `"modified": false`},
	{regexp.MustCompile(`linux-(x86_64|aarch64)`), `<host-platform>`},
	{regexp.MustCompile(`"platform": "linux/(amd64|arm64)"`), `"platform": "<host-platform>"`},
	{regexp.MustCompile(`"last_use": "[^"]*"`), `"last_use": "<time>"`},
}

func normalise(out, work string) string {
	out = strings.ReplaceAll(out, work, "$WORK")
	for _, n := range normalisers {
		out = n.re.ReplaceAllString(out, n.with)
	}
	return out
}

// runGoldenWalk runs every step, handing each one's raw --json output to check.
func runGoldenWalk(t *testing.T, check func(work string, step goldenStep, out string)) {
	work, steps := goldenWorld(t)
	t.Setenv("MUR_OFFLINE", "")
	t.Setenv("MUR_GITHUB_API_BASE", "http://127.0.0.1:1")
	for _, s := range steps {
		switch s.args[0] {
		case "cd":
			t.Chdir(s.args[1])
			continue
		case "pin-scope":
			err := lock.Update(context.Background(), filepath.Join(work, "project", lock.FileName), func(l *lock.Lock) error {
				return l.SetPin("acme", lock.ScopePin{Source: "github:acme/murmur-artifacts", OwnerID: 1234567, RepoID: 7654321})
			})
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		code, out, errOut := runMur(t, s.args...)
		if code != s.code {
			t.Fatalf("%s: mur %s exited %d, want %d\nstdout:\n%s\nstderr:\n%s", s.name, strings.Join(s.args, " "), code, s.code, out, errOut)
		}
		check(work, s, out)
	}
}

func TestJSONGolden(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("testdata", "golden"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	runGoldenWalk(t, func(work string, s goldenStep, out string) {
		got := normalise(out, work)
		file := filepath.Join(dir, s.name+".json")
		seen[s.name+".json"] = true
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: %v (run go test ./cmd/mur -run TestJSONGolden -update, then review the file)", s.name, err)
			return
		}
		if got != string(want) {
			t.Errorf("%s: mur %s --json differs from %s:\n--- got\n%s\n--- want\n%s", s.name, strings.Join(s.args, " "), file, got, want)
		}
	})
	// A golden no step writes is stale.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !seen[e.Name()] {
			t.Errorf("%s is not written by any step of the walk; remove it", filepath.Join(dir, e.Name()))
		}
	}
}

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// TestJSONKeysSnakeCase walks every command's JSON and fails on a key that is not snake_case,
// and on output that is not one object ending in "error".
func TestJSONKeysSnakeCase(t *testing.T) {
	runGoldenWalk(t, func(_ string, s goldenStep, out string) {
		var v any
		dec := json.NewDecoder(strings.NewReader(out))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Errorf("%s: output is not JSON: %v\n%s", s.name, err, out)
			return
		}
		obj, ok := v.(map[string]any)
		if !ok {
			t.Errorf("%s: output is not an object:\n%s", s.name, out)
			return
		}
		if _, ok := obj["error"]; !ok {
			t.Errorf("%s: no \"error\" key:\n%s", s.name, out)
		}
		for _, k := range badKeys(v, "") {
			t.Errorf("%s: key %s is not snake_case", s.name, k)
		}
	})
}

// badKeys lists the paths of the keys in v that are not snake_case.
func badKeys(v any, at string) []string {
	var bad []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := at + "." + k
			if !snakeCase.MatchString(k) {
				bad = append(bad, p)
			}
			bad = append(bad, badKeys(e, p)...)
		}
	case []any:
		for i, e := range x {
			bad = append(bad, badKeys(e, fmt.Sprintf("%s[%d]", at, i))...)
		}
	}
	return bad
}

func TestBadKeys(t *testing.T) {
	t.Parallel()
	var v any
	if err := json.Unmarshal([]byte(`{"ok_key":[{"HostPath":1,"fine":{"camelCase":2}}],"x1":0}`), &v); err != nil {
		t.Fatal(err)
	}
	got := badKeys(v, "")
	want := map[string]bool{".ok_key[0].HostPath": true, ".ok_key[0].fine.camelCase": true}
	if len(got) != len(want) || !want[got[0]] || !want[got[1]] {
		t.Fatalf("badKeys = %v", got)
	}
	if !bytes.Equal([]byte(normalise(`"t": "2026-01-02T03:04:05.123Z"`, "/x")), []byte(`"t": "<time>"`)) {
		t.Fatal("times are not normalised")
	}
}

// A failed write-through to the mirror shows its error as every other error does.
func TestResultJSONMirrorError(t *testing.T) {
	t.Parallel()
	r := toResultJSON(fetch.Result{Name: "acme/x", Mirror: &fetch.MirrorPush{Store: "oci://m/murmur", Error: "the mirror refused the push", Token: "denied"}})
	if r.Mirror == nil || r.Mirror.Pushed || r.Mirror.Error == nil || r.Mirror.Error.Token != "denied" || r.Mirror.Error.Message != "the mirror refused the push" {
		t.Fatalf("mirror = %+v", r.Mirror)
	}
	if r := toResultJSON(fetch.Result{Mirror: &fetch.MirrorPush{Store: "oci://m/murmur", Pushed: true}}); r.Mirror.Error != nil {
		t.Fatalf("a pushed mirror has an error: %+v", r.Mirror.Error)
	}
}
