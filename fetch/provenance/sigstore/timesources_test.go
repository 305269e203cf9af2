package sigstore

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"

	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/internal/errs"
)

// Corruptions of what a bundle carries, each one byte, as an attacker editing a bundle would.
func flipRootHash(pb *protobundle.Bundle) {
	pb.VerificationMaterial.TlogEntries[0].InclusionProof.RootHash[3] ^= 0x01
}

func flipSET(pb *protobundle.Bundle) {
	set := pb.VerificationMaterial.TlogEntries[0].InclusionPromise.SignedEntryTimestamp
	set[len(set)-3] ^= 0x01
}

// flipImprint changes the digest of the signature that the first timestamp stamps, inside the
// signed part of the timestamp.
func flipImprint(t *testing.T) func(*protobundle.Bundle) {
	return func(pb *protobundle.Bundle) {
		ts := pb.VerificationMaterial.TimestampVerificationData.Rfc3161Timestamps[0].SignedTimestamp
		sum := sha256.Sum256(provenancetest.Signature(pb))
		i := bytes.Index(ts, sum[:])
		if i < 0 {
			t.Fatal("flipImprint: the timestamp does not hold the signature's digest")
		}
		ts[i+5] ^= 0x01
	}
}

type proofCase struct {
	name   string
	bundle []byte
	token  errs.Token // "" verifies
	says   string
}

func checkProofCases(t *testing.T, roots *Roots, cases []proofCase) {
	t.Helper()
	for _, c := range cases {
		want := acmeExpect()
		_, err := Verify(c.bundle, zipDigest, want, roots)
		switch {
		case c.token == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.token == "":
		case errs.TokenOf(err) != c.token || !strings.Contains(errs.Message(err), c.says):
			t.Errorf("%s: %v\nwant %s saying %q", c.name, err, c.token, c.says)
		case strings.Contains(err.Error(), "%!"), strings.Contains(err.Error(), ".murmur/config.yaml"):
			t.Errorf("%s: %v\nquotes a broken format or sends the user to the project's config", c.name, err)
		case c.token == errs.ProvenanceUnverifiable && !strings.Contains(err.Error(), "$MURMUR_HOME/config.yaml"):
			t.Errorf("%s: %v\ndoes not name $MURMUR_HOME/config.yaml, where trust is set", c.name, err)
		}
	}
}

