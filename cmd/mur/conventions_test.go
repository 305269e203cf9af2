package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
)

// every command and subcommand, by its path after "mur".
func commandPaths() [][]string {
	var out [][]string
	for _, c := range commands() {
		out = append(out, []string{c.name})
		for _, s := range c.subs {
			out = append(out, []string{c.name, s.name})
		}
	}
	return out
}

func TestEveryCommandHasExamples(t *testing.T) {
	t.Parallel()
	for _, path := range commandPaths() {
		code, out, _ := runMur(t, append(path, "--help")...)
		if code != 0 || !strings.Contains(out, "\nExamples:\n  mur ") && !strings.Contains(out, "\nExamples:\n  source <(mur") && !strings.Contains(out, "\nExamples:\n  ") {
			t.Errorf("mur %s --help has no Examples section (exit %d):\n%s", strings.Join(path, " "), code, out)
		}
	}
}

func TestPlatformOneCheck(t *testing.T) {
	home := t.TempDir()
	t.Chdir(t.TempDir())
	for _, args := range [][]string{
		{"pull", "acme/x@1.0.0", "--platform", "bogus"},
		{"verify", "--platform", "bogus"},
		{"warm", "--platform", "bogus"},
		{"push", "x.mur.zip", "--scope", "acme", "--store", "oci-layout:s", "--platform", "bogus"},
		{"index", "x.mur.zip", "--scope", "acme", "--platform", "bogus"},
		{"add", "acme/x@1.0.0", "--platform", "bogus"},
		{"lock", "--platform", "bogus"},
	} {
		code, _, errOut := runMur(t, append([]string{"--home", home}, args...)...)
		if code != 2 || !strings.Contains(errOut, `mur: usage: --platform "bogus" is not a platform; give one of any, linux-x86_64`) {
			t.Errorf("mur %s: exit %d, %s", strings.Join(args, " "), code, errOut)
		}
	}
	// "all" is a platform choice only where a command acts on every platform the lock names.
	if code, _, errOut := runMur(t, "--home", home, "pull", "acme/x@1.0.0", "--platform", "all"); code != 2 || !strings.Contains(errOut, "--platform") {
		t.Errorf("pull --platform all: exit %d, %s", code, errOut)
	}
}

func TestDidYouMean(t *testing.T) {
	home := t.TempDir()
	t.Chdir(t.TempDir())
	code, _, errOut := runMur(t, "--home", home, "pull", "acme/hello:1.0.0")
	if code != 2 || !strings.Contains(errOut, "did you mean acme/hello@1.0.0?") {
		t.Errorf("pull acme/hello:1.0.0: exit %d, %s", code, errOut)
	}
	code, _, errOut = runMur(t, "--home", home, "run", "acme/hello@1.0.0")
	if code != 2 || !strings.Contains(errOut, "did you mean 'mur run acme/hello'?") {
		t.Errorf("run acme/hello@1.0.0: exit %d, %s", code, errOut)
	}
	code, _, errOut = runMur(t, "--home", home, "run", "acme/hello:1.0.0")
	if code != 2 || !strings.Contains(errOut, "did you mean 'mur run acme/hello'?") {
		t.Errorf("run acme/hello:1.0.0: exit %d, %s", code, errOut)
	}
}

func TestJSONEnvelope(t *testing.T) {
	home := t.TempDir()
	t.Chdir(t.TempDir())
	// Success: the command's fields, lists as [], and "error": null.
	code, out, _ := runMur(t, "--home", home, "--json", "cache", "ls")
	if code != 0 || !strings.Contains(out, `"blobs": []`) || !strings.Contains(out, `"error": null`) {
		t.Fatalf("cache ls --json on an empty home: exit %d\n%s", code, out)
	}
	// Failure: the same shape, the error as token and message.
	code, out, _ = runMur(t, "--home", home, "--json", "pull")
	var env struct {
		Error *jsonError `json:"error"`
	}
	if code != 2 || json.Unmarshal([]byte(out), &env) != nil || env.Error == nil || env.Error.Token != errs.Usage || strings.HasPrefix(env.Error.Message, "usage") {
		t.Fatalf("pull --json with nothing to pull: exit %d\n%s", code, out)
	}
	// A pull that failed per artifact keeps each failure's token out of its message.
	code, out, _ = runMur(t, "--home", home, "--json", "--offline", "pull", "acme/x@1.0.0")
	var pull struct {
		Results []struct {
			Name  string
			Error *jsonError
		}
		Error *jsonError
	}
	if code != 1 || json.Unmarshal([]byte(out), &pull) != nil || len(pull.Results) != 1 || pull.Results[0].Error == nil ||
		pull.Results[0].Error.Token != errs.Offline || strings.HasPrefix(pull.Results[0].Error.Message, "offline:") || pull.Error == nil {
		t.Fatalf("pull --json --offline: exit %d\n%s", code, out)
	}
}

