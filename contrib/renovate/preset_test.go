// Package renovate holds the Renovate preset for murmur.yaml (murmur.json) and its test.
package renovate

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/murmur-nexus/mur/fetch/github"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/manifest"
)

// TestPresetQueries runs the preset's JSONata queries with the jsonata npm package Renovate
// uses (node query.js), against testdata/murmur.yaml (also read by mur's own parser, so the
// file is one mur accepts) and a murmur-index.json that `mur index` writes from packed artifacts.
// Without node or the package it skips, unless CI is set (.ci/run installs both).
func TestPresetQueries(t *testing.T) {
	t.Parallel()
	needQuery(t)
	yamlData, err := os.ReadFile(filepath.Join("testdata", "murmur.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := manifest.Parse(yamlData, "testdata/murmur.yaml"); err != nil {
		t.Fatalf("mur does not accept the test's murmur.yaml: %v", err)
	}
	var doc any
	if err := yaml.Unmarshal(yamlData, &doc); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	manifestJSON := writeJSON(t, dir, "murmur.json", doc)

	var files []string
	for _, v := range []string{"1.2.0", "1.3.0", "1.10.0", "2.0.0-rc.1"} {
		files = append(files, artifacttest.File(t, dir, "grep", v, []byte(artifacttest.EmptyModule)))
	}
	files = append(files, artifacttest.File(t, dir, "sed", "4.9.0", []byte(artifacttest.EmptyModule)))
	ix, err := github.IndexFiles(files, "acme", "v1.10.0", "any")
	if err != nil {
		t.Fatal(err)
	}
	// The same version for two platforms is one release to Renovate.
	linux, err := github.IndexFiles(files[2:3], "acme", "v1.10.0", "linux-x86_64")
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Merge(linux); err != nil {
		t.Fatal(err)
	}
	indexPath := filepath.Join(dir, "murmur-index.json")
	if err := os.WriteFile(indexPath, ix.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}

	out := query(t, manifestJSON, indexPath)
	var got struct {
		Deps []struct {
			DepName      string `json:"depName"`
			PackageName  string `json:"packageName"`
			CurrentValue string `json:"currentValue"`
			RegistryURL  string `json:"registryUrl"`
		} `json:"deps"`
		Releases map[string][]struct {
			Version string `json:"version"`
		} `json:"releases"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	type dep struct{ name, value, url string }
	var deps []dep
	for _, d := range got.Deps {
		if d.DepName != d.PackageName {
			t.Errorf("%s: packageName %q", d.DepName, d.PackageName)
		}
		deps = append(deps, dep{d.DepName, d.CurrentValue, d.RegistryURL})
	}
	want := []dep{
		{"acme/grep", "1.2.0", "https://github.com/acme/murmur-artifacts/releases/latest/download/murmur-index.json"},
		{"acme/sed", "4.9.0", "https://github.com/acme/murmur-artifacts/releases/latest/download/murmur-index.json"},
		{"murmur/hello", "0.1.0", "https://github.com/murmur-nexus/default-artifacts/releases/latest/download/murmur-index.json"},
	}
	if !reflect.DeepEqual(deps, want) {
		t.Fatalf("the manager found\n%v\nwant\n%v", deps, want)
	}
	var grep []string
	for _, r := range got.Releases["acme/grep"] {
		grep = append(grep, r.Version)
	}
	if !reflect.DeepEqual(grep, []string{"1.10.0", "1.2.0", "1.3.0", "2.0.0-rc.1"}) && !reflect.DeepEqual(grep, []string{"1.2.0", "1.3.0", "1.10.0", "2.0.0-rc.1"}) {
		t.Fatalf("the datasource found the releases %v of acme/grep", grep)
	}
	if r := got.Releases["acme/sed"]; len(r) != 1 || r[0].Version != "4.9.0" {
		t.Fatalf("acme/sed: %v", r)
	}
	if r := got.Releases["murmur/hello"]; len(r) != 0 {
		t.Fatalf("murmur/hello is not in acme's index, found %v", r)
	}
}

// needQuery skips a test that runs query.js where node or jsonata is missing (need).
func needQuery(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		need(t, "node is not on PATH")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "jsonata")); err != nil {
		need(t, "the jsonata package is not installed: run 'npm ci' in contrib/renovate")
	}
}

// query runs the murmur preset's queries (query.js) over the manifest and index files given.
func query(t *testing.T, manifestJSON, indexPath string) []byte {
	t.Helper()
	out, err := exec.Command("node", "query.js", "murmur.json", manifestJSON, indexPath).CombinedOutput()
	if err != nil {
		t.Fatalf("node query.js: %v\n%s", err, out)
	}
	return out
}

// need skips a test for lack of a tool, or fails it when CI is set, where .ci/run installs it.
func need(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s, and CI is set: .ci/run installs node and this folder's npm packages (jsonata, Node 24, Renovate)", why)
	}
	t.Skip(why)
}

func writeJSON(t *testing.T, dir, name string, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
