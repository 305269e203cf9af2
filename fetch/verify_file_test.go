package fetch_test

import (
	"context"
	"crypto/sha512"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// VerifyFile checks one file against one bundle, as a publisher does before a release: the
// file's digest is the subject, and the signer the one asked for, by ids or by key.
func TestVerifyFile(t *testing.T) {
	dir := t.TempDir()
	put := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	zip := []byte("the grep zip, packed for release")
	file := put("grep-1.2.0.mur.zip", zip)
	altered := put("altered.mur.zip", append(append([]byte{}, zip...), 'x'))
	ca := provenancetest.NewCA(t, "GitHub, Inc.")
	attestation := put("att.json", ca.Mint(t, provenancetest.Statement(digest.FromBytes(zip).Encoded(), provenance.SLSAProvenanceV1), provenancetest.GoodLeaf()))
	local := &sigstore.Local{Roots: sigstore.NewRoots(ca.Material())}
	for _, kind := range []string{provenance.KeyP256, provenance.KeyEd25519} {
		priv, pub, hint, err := provenance.GenerateKey(kind)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha512.Sum512(zip)
		b, _, err := sigstore.SignDigest(priv, digest.FromBytes(zip), sum[:])
		if err != nil {
			t.Fatal(err)
		}
		keyed := put(kind+".sigstore.json", b)
		res, err := fetch.VerifyFile(context.Background(), fetch.VerifyFileInput{File: file, Bundle: keyed, Key: pub, KeyFile: "team.pub", Verifier: local})
		if err != nil || res.Provenance == nil || res.Provenance.Kind != provenance.KindKey || res.Provenance.Signer != hint || res.Digest != digest.FromBytes(zip) {
			t.Fatalf("%s: %+v, %v", kind, res, err)
		}
		_, err = fetch.VerifyFile(context.Background(), fetch.VerifyFileInput{File: altered, Bundle: keyed, Key: pub, KeyFile: "team.pub", Verifier: local})
		errtest.WantToken(t, err, errs.ProvenanceMismatch, "altered.mur.zip")
	}
	_, otherPub, otherHint, _ := provenance.GenerateKey(provenance.KeyP256)
	priv, _, hint, _ := provenance.GenerateKey(provenance.KeyP256)
	b, _, _ := sigstore.SignDigest(priv, digest.FromBytes(zip), nil)
	keyed := put("keyed.json", b)
	_, err := fetch.VerifyFile(context.Background(), fetch.VerifyFileInput{File: file, Bundle: keyed, Key: otherPub, KeyFile: "other.pub", Verifier: local})
	errtest.WantToken(t, err, errs.ProvenanceUnverifiable, "is signed by key "+hint+", not by the key of other.pub ("+otherHint+")")

	good := fetch.VerifyFileInput{File: file, Bundle: attestation, OwnerID: 1234567, RepoID: 7654321, Verifier: local,
		SignerWorkflow: "https://github.com/acme/murmur-tools/.github/workflows/release.yml@"}
	res, err := fetch.VerifyFile(context.Background(), good)
	if err != nil || res.Provenance.Kind != provenance.KindGitHub || res.Provenance.RepoID != 7654321 {
		t.Fatalf("attestation: %+v, %v", res, err)
	}
	if s := res.String(); !strings.Contains(s, "attested by "+provenancetest.GoodLeaf().SAN+", repository 7654321 (acme/murmur-tools), owner 1234567") {
		t.Fatalf("line: %s", s)
	}
	bad := map[string]struct {
		change func(*fetch.VerifyFileInput)
		token  errs.Token
		says   string
	}{
		"another owner":      {func(in *fetch.VerifyFileInput) { in.OwnerID = 55 }, errs.ProvenanceMismatch, "--owner-id and --repo-id ask for owner 55"},
		"another repository": {func(in *fetch.VerifyFileInput) { in.RepoID = 1 }, errs.ProvenanceMismatch, "repository 1"},
		"altered file":       {func(in *fetch.VerifyFileInput) { in.File = altered }, errs.ProvenanceMismatch, "another artifact"},
		"another workflow": {func(in *fetch.VerifyFileInput) {
			in.SignerWorkflow = "https://github.com/acme/murmur-tools/.github/workflows/x.yml"
		}, errs.ProvenanceMismatch, "--signer-workflow"},
		"one id":        {func(in *fetch.VerifyFileInput) { in.RepoID = 0 }, errs.Usage, "both ids"},
		"ids and a key": {func(in *fetch.VerifyFileInput) { in.Key = []byte("k") }, errs.Usage, "not both"},
		"a key for the attestation": {func(in *fetch.VerifyFileInput) { in.OwnerID, in.RepoID, in.SignerWorkflow, in.Key = 0, 0, "", otherPub },
			errs.Usage, "is a GitHub attestation"},
		"ids for a keyed bundle": {func(in *fetch.VerifyFileInput) { in.Bundle = keyed; in.SignerWorkflow = "" }, errs.Usage, "check it with --key"},
		"no signer named":        {func(in *fetch.VerifyFileInput) { in.OwnerID, in.RepoID, in.SignerWorkflow = 0, 0, "" }, errs.Usage, "say who must have signed"},
		"workflow with a key":    {func(in *fetch.VerifyFileInput) { in.OwnerID, in.RepoID, in.Key = 0, 0, otherPub }, errs.Usage, "--signer-workflow applies"},
		"a private key": {func(in *fetch.VerifyFileInput) {
			in.OwnerID, in.RepoID, in.SignerWorkflow, in.Bundle, in.Key = 0, 0, "", keyed, priv
		}, errs.Usage, "private key, where the public key is needed"},
		"no file":            {func(in *fetch.VerifyFileInput) { in.File = filepath.Join(dir, "gone.mur.zip") }, errs.NotFound, "does not exist"},
		"no bundle":          {func(in *fetch.VerifyFileInput) { in.Bundle = filepath.Join(dir, "gone.json") }, errs.NotFound, "does not exist"},
		"a folder":           {func(in *fetch.VerifyFileInput) { in.File = dir }, errs.Usage, "not a regular file"},
		"the embedded roots": {func(in *fetch.VerifyFileInput) { in.Verifier = &sigstore.Local{} }, errs.ProvenanceUnverifiable, "update mur or set trusted_root"},
	}
	for name, c := range bad {
		t.Run(name, func(t *testing.T) {
			in := good
			c.change(&in)
			res, err := fetch.VerifyFile(context.Background(), in)
			errtest.WantToken(t, err, c.token, c.says)
			if res.Provenance != nil {
				t.Fatalf("a failed check reports provenance: %+v", res.Provenance)
			}
		})
	}
}