func TestEmptyLists(t *testing.T) {
	t.Parallel()
	type inner struct {
		Tags []string          `json:"tags"`
		Map  map[string]string `json:"map"`
	}
	v := struct {
		A    []int    `json:"a"`
		P    *inner   `json:"p"`
		Nil  *inner   `json:"nil"`
		In   []inner  `json:"in"`
		Any  any      `json:"any"`
		Skip []string `json:"skip,omitempty"`
		hide []string
	}{P: &inner{}, In: []inner{{}}, Any: inner{}}
	var b bytes.Buffer
	if err := writeEnvelope(&b, v, nil); err != nil {
		t.Fatal(err)
	}
	want := `{"a":[],"p":{"tags":[],"map":{}},"nil":null,"in":[{"tags":[],"map":{}}],"any":{"tags":[],"map":{}},"error":null}`
	var compact bytes.Buffer
	json.Compact(&compact, b.Bytes())
	if compact.String() != want {
		t.Fatalf("got  %s\nwant %s", compact.String(), want)
	}
	b.Reset()
	if err := writeEnvelope(&b, nil, errors.New("plain")); err != nil || !strings.Contains(b.String(), `"token": "internal"`) {
		t.Fatalf("%v %s", err, b.String())
	}
}

func TestVersionFromBuildInfo(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/murmur-nexus/mur", Version: "v1.4.0"},
		Deps:     []*debug.Module{{Path: "github.com/tetratelabs/wazero", Version: "v1.12.0"}},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}}}
	v := readBuildVersion(bi, true)
	if got := v.String(); !strings.HasPrefix(got, "mur v1.4.0 (0123456789ab, modified, 2026-01-02T03:04:05Z), go") || !strings.Contains(got, "wazero v1.12.0") {
		t.Fatalf("version = %q", got)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, _ := runMur(t, args...)
		if code != 0 || !strings.HasPrefix(out, "mur ") || strings.Contains(out, "mur dev") {
			t.Errorf("mur %s: exit %d, %q", args[0], code, out)
		}
	}
}

func TestPlural(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "0 blobs"}, {1, "1 blob"}, {2, "2 blobs"}} {
		if got := plural(tc.n, "blob"); got != tc.want {
			t.Errorf("plural(%d) = %q", tc.n, got)
		}
	}
	if got := plural(1, "entry", "entries") + " " + plural(3, "entry", "entries"); got != "1 entry 3 entries" {
		t.Errorf("irregular: %q", got)
	}
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, _ := runMur(t, "completion", sh)
		// bash and zsh ask mur itself on every TAB (complete.go); fish lists the commands and
		// flags, and asks mur for artifact names and flag values.
		if code != 0 || !strings.Contains(out, "mur "+completeCommand+" ") || sh == "fish" && (!strings.Contains(out, "pull") || !strings.Contains(out, "forget-scope") || !strings.Contains(out, "plain-http")) {
			t.Errorf("completion %s: exit %d\n%s", sh, code, out)
		}
	}
	if code, _, errOut := runMur(t, "completion", "tcsh"); code != 2 || !strings.Contains(errOut, "bash, zsh or fish") && !strings.Contains(errOut, "bash, zsh, fish") {
		t.Errorf("completion tcsh: exit %d, %s", code, errOut)
	}
}

