package sigstore

import (
	"bufio"
	"bytes"
	"crypto/x509"
	_ "embed"
	"os"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"

	"github.com/murmur-nexus/mur/internal/errs"
)

// The trusted roots mur ships: Sigstore's public-good instance and GitHub's own. mur never asks
// TUF for them at run time; scripts/refresh-trusted-roots.sh updates these files from
// `gh attestation trusted-root`, and `trusted_root: FILE` replaces them for one project.
var (
	//go:embed roots/public-good.json
	publicGoodRoot []byte
	//go:embed roots/github.json
	githubRoot []byte
)

// Roots is the trust that bundles are checked against: one or more Sigstore instances and,
// for team registries, the public keys of trusted_keys.
type Roots struct {
	instances []instance
	keys      map[string]trustedKey // by hint
	source    string                // "mur's embedded trusted roots" or the file, for messages
}

type instance struct {
	name     string
	material root.TrustedMaterial
	options  []verify.VerifierOption
	issuers  [][]byte // subject key ids of every CA certificate, to route a leaf by its AKI
}

// EmbeddedRoots is the public-good and GitHub trust that mur ships.
func EmbeddedRoots() (*Roots, error) {
	r := &Roots{source: "mur's embedded trusted roots"}
	for _, raw := range [][]byte{publicGoodRoot, githubRoot} {
		if err := r.add(raw); err != nil {
			return nil, errs.Wrap(err, errs.Internal, "mur's embedded trusted root does not parse: %v", err)
		}
	}
	return r, nil
}

// LoadRoots reads a trusted_root file: one trusted_root.json, or the JSON lines that
// `gh attestation trusted-root` prints. It replaces the embedded roots entirely.
func LoadRoots(path string) (*Roots, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, errs.Wrap(err, errs.InvalidConfig, "trusted_root %s can't be read: %v; fix the path in .murmur/config.yaml", path, err)
	}
	r := &Roots{source: "trusted_root " + path}
	docs := [][]byte{data}
	if trimmed := bytes.TrimSpace(data); !bytes.HasPrefix(trimmed, []byte("{")) || bytes.Count(trimmed, []byte("\n{")) > 0 {
		docs = nil
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
		for sc.Scan() {
			if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
				docs = append(docs, append([]byte(nil), line...))
			}
		}
	}
	for _, doc := range docs {
		if err := r.add(doc); err != nil {
			return nil, errs.Wrap(err, errs.InvalidConfig, "trusted_root %s is not a Sigstore trusted root: %v", path, err)
		}
	}
	if len(r.instances) == 0 {
		return nil, errs.New(errs.InvalidConfig, "trusted_root %s holds no trusted root", path)
	}
	return r, nil
}

// NewRoots builds Roots from trusted material already in memory: for tests, and for callers that
// build their own instances. Each material gets the policy its shape calls for (see addMaterial).
func NewRoots(materials ...root.TrustedMaterial) *Roots {
	r := &Roots{source: "the given trusted roots"}
	for _, m := range materials {
		r.addMaterial("custom", m)
	}
	return r
}

func (r *Roots) add(raw []byte) error {
	tr, err := root.NewTrustedRootFromJSON(raw)
	if err != nil {
		return err
	}
	name := "public-good"
	if len(tr.RekorLogs()) == 0 {
		name = "GitHub"
	}
	r.addMaterial(name, tr)
	return nil
}

// addMaterial picks gh's policy for an instance by its shape: an instance with transparency
// and CT logs (Sigstore's public good) must show an SCT, a log entry and an observer timestamp;
// one without logs (GitHub's own) must show a signed RFC 3161 timestamp.
func (r *Roots) addMaterial(name string, m root.TrustedMaterial) {
	in := instance{name: name, material: m}
	if len(m.RekorLogs()) > 0 {
		in.options = []verify.VerifierOption{verify.WithSignedCertificateTimestamps(1), verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1)}
	} else {
		in.options = []verify.VerifierOption{verify.WithSignedTimestamps(1)}
	}
	for _, ca := range m.FulcioCertificateAuthorities() {
		if f, ok := ca.(*root.FulcioCertificateAuthority); ok {
			for _, c := range append([]*x509.Certificate{f.Root}, f.Intermediates...) {
				if c != nil && len(c.SubjectKeyId) > 0 {
					in.issuers = append(in.issuers, c.SubjectKeyId)
				}
			}
		}
	}
	r.instances = append(r.instances, in)
}

// instanceFor is the instance whose certificate authority issued leaf, or nil: a leaf from an
// authority no root holds is signed by a key newer than these roots (or by nobody trusted).
func (r *Roots) instanceFor(leaf *x509.Certificate) *instance {
	if r == nil {
		return nil
	}
	for i := range r.instances {
		for _, skid := range r.instances[i].issuers {
			if bytes.Equal(skid, leaf.AuthorityKeyId) {
				return &r.instances[i]
			}
		}
	}
	return nil
}

func (r *Roots) describe() string {
	if r == nil {
		return "no trusted root"
	}
	return r.source
}
