package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
)

// loadBoth writes the home's config.yaml and the project's .murmur/config.yaml ("" writes none)
// and loads them.
func loadBoth(t *testing.T, home, project string) *Config {
	t.Helper()
	dir := t.TempDir()
	homeFile := filepath.Join(dir, "home", "config.yaml")
	proj := filepath.Join(dir, "project")
	if home != "" {
		write(t, homeFile, home)
	}
	if project != "" {
		write(t, filepath.Join(proj, ProjectFile), project)
	}
	c, err := Load(homeFile, proj)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A project's signer_workflow narrows the home's only when it lies under it by the verifier's
// rule, a prefix that ends at a '/' or '@': release.yml-other.yml@ starts with the characters of
// release.yml, and names another workflow.
func TestSignerWorkflowNarrowsAtABoundary(t *testing.T) {
	const home = "https://github.com/acme/tools/.github/workflows/release.yml"
	for project, narrows := range map[string]bool{
		home + "@":           true,
		home + "@refs/tags/": true,
		home:                 true,
		home + "-other.yml@": false,
		home + ".evil@":      false,
		"https://github.com/acme/tools/.github/workflows/release.y": false,
		"https://github.com/acme/tools/":                            false,
	} {
		c := loadBoth(t, "scopes:\n  acme:\n    signer_workflow: "+home+"\n",
			"scopes:\n  acme:\n    signer_workflow: "+project+"\n")
		got := c.ProvenanceFor("acme").SignerWorkflow
		warned := strings.Contains(strings.Join(c.Warnings, "\n"), "does not narrow the home's "+home)
		switch {
		case narrows && (got != project || warned):
			t.Errorf("project %s: policy takes %s (warned %v), want the project's, which narrows", project, got, warned)
		case !narrows && (got != home || !warned):
			t.Errorf("project %s: policy takes %s (warned %v), want the home's and a warning", project, got, warned)
		}
	}
}

// A project's file-wide provenance: require holds for every scope, also one that has an entry of
// its own saying nothing of provenance.
func TestProjectRequireHoldsForScopesWithTheirOwnEntry(t *testing.T) {
	for _, entry := range []string{
		"    signer_workflow: https://github.com/acme/tools/.github/workflows/release.yml@\n",
		"    allow_self_hosted: false\n",
	} {
		c := loadBoth(t, "scopes:\n  acme:\n    provenance: off\n", "provenance: require\nscopes:\n  acme:\n"+entry)
		for _, scope := range []string{"acme", "other"} {
			if got := c.ProvenanceFor(scope).Mode; got != ProvenanceRequire {
				t.Errorf("project entry %q: scope %s has provenance %s, want the project's file-wide require", entry, scope, got)
			}
		}
	}
}

// The home's allow_self_hosted: true reaches the policy of its scope only, and a project's entry
// for the scope that says nothing of it leaves it as the home said.
func TestHomeAllowSelfHostedReachesThePolicy(t *testing.T) {
	const home = "scopes:\n  acme:\n    allow_self_hosted: true\n"
	for project, want := range map[string]bool{
		"": true,
		"scopes:\n  acme:\n    signer_workflow: https://github.com/acme/tools/.github/workflows/release.yml@\n": true,
		"provenance: require\n":                            true,
		"scopes:\n  acme:\n    allow_self_hosted: false\n": false,
	} {
		c := loadBoth(t, home, project)
		if got := c.ProvenanceFor("acme").AllowSelfHosted; got != want {
			t.Errorf("project %q: allow_self_hosted %v, want %v", project, got, want)
		}
		if c.ProvenanceFor("other").AllowSelfHosted {
			t.Errorf("project %q: a scope the home says nothing of allows self-hosted runners", project)
		}
	}
}

// A scope named twice under scopes: is refused, naming the line, rather than the second entry
// silently replacing the first (a require followed by an off).
func TestDuplicateScopesKeyIsRefused(t *testing.T) {
	for _, home := range []bool{true, false} {
		dir := t.TempDir()
		file := filepath.Join(dir, ".murmur", "config.yaml")
		homeFile := ""
		if home {
			file = filepath.Join(dir, "config.yaml")
			homeFile = file
		}
		write(t, file, "scopes:\n  acme:\n    provenance: require\n  acme:\n    provenance: off\n")
		_, err := Load(homeFile, dir)
		if !errors.Is(err, errs.InvalidConfig) || !strings.Contains(err.Error(), "line 4: scopes.acme appears twice; keep one") || !strings.Contains(err.Error(), file) {
			t.Errorf("home %v: %v, want invalid-config naming %s line 4", home, err, file)
		}
	}
}

// signer_workflow must name at least OWNER/REPO/: a prefix with one slash after the host stops
// inside a repository name, and would admit every repository that starts the same.
func TestSignerWorkflowNeedsOwnerAndRepository(t *testing.T) {
	for value, ok := range map[string]bool{
		"https://github.com/acme/tools/":                            true,
		"https://github.com/acme/tools/.github/workflows/x.yml@":    true,
		"https://github.com/acme/tools":                             false,
		"https://github.com/acme/":                                  false,
		"https://github.com/acme":                                   false,
		"https://github.com/":                                       false,
		"https://gitlab.com/acme/tools/.github/workflows/x.yml@":    false,
		"acme/tools/.github/workflows/release.yml@refs/tags/v1.2.0": false,
	} {
		dir := t.TempDir()
		homeFile := filepath.Join(dir, "config.yaml")
		write(t, homeFile, "scopes:\n  acme:\n    signer_workflow: "+value+"\n")
		c, err := Load(homeFile, "")
		switch {
		case ok && err != nil:
			t.Errorf("%s refused: %v", value, err)
		case ok && c.ProvenanceFor("acme").SignerWorkflow != value:
			t.Errorf("%s: policy has %q", value, c.ProvenanceFor("acme").SignerWorkflow)
		case !ok && (!errors.Is(err, errs.InvalidConfig) || !strings.Contains(err.Error(), "line 3: scopes.acme.signer_workflow must be a workflow URL prefix such as https://github.com/OWNER/REPO/")):
			t.Errorf("%s: %v, want invalid-config naming the key", value, err)
		}
	}
}
