// Package provenancetest mints Sigstore bundles for tests: a small Fulcio of its own whose
// leaf certificates carry GitHub's OIDs (owner id 1.3.6.1.4.1.57264.1.17, repository id …1.15,
// runner environment, issuer, SAN workflow), signed with sigstore-go's sign package, and
// timestamped (GitHub's instance) or logged with an embedded SCT (public good) by sigstore-go's
// VirtualSigstore. Nothing touches the network.
package provenancetest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"net/url"
	"testing"
	"time"

	ct "github.com/google/certificate-transparency-go"
	cttls "github.com/google/certificate-transparency-go/tls"
	ctx509util "github.com/google/certificate-transparency-go/x509util"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/murmur-nexus/mur/fetch/provenance"
)

// CA is a small Fulcio of the tests' own: a root and an intermediate that issue leaf
// certificates with GitHub's OIDs, and a VirtualSigstore that timestamps and logs what they sign.
type CA struct {
	org       string // "GitHub, Inc." mints GitHub-instance bundles, anything else public-good ones
	root      *x509.Certificate
	inter     *x509.Certificate
	interKey  *ecdsa.PrivateKey
	vs        *ca.VirtualSigstore
	ctKey     *ecdsa.PrivateKey
	publicish bool
}

func NewCA(t testing.TB, org string) *CA {
	t.Helper()
	rootKey := mustKey(t)
	now := time.Now()
	rootTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{Organization: []string{org}, CommonName: org + " test root"},
		NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, SubjectKeyId: skid(t, rootKey.Public()),
	}
	rootCert := mustCert(t, rootTmpl, rootTmpl, rootKey.Public(), rootKey)
	interKey := mustKey(t)
	interTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{Organization: []string{org}, CommonName: org + " test intermediate"},
		NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		SubjectKeyId: skid(t, interKey.Public()),
	}
	inter := mustCert(t, interTmpl, rootCert, interKey.Public(), rootKey)
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	return &CA{org: org, root: rootCert, inter: inter, interKey: interKey, vs: vs, ctKey: mustKey(t), publicish: org != "GitHub, Inc."}
}

func mustKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func skid(t testing.TB, pub crypto.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(der)
	return s[:20]
}

func mustCert(t testing.TB, tmpl, parent *x509.Certificate, pub crypto.PublicKey, key crypto.Signer) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Material is the trust a test verifies against: this CA, the VirtualSigstore's TSA and Rekor
// log, and this CA's own CT log. A GitHub-style instance has no logs at all.
func (c *CA) Material() root.TrustedMaterial {
	m := &testMaterial{cas: []root.CertificateAuthority{&root.FulcioCertificateAuthority{
		Root: c.root, Intermediates: []*x509.Certificate{c.inter}, URI: "https://fulcio.test",
	}}, tsas: c.vs.TimestampingAuthorities()}
	if c.publicish {
		// The VirtualSigstore's log carries its id as hex text, which a trusted_root.json would
		// hold as the bytes of that text; a real log's id is the raw digest, as the map's key
		// says in hex.
		m.rekor = map[string]*root.TransparencyLog{}
		for id, l := range c.vs.RekorLogs() {
			raw, err := hex.DecodeString(id)
			if err != nil {
				panic(err)
			}
			l.ID = raw
			m.rekor[id] = l
		}
		der, _ := x509.MarshalPKIXPublicKey(c.ctKey.Public())
		id := sha256.Sum256(der)
		m.ct = map[string]*root.TransparencyLog{hex.EncodeToString(id[:]): {
			BaseURL: "https://ct.test", ID: id[:], HashFunc: crypto.SHA256, PublicKey: c.ctKey.Public(),
			ValidityPeriodStart: time.Now().Add(-time.Hour),
		}}
	}
	return m
}

type testMaterial struct {
	root.BaseTrustedMaterial
	cas   []root.CertificateAuthority
	tsas  []root.TimestampingAuthority
	rekor map[string]*root.TransparencyLog
	ct    map[string]*root.TransparencyLog
}

func (m *testMaterial) FulcioCertificateAuthorities() []root.CertificateAuthority { return m.cas }
func (m *testMaterial) TimestampingAuthorities() []root.TimestampingAuthority     { return m.tsas }
func (m *testMaterial) RekorLogs() map[string]*root.TransparencyLog               { return m.rekor }
func (m *testMaterial) CTLogs() map[string]*root.TransparencyLog                  { return m.ct }

