package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
)

// pull.max_decompressed is a size; of the home's and the project's values the smaller holds, so a
// cloned project can lower the bound on what its artifacts expand to but never raise it.
func TestPullMaxDecompressed(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home", "config.yaml")
	proj := filepath.Join(dir, "proj")
	projCfg := filepath.Join(proj, ".murmur", "config.yaml")
	if c, err := Load(home, proj); err != nil || c.MaxPullDecompressed != 0 {
		t.Fatalf("no files: %d, %v", c.MaxPullDecompressed, err)
	}
	write(t, home, "pull: { max_decompressed: 4GiB, jobs: 8 }\n")
	c, err := Load(home, proj)
	if err != nil || c.MaxPullDecompressed != 4<<30 || len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "pull.jobs") {
		t.Fatalf("home = %d, %v, warnings %q", c.MaxPullDecompressed, err, c.Warnings)
	}
	for project, want := range map[string]int64{
		"pull: { max_decompressed: 512M }\n": 512 << 20, // lowers the home's
		"pull: { max_decompressed: 16G }\n":  4 << 30,   // can't raise it
		"pull:\n":                            4 << 30,
	} {
		write(t, projCfg, project)
		if c, err := Load(home, proj); err != nil || c.MaxPullDecompressed != want {
			t.Errorf("project %q: %d, %v; want %d", project, c.MaxPullDecompressed, err, want)
		}
	}
	write(t, home, "")
	write(t, projCfg, "pull: { max_decompressed: 2G }\n")
	if c, err := Load(home, proj); err != nil || c.MaxPullDecompressed != 2<<30 {
		t.Errorf("only the project's: %d, %v", c.MaxPullDecompressed, err)
	}
	for content, want := range map[string]string{
		"pull: 5G\n":                         "pull must be a mapping such as { max_decompressed: 2GiB }",
		"pull: { max_decompressed: lots }\n": "pull.max_decompressed",
		"pull: { max_decompressed: [1] }\n":  "pull.max_decompressed must be a size",
	} {
		write(t, projCfg, content)
		_, err := Load(home, proj)
		if !errors.Is(err, errs.InvalidConfig) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), projCfg) {
			t.Errorf("%q: %v, want an invalid-config error naming the file and %q", content, err, want)
		}
	}
}
