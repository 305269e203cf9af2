package sigstore

import (
	"bytes"
	"crypto/x509"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/safefile"
)

// The trusted roots mur ships: Sigstore's public-good instance and GitHub's own. They are the
// fallback of the roots refreshed through TUF (tuf.go), used offline and before the first
// refresh; scripts/refresh-trusted-roots.sh updates these files from `gh attestation
// trusted-root`, and the home's `trusted_root: FILE` replaces all of them.
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
	keys      map[string]trustedKey // by hint, hex and base64 alike
	keyNames  []string              // each trusted key once, for messages
	source    string                // "mur's embedded trusted roots" or the file, for messages
}

// trustedKeyNames names r's trusted keys, each once; nil for no roots.
func (r *Roots) trustedKeyNames() []string {
	if r == nil {
		return nil
	}
	return r.keyNames
}

type instance struct {
	name     string // "the public-good trusted root", "trusted_root FILE", for messages
	material root.TrustedMaterial
	options  []verify.VerifierOption
	issuers  [][]byte // subject key ids of every CA certificate, to route a leaf by its AKI
}

// EmbeddedRoots is the public-good and GitHub trust that mur ships.
func EmbeddedRoots() (*Roots, error) {
	r := &Roots{source: "mur's embedded trusted roots"}
	for _, raw := range [][]byte{publicGoodRoot, githubRoot} {
		if err := r.add("", raw); err != nil {
			return nil, errs.Wrap(err, errs.Internal, "mur's embedded trusted root does not parse: %v", err)
		}
	}
	return r, nil
}

// maxRootFile bounds a trusted_root file. mur's two embedded roots are 37 KB together; a
// config can name any path, and what is there is read into memory whole.
const maxRootFile = 1 << 20

// LoadRoots reads a trusted_root file: one trusted_root.json, or the JSON lines that
// `gh attestation trusted-root` prints. It replaces the embedded roots entirely.
//
// The file is opened only as a regular file of at most maxRootFile bytes (a symlink to a secret,
// a FIFO or /dev/zero is refused), and no error quotes what it holds: a config can point it at
// any file, and the message reaches the terminal and --json.
func LoadRoots(path string) (*Roots, error) {
	data, err := safefile.ReadFile(path, maxRootFile)
	var nr *safefile.NotRegularError
	switch {
	case errors.As(err, &nr):
		return nil, errs.Wrap(err, errs.InvalidConfig, "trusted_root %s is %s, and mur reads a trusted root only as a regular file; name the file itself in $MURMUR_HOME/config.yaml", path, nr.Found)
	case errors.Is(err, safefile.ErrTooLarge):
		return nil, errs.Wrap(err, errs.InvalidConfig, "trusted_root %s is over %d bytes, far more than a Sigstore trusted root holds, so mur did not read it; check what the file is", path, maxRootFile)
	case err != nil:
		return nil, errs.Wrap(err, errs.InvalidConfig, "trusted_root %s can't be read: %v; fix the path in $MURMUR_HOME/config.yaml", path, errs.OSCause(err))
	}
	r := &Roots{source: "trusted_root " + path}
	type doc struct {
		line int
		raw  []byte
	}
	docs := []doc{{1, data}}
	if trimmed := bytes.TrimSpace(data); !bytes.HasPrefix(trimmed, []byte("{")) || bytes.Count(trimmed, []byte("\n{")) > 0 {
		docs = nil
		for i, line := range bytes.Split(data, []byte("\n")) {
			if line = bytes.TrimSpace(line); len(line) > 0 {
				docs = append(docs, doc{i + 1, line})
			}
		}
	}
	for _, d := range docs {
		if why := notARoot(d.raw, d.line); why != "" {
			return nil, errs.New(errs.InvalidConfig, "trusted_root %s is not a Sigstore trusted root: %s; give the output of `gh attestation trusted-root` or a trusted_root.json", path, why)
		}
		// A root of the user's own is named by its file, whatever instance it looks like.
		name := "trusted_root " + path
		if len(docs) > 1 {
			name = fmt.Sprintf("trusted_root %s (line %d)", path, d.line)
		}
		if err := r.add(name, d.raw); err != nil {
			// sigstore-go's reason may quote the file; only the line is said.
			return nil, errs.New(errs.InvalidConfig, "trusted_root %s is not a Sigstore trusted root: the document at line %d does not parse as one (a key, certificate or validity period is malformed); give the output of `gh attestation trusted-root` or a trusted_root.json", path, d.line)
		}
	}
	if len(r.instances) == 0 {
		return nil, errs.New(errs.InvalidConfig, "trusted_root %s holds no trusted root (the file is empty); give the output of `gh attestation trusted-root` or a trusted_root.json", path)
	}
	return r, nil
}

// notARoot says what raw, the document that starts at line first of its file, is not, in
// words that quote none of it; "" when it is JSON with the mediaType of the trusted_root.json
// version sigstore-go reads.
func notARoot(raw []byte, first int) string {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return fmt.Sprintf("invalid JSON at line %d", first+bytes.Count(raw[:min(int(syn.Offset), len(raw))], []byte("\n")))
		}
		return fmt.Sprintf("the JSON at line %d is not an object", first)
	}
	var mediaType string
	if json.Unmarshal(fields["mediaType"], &mediaType) != nil || mediaType != root.TrustedRootMediaType01 {
		return fmt.Sprintf("the JSON at line %d has not the mediaType %s", first, root.TrustedRootMediaType01)
	}
	return ""
}

// NewRoots builds Roots from trusted material already in memory: for tests, and for callers that
// build their own instances. Each material gets the policy its shape calls for (see addMaterial).
func NewRoots(materials ...root.TrustedMaterial) *Roots {
	r := &Roots{source: "the given trusted roots"}
	for _, m := range materials {
		r.addMaterial("the given trusted root", m)
	}
	return r
}

// add adds the trusted root raw under name, for messages; "" names one of mur's own instances by
// its shape.
func (r *Roots) add(name string, raw []byte) error {
	tr, err := root.NewTrustedRootFromJSON(raw)
	if err != nil {
		return err
	}
	if name == "" {
		name = "the public-good trusted root"
		if len(tr.RekorLogs()) == 0 {
			name = "the GitHub trusted root"
		}
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