// Leaf is what the minted certificate says: Fulcio's GitHub Actions OIDs.
type Leaf struct {
	SAN, Issuer, Runner, OwnerID, RepoID, RepoURI, Commit string
	NotBefore, NotAfter                                   time.Time
	NoTimestamp                                           bool // mint without any time source
}

func GoodLeaf() Leaf {
	return Leaf{
		SAN:     "https://github.com/acme/murmur-tools/.github/workflows/release.yml@refs/tags/v1.2.0",
		Issuer:  provenance.GitHubActionsIssuer,
		Runner:  "github-hosted",
		OwnerID: "1234567", RepoID: "7654321",
		RepoURI: "https://github.com/acme/murmur-tools",
		Commit:  "0123456789abcdef0123456789abcdef01234567",
	}
}

func derString(t testing.TB, s string) []byte {
	b, err := asn1.MarshalWithParams(s, "utf8")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func oid(n int) asn1.ObjectIdentifier { return asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, n} }

// certProvider issues the leaf for sign.Bundle's ephemeral key, the way Fulcio does.
type certProvider struct {
	t  testing.TB
	c  *CA
	lf Leaf
}

func (p certProvider) GetCertificate(_ context.Context, kp sign.Keypair, _ *sign.CertificateProviderOptions) ([]byte, error) {
	t, c, lf := p.t, p.c, p.lf
	now := time.Now()
	if lf.NotBefore.IsZero() {
		lf.NotBefore, lf.NotAfter = now.Add(-time.Minute), now.Add(10*time.Minute)
	}
	var exts []pkix.Extension
	add := func(n int, v string) {
		if v != "" {
			exts = append(exts, pkix.Extension{Id: oid(n), Value: derString(t, v)})
		}
	}
	add(8, lf.Issuer)
	add(9, lf.SAN)
	add(11, lf.Runner)
	add(12, lf.RepoURI)
	add(13, lf.Commit)
	add(15, lf.RepoID)
	add(17, lf.OwnerID)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), NotBefore: lf.NotBefore, NotAfter: lf.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		ExtraExtensions: exts, AuthorityKeyId: c.inter.SubjectKeyId,
	}
	tmpl.URIs = append(tmpl.URIs, mustURL(t, lf.SAN))
	pub := kp.GetPublicKey()
	if c.publicish {
		// An embedded SCT is signed over the precertificate: the same TBS without the SCT list.
		pre := mustCert(t, tmpl, c.inter, pub, c.interKey)
		sct := ct.SignedCertificateTimestamp{SCTVersion: ct.V1, Timestamp: uint64(now.UnixMilli())}
		der, _ := x509.MarshalPKIXPublicKey(c.ctKey.Public())
		sct.LogID = ct.LogID{KeyID: sha256.Sum256(der)}
		entry := ct.LogEntry{Leaf: ct.MerkleTreeLeaf{Version: ct.V1, LeafType: ct.TimestampedEntryLeafType,
			TimestampedEntry: &ct.TimestampedEntry{Timestamp: sct.Timestamp, EntryType: ct.PrecertLogEntryType,
				PrecertEntry: &ct.PreCert{IssuerKeyHash: sha256.Sum256(c.inter.RawSubjectPublicKeyInfo), TBSCertificate: pre.RawTBSCertificate}}}}
		input, err := ct.SerializeSCTSignatureInput(sct, entry)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(input)
		sig, err := ecdsa.SignASN1(rand.Reader, c.ctKey, h[:])
		if err != nil {
			t.Fatal(err)
		}
		sct.Signature = ct.DigitallySigned{Algorithm: cttls.SignatureAndHashAlgorithm{Hash: cttls.SHA256, Signature: cttls.ECDSA}, Signature: sig}
		list, err := ctx509util.MarshalSCTsIntoSCTList([]*ct.SignedCertificateTimestamp{&sct})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := cttls.Marshal(*list)
		if err != nil {
			t.Fatal(err)
		}
		val, _ := asn1.Marshal(raw)
		tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, pkix.Extension{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}, Value: val})
	}
	return mustCert(t, tmpl, c.inter, pub, c.interKey).Raw, nil
}

