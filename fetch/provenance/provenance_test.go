package provenance_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/provenance"
)

// keyedBundle is the shape mur push --sign-key attaches: a key hint and a message signature over
// a digest of the artifact. Names reads nothing else of it.
func keyedBundle(t *testing.T, algorithm string, sum []byte) []byte {
	b, err := json.Marshal(map[string]any{
		"mediaType":            provenance.BundleMediaType,
		"verificationMaterial": map[string]any{"publicKey": map[string]string{"hint": "team"}},
		"messageSignature": map[string]any{
			"messageDigest": map[string]any{"algorithm": algorithm, "digest": base64.StdEncoding.EncodeToString(sum)},
			"signature":     "c2ln",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func attestation(t *testing.T, subjects ...digest.Digest) []byte {
	var subject []map[string]any
	for _, d := range subjects {
		subject = append(subject, map[string]any{"name": "grep.mur.zip", "digest": map[string]string{string(d.Algorithm()): d.Encoded()}})
	}
	payload, _ := json.Marshal(map[string]any{"_type": "https://in-toto.io/Statement/v1", "subject": subject, "predicateType": provenance.SLSAProvenanceV1})
	b, err := json.Marshal(map[string]any{"mediaType": provenance.BundleMediaType, "dsseEnvelope": map[string]any{"payload": payload, "payloadType": "application/vnd.in-toto+json"}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Names picks the candidates a pull verifies among a store's bundles: one that speaks for
// another artifact is never a candidate, whatever its shape.
func TestNamesPicksCandidates(t *testing.T) {
	zip := digest.FromString("the grep zip")
	other := digest.FromString("another artifact")
	sum := sha256.Sum256([]byte("the grep zip"))
	sha512 := make([]byte, 64)
	for _, c := range []struct {
		name        string
		bundle      []byte
		names       bool // for zip
		namesOther  bool
		needsSHA512 bool
	}{
		{"keyed, SHA-256", keyedBundle(t, "SHA2_256", sum[:]), true, false, false},
		{"keyed, for another artifact", keyedBundle(t, "SHA2_256", make([]byte, 32)), false, false, false},
		// Ed25519ph signs the SHA-512, which only Verify, given it, can hold against the zip.
		{"keyed, Ed25519ph", keyedBundle(t, "SHA2_512", sha512), true, true, true},
		{"attestation", attestation(t, zip), true, false, false},
		{"attestation, several subjects", attestation(t, other, zip), true, true, false},
		{"attestation of another artifact", attestation(t, other), false, true, false},
		{"attestation, sha512 subject", attestation(t, digest.SHA512.FromString("the grep zip")), false, false, false},
		{"neither shape", []byte(`{"mediaType":"` + provenance.BundleMediaType + `"}`), false, false, false},
		{"not JSON", []byte("the grep zip"), false, false, false},
		{"payload not JSON", []byte(`{"dsseEnvelope":{"payload":"bm9wZQ=="}}`), false, false, false},
	} {
		if got := provenance.Names(c.bundle, zip); got != c.names {
			t.Errorf("%s: Names(zip) = %v", c.name, got)
		}
		if got := provenance.Names(c.bundle, other); got != c.namesOther {
			t.Errorf("%s: Names(other) = %v", c.name, got)
		}
		if got := provenance.NeedsSHA512(c.bundle); got != c.needsSHA512 {
			t.Errorf("%s: NeedsSHA512 = %v", c.name, got)
		}
		if provenance.Names(c.bundle, "nope") {
			t.Errorf("%s: Names of a malformed digest", c.name)
		}
	}
}

// The reinstall hint names the exact version when go install can fetch it.
func TestInstallHint(t *testing.T) {
	for v, want := range map[string]string{
		"v1.2.3":                       "go install github.com/murmur-nexus/mur/cmd/...@v1.2.3 (or make build",
		"v1.2.3 (0123456789ab)":        "go install github.com/murmur-nexus/mur/cmd/...@v1.2.3 (or make build",
		"(devel)":                      "make build in mur's checkout",
		"v0.0.0-20250101-abcdef+dirty": "make build in mur's checkout",
		"unknown":                      "make build in mur's checkout",
	} {
		if got := provenance.InstallHint(v); !strings.HasPrefix(got, want) || !strings.Contains(got, "beside its own executable, else the first on PATH") {
			t.Errorf("InstallHint(%q) = %q", v, got)
		}
	}
}
