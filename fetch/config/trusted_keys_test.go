package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// indent puts text under a YAML block scalar at the given depth.
func indent(text, pad string) string {
	return pad + strings.ReplaceAll(strings.TrimSpace(text), "\n", "\n"+pad)
}

// A trusted key is given as a file of the home's or inline, its hint computed when omitted and
// accepted in hex or base64 when given; a hint that names another key fails config.yaml at
// once, naming both, rather than every pull later with "no trusted_keys entry names".
func TestTrustedKeysPEMFileAndHints(t *testing.T) {
	_, pub, hexHint, err := provenance.GenerateKey(provenance.KeyP256)
	if err != nil {
		t.Fatal(err)
	}
	_, otherPub, otherHint, _ := provenance.GenerateKey(provenance.KeyEd25519)
	p, _ := provenance.ParsePublicKey(pub)
	fp, _ := provenance.Fingerprint(p)
	_, b64Hint := provenance.HintForms(fp)
	dir := t.TempDir()
	homeDir := filepath.Join(dir, "home")
	write(t, filepath.Join(homeDir, "keys", "team.pub"), string(pub))
	write(t, filepath.Join(dir, "abs.pub"), string(otherPub))
	load := func(text string) (*Config, error) {
		write(t, filepath.Join(homeDir, "config.yaml"), text)
		return Load(filepath.Join(homeDir, "config.yaml"), "")
	}
	good := map[string]struct {
		text, scope, hint, pem string
	}{
		"relative pem_file, computed hint": {"scopes:\n  acme:\n    trusted_keys:\n      - pem_file: keys/team.pub\n", "acme", hexHint, string(pub)},
		"absolute pem_file":                {"trusted_keys:\n  - pem_file: " + filepath.Join(dir, "abs.pub") + "\n", "any", otherHint, string(otherPub)},
		"hex hint":                         {"trusted_keys:\n  - {pem_file: keys/team.pub, hint: " + hexHint + "}\n", "x", hexHint, string(pub)},
		"base64 hint, cosign's":            {"trusted_keys:\n  - {pem_file: keys/team.pub, hint: \"" + b64Hint + "\"}\n", "x", b64Hint, string(pub)},
		"inline pem, computed hint":        {"trusted_keys:\n  - pem: |\n" + indent(string(pub), "      ") + "\n", "x", hexHint, string(pub)},
	}
	for name, c := range good {
		t.Run(name, func(t *testing.T) {
			cfg, err := load(c.text)
			if err != nil {
				t.Fatal(err)
			}
			keys := cfg.ProvenanceFor(c.scope).Trust.Keys
			if len(keys) != 1 || keys[0].Hint != c.hint || strings.TrimSpace(keys[0].PEM) != strings.TrimSpace(c.pem) {
				t.Fatalf("keys = %+v, want hint %s and the key's PEM", keys, c.hint)
			}
		})
	}
	secret := "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIKaleWdVnn/DLssY9Y4K74HDQLRSQsYCZC46npUKaTWP\n-----END PRIVATE KEY-----\n"
	write(t, filepath.Join(homeDir, "keys", "team.key"), secret)
	write(t, filepath.Join(homeDir, "keys", "big.pub"), strings.Repeat("A", maxKeyFile+1))
	if err := os.Symlink(filepath.Join(homeDir, "keys", "team.key"), filepath.Join(homeDir, "keys", "link.pub")); err != nil {
		t.Fatal(err)
	}
	bad := map[string]struct {
		text string
		says []string
	}{
		"another key's hint": {"trusted_keys:\n  - {pem_file: keys/team.pub, hint: " + otherHint + "}\n",
			[]string{"line 2", "trusted_keys[0] (" + filepath.Join(homeDir, "keys", "team.pub") + ")", `its hint "` + otherHint + `" does not name this key`, hexHint + " (hex)", b64Hint + " (base64)", "remove the hint line"}},
		"a made-up hint":  {"scopes:\n  acme:\n    trusted_keys:\n      - {pem_file: keys/team.pub, hint: team}\n", []string{"scopes.acme.trusted_keys[0]", `hint "team" does not name this key`}},
		"the private key": {"trusted_keys:\n  - pem_file: keys/team.key\n", []string{"private key, where the public key is needed"}},
		"a symlink":       {"trusted_keys:\n  - pem_file: keys/link.pub\n", []string{"is a symlink", "regular file"}},
		"too big":         {"trusted_keys:\n  - pem_file: keys/big.pub\n", []string{"over 65536 bytes, far more than a public key holds"}},
		"missing":         {"trusted_keys:\n  - pem_file: keys/gone.pub\n", []string{"keys/gone.pub can't be read", "no such file", "home's folder"}},
		"both":            {"trusted_keys:\n  - {pem_file: keys/team.pub, pem: x}\n", []string{"once"}},
		"neither":         {"trusted_keys:\n  - {hint: " + hexHint + "}\n", []string{"pem_file: KEY.pub or as pem"}},
		"unknown key":     {"trusted_keys:\n  - {pemfile: keys/team.pub}\n", []string{"unknown key trusted_keys[0].pemfile"}},
		"not a string":    {"trusted_keys:\n  - {pem_file: [a, b]}\n", []string{"trusted_keys[0].pem_file must be a string"}},
	}
	for name, c := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := load(c.text)
			errtest.WantToken(t, err, errs.InvalidConfig, c.says...)
			if strings.Contains(err.Error(), "MC4CAQAw") || strings.Contains(err.Error(), "AAAAAAAA") {
				t.Fatalf("the error quotes the file: %v", err)
			}
		})
	}
}

// A project's trusted_keys are never read: its pem_file is not opened (it could name any file
// of the user's), and its keys are not parsed, only reported as ignored.
func TestProjectTrustedKeysAreNeverRead(t *testing.T) {
	dir := t.TempDir()
	proj := filepath.Join(dir, "proj")
	write(t, filepath.Join(proj, ProjectFile), "trusted_keys:\n  - pem_file: /etc/shadow\nscopes:\n  acme:\n    trusted_keys:\n      - {pem_file: ../../nowhere.pub, hint: nonsense}\n")
	c, err := Load("", proj)
	if err != nil {
		t.Fatalf("a project's key file was read: %v", err)
	}
	if keys := c.ProvenanceFor("acme").Trust.Keys; len(keys) != 0 {
		t.Fatalf("a project's keys are trusted: %+v", keys)
	}
	all := strings.Join(c.Warnings, "\n")
	for _, w := range []string{"trusted_keys ignored", "scopes.acme.trusted_keys ignored"} {
		if !strings.Contains(all, w) {
			t.Errorf("no warning says %q:\n%s", w, all)
		}
	}
}
