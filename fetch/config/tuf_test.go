package config

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/internal/errs"
)

// The home's tuf_repositories reach the config, with a relative root resolved against the home;
// a project's are ignored with one warning: where the trusted roots come from is the home's call.
func TestTUFRepositoriesComeFromTheHomeOnly(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	proj := filepath.Join(dir, "project")
	write(t, filepath.Join(home, "config.yaml"), "tuf_repositories:\n  github: {url: http://127.0.0.1:8123/repo, root: gh-root.json}\n  public-good:\n    url: https://tuf.example.com\n    root: /etc/pg-root.json\n")
	write(t, filepath.Join(proj, ProjectFile), "tuf_repositories:\n  github: {url: https://evil.example.com, root: /tmp/evil.json}\n")
	c, err := Load(filepath.Join(home, "config.yaml"), proj)
	if err != nil {
		t.Fatal(err)
	}
	want := []provenance.TUFRepo{
		{Instance: "github", URL: "http://127.0.0.1:8123/repo", Root: filepath.Join(home, "gh-root.json")},
		{Instance: "public-good", URL: "https://tuf.example.com", Root: "/etc/pg-root.json"},
	}
	if !reflect.DeepEqual(c.Provenance.TUFRepos, want) {
		t.Fatalf("home's tuf_repositories = %+v, want %+v", c.Provenance.TUFRepos, want)
	}
	all := strings.Join(c.Warnings, "\n")
	if !strings.Contains(all, filepath.Join(proj, ProjectFile)+": tuf_repositories ignored: only the home's config.yaml chooses where the trusted roots come from") {
		t.Fatalf("no warning for the project's tuf_repositories:\n%s", all)
	}
	if c, err = Load("", proj); err != nil || c.Provenance.TUFRepos != nil {
		t.Fatalf("a project alone set tuf_repositories: %+v, %v", c.Provenance.TUFRepos, err)
	}
}

func TestTUFRepositoriesRefusals(t *testing.T) {
	for text, says := range map[string]string{
		"tuf_repositories: [x]\n": "tuf_repositories must map public-good or github to {url, root}",
		"tuf_repositories:\n  staging: {url: https://x.example, root: r}\n":          `tuf_repositories key "staging" is not an instance`,
		"tuf_repositories:\n  github: {url: https://x.example}\n":                    "tuf_repositories.github must be {url: URL, root: PATH",
		"tuf_repositories:\n  github: {url: https://x.example, root: r, extra: 1}\n": "tuf_repositories.github must be {url: URL, root: PATH",
		"tuf_repositories:\n  github: {url: http://tuf.example.com, root: r}\n":      "tuf_repositories.github.url must be an https:// URL (http:// only on loopback)",
		"tuf_repositories:\n  github: {url: ftp://127.0.0.1, root: r}\n":             "must be an https:// URL",
		"tuf_repositories:\n  github: {url: https://u:p@x.example, root: r}\n":       "must be an https:// URL",
	} {
		dir := t.TempDir()
		write(t, filepath.Join(dir, "config.yaml"), text)
		_, err := Load(filepath.Join(dir, "config.yaml"), "")
		if errs.TokenOf(err) != errs.InvalidConfig || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v, want invalid-config saying %q", text, err, says)
		}
	}
}
