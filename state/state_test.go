package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/manifest"
)

func TestValidateStoreName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"notes", true},
		{"my-capsule_2", true},
		{"a.b", true},
		{"A_b.c", true},
		{".a", false},
		{"", false},
		{"..", false},
		{".", false},
		{".hidden", false},
		{"a/b", false},
		{`a\b`, false},
		{"/abs", false},
		{"../escape", false},
		{"x\x00y", false},
		{"C:x", false},
		{`C:\x`, false},
	} {
		err := ValidateStoreName(tc.name)
		if tc.ok && err != nil {
			t.Errorf("ValidateStoreName(%q) = %v, want nil", tc.name, err)
		}
		if !tc.ok {
			if err == nil {
				t.Errorf("ValidateStoreName(%q) = nil, want an error", tc.name)
				continue
			}
			if !errors.Is(err, errs.InvalidManifest) {
				t.Errorf("ValidateStoreName(%q) token = %v, want invalid-manifest", tc.name, errs.TokenOf(err))
			}
			if !strings.Contains(err.Error(), "capabilities.state.store") {
				t.Errorf("ValidateStoreName(%q) = %q, want it to say what to fix", tc.name, err)
			}
		}
	}
}

func TestReportsTouchesNothing(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "home", "state")
	got, err := Reports(root, []Grant{{Artifact: "acme/a", Store: "notes"}, {Artifact: "acme/b", Store: "cache"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Report{
		{Artifact: "acme/a", Store: "notes", HostPath: filepath.Join(root, "notes")},
		{Artifact: "acme/b", Store: "cache", HostPath: filepath.Join(root, "cache")},
	}
	if len(got) != len(want) {
		t.Fatalf("Reports = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Reports[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := os.Lstat(filepath.Dir(root)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Reports created %s (stat err %v)", filepath.Dir(root), err)
	}
}

func TestReportsRejectsBadName(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	_, err := Reports(root, []Grant{{Artifact: "acme/ok", Store: "fine"}, {Artifact: "acme/bad", Store: "../up"}})
	if !errors.Is(err, errs.InvalidManifest) {
		t.Fatalf("Reports err = %v, want invalid-manifest", err)
	}
	if !strings.Contains(err.Error(), "acme/bad") {
		t.Errorf("error %q does not name the artifact", err)
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 0 {
		t.Errorf("Reports created %v", entries)
	}
}

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestEnsureCreatesPrivateAndReasserts(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "state")
	dir, err := Ensure(root, "notes")
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(root, "notes") {
		t.Fatalf("Ensure = %s", dir)
	}
	if m := mode(t, root); m != 0o700 {
		t.Errorf("state root mode %o, want 700", m)
	}
	if m := mode(t, dir); m != 0o700 {
		t.Errorf("store mode %o, want 700", m)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(root, "notes"); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, root); m != 0o700 {
		t.Errorf("state root mode after reassert %o, want 700", m)
	}
	if m := mode(t, dir); m != 0o700 {
		t.Errorf("store mode after reassert %o, want 700", m)
	}
	b, err := os.ReadFile(filepath.Join(dir, "data"))
	if err != nil || string(b) != "kept" {
		t.Errorf("data after second Ensure = %q, %v; want it kept", b, err)
	}
}

func TestEnsureRefusesSymlinkAndFile(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.Chmod(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "linked")); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(root, "linked"); !errors.Is(err, errs.Denied) {
		t.Errorf("Ensure through a symlink = %v, want denied", err)
	}
	if m := mode(t, outside); m != 0o755 {
		t.Errorf("the symlink target's mode changed to %o", m)
	}
	if err := os.WriteFile(filepath.Join(root, "plain"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(root, "plain"); !errors.Is(err, errs.Denied) || !strings.Contains(err.Error(), "regular file") {
		t.Errorf("Ensure over a file = %v, want denied naming a regular file", err)
	}
	if _, err := Ensure(root, ".."); !errors.Is(err, errs.InvalidManifest) {
		t.Errorf("Ensure(..) = %v, want invalid-manifest", err)
	}
}

// TestCheckCapsule: every store name a murmur.yaml gives is held to the one rule, and the refusal
// names the file and line.
func TestCheckCapsule(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, yaml, want string }{
		{"bad store slash", "name: c\ncapabilities:\n  state: { store: a/b }\n", `capabilities.state.store "a/b" is not a store name`},
		{"bad store dot", "name: c\ncapabilities:\n  state: { store: .hidden }\n", "must not start with '.'"},
		{"bad store abs", "name: c\ncapabilities:\n  state: { store: /abs }\n", "is not a store name"},
		{"bad capsule name as store", "name: .cap\ncapabilities:\n  state: {}\n", `murmur.yaml:1: name ".cap" can't name the state store`},
		{"bad artifact store", "name: c\ncapabilities: { state: { store: \"C:x\" } }\n", `capabilities.state.store "C:x" is not a store name: it must not be absolute`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := manifest.Parse([]byte(tt.yaml), "murmur.yaml")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			errtest.WantToken(t, CheckCapsule(c), errs.InvalidManifest, tt.want)
		})
	}
	c, err := manifest.Parse([]byte("name: cap\ncapabilities: { state: {} }\nartifacts:\n  - name: a/b\n    capabilities: { state: { store: cap } }\n"), "murmur.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckCapsule(c); err != nil {
		t.Fatalf("a good capsule: %v", err)
	}
}