// Statement is an in-toto statement for one subject digest.
func Statement(subject string, predicateType string) []byte {
	st := map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": "grep-1.2.0.mur.zip", "digest": map[string]string{"sha256": subject}}},
		"predicateType": predicateType,
		"predicate":     map[string]any{"buildDefinition": map[string]any{"buildType": "https://actions.github.io/buildtypes/workflow/v1"}},
	}
	b, _ := json.Marshal(st)
	return b
}

// Mint signs stmt with sigstore-go's sign package and a fresh leaf, then adds what the
// instance needs: a signed timestamp (GitHub) or a Rekor entry with an inclusion proof
// (public good, whose SCT is already in the leaf).
func (c *CA) Mint(t testing.TB, stmt []byte, lf Leaf) []byte {
	t.Helper()
	kp, err := sign.NewEphemeralKeypair(nil)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := sign.Bundle(&sign.DSSEData{Data: stmt, PayloadType: "application/vnd.in-toto+json"}, kp,
		sign.BundleOptions{CertificateProvider: certProvider{t: t, c: c, lf: lf}})
	if err != nil {
		t.Fatal(err)
	}
	env := pb.GetDsseEnvelope()
	sig := env.GetSignatures()[0].GetSig()
	if !lf.NoTimestamp {
		if c.publicish {
			leafCert, err := x509.ParseCertificate(pb.GetVerificationMaterial().GetCertificate().GetRawBytes())
			if err != nil {
				t.Fatal(err)
			}
			e := &dsse.Envelope{PayloadType: env.GetPayloadType(), Payload: base64.StdEncoding.EncodeToString(env.GetPayload()),
				Signatures: []dsse.Signature{{Sig: base64.StdEncoding.EncodeToString(sig)}}}
			entry, err := c.vs.GenerateTlogEntry(leafCert, e, sig, time.Now().Unix(), true)
			if err != nil {
				t.Fatal(err)
			}
			tle := entry.TransparencyLogEntry()
			tle.KindVersion = &protorekor.KindVersion{Kind: "dsse", Version: "0.0.1"}
			set, err := c.vs.RekorSignPayload(tlog.RekorPayload{LogID: hex.EncodeToString(tle.GetLogId().GetKeyId()),
				IntegratedTime: tle.GetIntegratedTime(), LogIndex: tle.GetLogIndex(), Body: base64.StdEncoding.EncodeToString(tle.GetCanonicalizedBody())})
			if err != nil {
				t.Fatal(err)
			}
			tle.InclusionPromise = &protorekor.InclusionPromise{SignedEntryTimestamp: set}
			pb.VerificationMaterial.TlogEntries = append(pb.VerificationMaterial.TlogEntries, tle)
		} else {
			tsr, err := c.vs.TimestampResponse(sig)
			if err != nil {
				t.Fatal(err)
			}
			pb.VerificationMaterial.TimestampVerificationData = &protobundle.TimestampVerificationData{
				Rfc3161Timestamps: []*protocommon.RFC3161SignedTimestamp{{SignedTimestamp: tsr}},
			}
		}
	}
	out, err := protojson.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustURL(t testing.TB, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Tamper changes one byte of meaning inside a bundle's signed DSSE payload and keeps the old
// signature, as an attacker editing the attestation would.
func Tamper(t testing.TB, b []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	env := m["dsseEnvelope"].(map[string]any)
	payload, _ := base64.StdEncoding.DecodeString(env["payload"].(string))
	changed := bytes.Replace(payload, []byte(`buildtypes`), []byte(`buildTypes`), 1)
	if bytes.Equal(changed, payload) {
		t.Fatal("Tamper found nothing to change")
	}
	env["payload"] = base64.StdEncoding.EncodeToString(changed)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TrustedRootJSON is the CA's trust as a Sigstore trusted_root.json, for `trusted_root: FILE`.
func (c *CA) TrustedRootJSON(t testing.TB) []byte {
	t.Helper()
	m := c.Material()
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, m.FulcioCertificateAuthorities(), m.CTLogs(), m.TimestampingAuthorities(), m.RekorLogs())
	if err != nil {
		t.Fatal(err)
	}
	out, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return out
}