// A keyed bundle's transparency-log entries and signed timestamps are verified when it carries
// them, each on its own: a corrupted inclusion proof, SET or timestamp is a mismatch (the bundle
// was changed), an entry or timestamp of a log or authority the roots do not hold is unverifiable.
func TestKeyedBundleProofsAreVerified(t *testing.T) {
	ca := provenancetest.NewCA(t, "sigstore.dev")
	stranger := provenancetest.NewCA(t, "sigstore.dev")
	priv := ecdsaPEM(t)
	b, _, err := SignDigest(priv, zipDigest, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := PublicKeyPEM(priv)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := NewRoots(ca.Material()).WithKeys([]TrustedKey{{PEM: pub}})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := SignDigest(priv, otherDigest, nil)
	if err != nil {
		t.Fatal(err)
	}
	logged, stamped := ca.LogKeyed(t, b, pub), ca.Stamp(t, b)
	edit := func(b []byte, f func(*protobundle.Bundle)) []byte { return provenancetest.Edit(t, b, f) }
	checkProofCases(t, roots, []proofCase{
		{name: "logged", bundle: logged},
		{name: "stamped", bundle: stamped},
		{name: "logged and stamped", bundle: ca.Stamp(t, logged)},
		{"corrupted inclusion proof", edit(logged, flipRootHash), errs.ProvenanceMismatch, "the transparency-log entry of acme/grep@1.2.0 does not verify: its inclusion proof does not lead to the root that the log's checkpoint signs"},
		{"corrupted SET", edit(logged, flipSET), errs.ProvenanceMismatch, "the signed entry timestamp (SET) of the transparency-log entry of acme/grep@1.2.0 does not verify"},
		{"a good entry and a corrupted one", edit(ca.LogKeyed(t, logged, pub), func(pb *protobundle.Bundle) {
			pb.VerificationMaterial.TlogEntries[1].LogIndex = 1
			pb.VerificationMaterial.TlogEntries[1].InclusionPromise = pb.VerificationMaterial.TlogEntries[0].InclusionPromise
		}), errs.ProvenanceMismatch, "(SET)"},
		{"the entry of another signature", edit(b, func(pb *protobundle.Bundle) {
			var o protobundle.Bundle
			provenancetest.Edit(t, ca.LogKeyed(t, other, pub), func(ob *protobundle.Bundle) { o.VerificationMaterial = ob.VerificationMaterial })
			pb.VerificationMaterial.TlogEntries = o.VerificationMaterial.TlogEntries
		}), errs.ProvenanceMismatch, "does not verify"},
		{"an entry of a log the roots do not hold", stranger.LogKeyed(t, b, pub), errs.ProvenanceUnverifiable, "carries an entry of transparency log"},
		{"corrupted timestamp", edit(stamped, flipImprint(t)), errs.ProvenanceMismatch, "a signed timestamp of the provenance of acme/grep@1.2.0 does not verify"},
		{"a timestamp of another signature", edit(b, func(pb *protobundle.Bundle) {
			var o protobundle.Bundle
			provenancetest.Edit(t, ca.Stamp(t, other), func(ob *protobundle.Bundle) { o.VerificationMaterial = ob.VerificationMaterial })
			pb.VerificationMaterial.TimestampVerificationData = o.VerificationMaterial.TimestampVerificationData
		}), errs.ProvenanceMismatch, "it was changed, or it stamps another signature"},
		{"a timestamp by an authority the roots do not hold", stranger.Stamp(t, b), errs.ProvenanceUnverifiable, "by a timestamp authority that"},
	})
}

// An attestation's proofs are told apart the same way: a changed SET or timestamp is a mismatch,
// not a root mur lacks; a timestamp by an authority no root holds is unverifiable; a root of the
// user's own is named by its file, never as public-good; and sigstore-go's "%!w(<nil>)" never
// reaches the message.
func TestAttestationProofFailuresAreToldApart(t *testing.T) {
	gh, pg := provenancetest.NewCA(t, "GitHub, Inc."), provenancetest.NewCA(t, "sigstore.dev")
	stmt := provenancetest.Statement(zipDigest.Encoded(), SLSAProvenanceV1)
	ghBundle, pgBundle := gh.Mint(t, stmt, provenancetest.GoodLeaf()), pg.Mint(t, stmt, provenancetest.GoodLeaf())
	edit := func(b []byte, f func(*protobundle.Bundle)) []byte { return provenancetest.Edit(t, b, f) }
	unstamped := edit(ghBundle, func(pb *protobundle.Bundle) { pb.VerificationMaterial.TimestampVerificationData = nil })
	noTime := provenancetest.GoodLeaf()
	noTime.NoTimestamp = true

	dir := t.TempDir()
	custom := filepath.Join(dir, "pg-root.json")
	if err := os.WriteFile(custom, pg.TrustedRootJSON(t), 0o644); err != nil {
		t.Fatal(err)
	}
	fileRoots, err := LoadRoots(custom)
	if err != nil {
		t.Fatal(err)
	}
	roots := NewRoots(gh.Material())
	roots.instances = append(roots.instances, fileRoots.instances...)
	checkProofCases(t, roots, []proofCase{
		{name: "github-style", bundle: ghBundle},
		{name: "public-good-style", bundle: pgBundle},
		{"corrupted timestamp", edit(ghBundle, flipImprint(t)), errs.ProvenanceMismatch, "a signed timestamp of the provenance of acme/grep@1.2.0 does not verify"},
		{"a timestamp by an authority the roots do not hold", provenancetest.NewCA(t, "GitHub, Inc.").Stamp(t, unstamped), errs.ProvenanceUnverifiable, "by a timestamp authority that"},
		{"corrupted SET", edit(pgBundle, flipSET), errs.ProvenanceMismatch, "(SET)"},
		{"corrupted inclusion proof", edit(pgBundle, flipRootHash), errs.ProvenanceMismatch, "transparency-log entry of acme/grep@1.2.0 does not verify"},
		{"no timestamp", gh.Mint(t, stmt, noTime), errs.ProvenanceUnverifiable, "threshold not met for verified signed timestamps: 0 < 1; update mur"},
		{"no log entry, against the user's own root", pg.Mint(t, stmt, noTime), errs.ProvenanceUnverifiable, "can't be verified against trusted_root " + custom + ": "},
	})
	_, err = Verify(pg.Mint(t, stmt, noTime), zipDigest, acmeExpect(), roots)
	if err == nil || strings.Contains(err.Error(), "public-good") {
		t.Errorf("a failure against the user's own root: %v; it must name the file, not public-good", err)
	}
}