// sigstore-go's package initialisation costs tens of milliseconds per process; mur must never
// link it, so that `mur run` and warm pulls stay fast. mur-provenance does the verifying.
func TestMurNeverLinksSigstore(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/murmur-nexus/mur/cmd/mur").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.Contains(pkg, "sigstore") || strings.Contains(pkg, "go-openapi") {
			t.Fatalf("cmd/mur links %s; keep sigstore-go behind fetch/provenance.Helper", pkg)
		}
	}
}

// hostileText is a string from outside with C0 controls (OSC 52, a bell), DEL and C1 controls
// (CSI and NEL): encoding/json escapes the first, not the others.
const hostileText = "x\x1b]52;c;aGFja2Vk\x07\x7f\u009b31m\u0085\u0080\u009f"

// rawTerminalControl finds a control character in out, other than a newline.
func rawTerminalControl(out string) (rune, bool) {
	for _, r := range out {
		if r != '\n' && (r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f) {
			return r, true
		}
	}
	return 0, false
}

// The --json envelope carries DEL and the C1 controls as \u escapes, in the result and in the
// error alike, and still means the same strings.
func TestJSONEnvelopeEscapesDELAndC1(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	result := struct {
		Store string `json:"store"`
	}{hostileText}
	if err := writeEnvelope(&b, result, errs.New(errs.NotFound, "no store %s", hostileText)); err != nil {
		t.Fatal(err)
	}
	if r, ok := rawTerminalControl(b.String()); ok {
		t.Fatalf("a raw %U in the envelope: %q", r, b.String())
	}
	for _, want := range []string{`\u007f\u009b31m\u0085\u0080\u009f"`, `"message": "no store x\u001b]52;c;aGFja2Vk\u0007\u007f\u009b31m\u0085\u0080\u009f"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the envelope %s lacks %s", b.String(), want)
		}
	}
	var back struct {
		Store string     `json:"store"`
		Error *jsonError `json:"error"`
	}
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back.Store != hostileText || back.Error == nil || back.Error.Message != "no store "+hostileText {
		t.Fatalf("the envelope no longer means the same: %+v, %v", back, err)
	}
}

// Through the whole command line: an error quoting what the user (or a script fed by a server)
// gave reaches --json escaped as JSON and stderr escaped for a terminal, on a usage error and on
// a command's own failure.
func TestOutputEscapesDELAndC1(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	for _, tt := range []struct {
		args      []string
		stderr    string // what stderr must show, escaped
		jsonError string // the message the JSON carries, unescaped
	}{
		{[]string{"--json", "--bogus" + hostileText},
			`mur: usage: unknown flag: --bogus` + `x\x1b]52;c;aGFja2Vk\x07\x7f\u009b31m\u0085\u0080\u009f;`,
			"unknown flag: --bogus" + hostileText + ";"},
		{[]string{"--json", "--home", home, "state", "rm", hostileText},
			`mur: not-found: there is no state store ` + `x\x1b]52;c;aGFja2Vk\x07\x7f\u009b31m\u0085\u0080\u009f in`,
			"there is no state store " + hostileText + " in"},
	} {
		code, out, errOut := runMur(t, tt.args...)
		if code == 0 {
			t.Fatalf("mur %q succeeded", tt.args)
		}
		if r, ok := rawTerminalControl(out); ok {
			t.Errorf("mur %q: a raw %U on stdout: %q", tt.args, r, out)
		}
		if r, ok := rawTerminalControl(errOut); ok {
			t.Errorf("mur %q: a raw %U on stderr: %q", tt.args, r, errOut)
		}
		if !strings.Contains(errOut, tt.stderr) {
			t.Errorf("mur %q: stderr %q lacks %q", tt.args, errOut, tt.stderr)
		}
		var env struct {
			Error *jsonError `json:"error"`
		}
		if err := json.Unmarshal([]byte(out), &env); err != nil || env.Error == nil || !strings.HasPrefix(env.Error.Message, tt.jsonError) {
			t.Errorf("mur %q: the JSON error is not %q...: %q, %v", tt.args, tt.jsonError, out, err)
		}
	}
}
