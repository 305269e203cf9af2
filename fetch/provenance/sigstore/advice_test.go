package sigstore

import (
	"path/filepath"
	"strings"
	"testing"
)

// Every failure that advises a trusted_root or trusted_keys sends the user to the home's
// config.yaml, where trust is set: a project's .murmur/config.yaml can't add either.
func TestTrustAdviceNamesTheHome(t *testing.T) {
	dir := t.TempDir()
	_, missing := LoadRoots(filepath.Join(dir, "nowhere.json"))
	_, folder := LoadRoots(dir)
	priv := ecdsaPEM(t)
	b, _, err := SignDigest(priv, zipDigest, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, unknownKey := Verify(b, zipDigest, acmeExpect(), mustEmbedded(t))
	otherPub, err := PublicKeyPEM(ecdsaPEM(t))
	if err != nil {
		t.Fatal(err)
	}
	others, err := mustEmbedded(t).WithKeys([]TrustedKey{{PEM: otherPub}})
	if err != nil {
		t.Fatal(err)
	}
	_, rotated := Verify(b, zipDigest, acmeExpect(), others)
	for name, err := range map[string]error{"missing trusted_root": missing, "trusted_root a folder": folder, "unknown key": unknownKey, "rotated key": rotated} {
		if err == nil || !strings.Contains(err.Error(), "$MURMUR_HOME/config.yaml") || strings.Contains(err.Error(), ".murmur/config.yaml") || strings.Contains(err.Error(), "your config.yaml") {
			t.Errorf("%s: %v\nwant it to name $MURMUR_HOME/config.yaml, and no other config.yaml", name, err)
		}
	}
}
