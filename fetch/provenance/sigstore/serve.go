package sigstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/internal/errs"
)

// Local verifies and signs in process: provenance.Verifier and provenance.Signer without a helper. It
// loads the embedded roots once, and each trusted_root file once.
type Local struct {
	// Roots, when set, replaces the embedded roots (tests with a CA of their own); a
	// trusted_root file still replaces both.
	Roots *Roots

	mu    sync.Mutex
	roots map[string]*Roots // by trusted_root file, "" for the embedded roots
	tuf   *Roots            // the roots of the TUF cache, once read (and refreshed if due)
}

var (
	_ provenance.Verifier = (*Local)(nil)
	_ provenance.Signer   = (*Local)(nil)
)

func (l *Local) rootsFor(trust provenance.Trust) (*Roots, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.roots[trust.RootFile]
	if !ok {
		var err error
		switch {
		case trust.RootFile == "" && l.Roots != nil:
			r = l.Roots
		case trust.RootFile == "":
			r, err = EmbeddedRoots()
		default:
			r, err = LoadRoots(trust.RootFile)
		}
		if err != nil {
			return nil, err
		}
		if l.roots == nil {
			l.roots = map[string]*Roots{}
		}
		l.roots[trust.RootFile] = r
	}
	if len(trust.Keys) == 0 {
		return r, nil
	}
	return r.WithKeys(trust.Keys)
}

// Verify implements provenance.Verifier.
func (l *Local) Verify(ctx context.Context, bundle []byte, artifact digest.Digest, want provenance.Expect, trust provenance.Trust) (provenance.Facts, error) {
	if err := ctx.Err(); err != nil {
		return provenance.Facts{}, err
	}
	roots, err := l.rootsFor(trust)
	if err != nil {
		return provenance.Facts{}, err
	}
	return Verify(bundle, artifact, want, roots)
}

// Sign implements provenance.Signer.
func (l *Local) Sign(_ context.Context, keyPEM []byte, artifact digest.Digest, sha512 []byte) ([]byte, string, error) {
	return SignDigest(keyPEM, artifact, sha512)
}

// maxRequest bounds one request line: a bundle mur sends is at most provenance.MaxBundleSize
// bytes, which its JSON (base64) makes a third larger, with room to spare. A longer line ends
// Serve with an error, and mur, whose request went unanswered, fails the verification closed.
const maxRequest = 64 << 20

// Serve answers provenance.Requests, one JSON line each, until in ends: the loop of
// mur-provenance. The first request must be a hello that states provenance.Protocol; until one
// does, every other request is refused, so that a mur of another version never has a bundle
// checked under rules it does not share. A request with a field this helper does not know is
// refused too, rather than checked without the policy that field may carry.
func Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	var l Local
	agreed := false
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), maxRequest)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		var resp provenance.Response
		req, err := decodeRequest(sc.Bytes())
		switch {
		case req.Op == "hello":
			// Answered even when the rest of the line is unreadable: a mur of another
			// protocol learns which one this helper speaks, and says so.
			agreed = err == nil && req.Protocol == provenance.Protocol
			resp = provenance.Response{Protocol: provenance.Protocol, Version: provenance.BuildVersion()}
		case !agreed:
			resp = provenance.ErrorResponse(errs.New(errs.ProvenanceUnverifiable, "%s (build %q) speaks helper protocol %d, and mur sent %q without agreeing on one first: expected protocol %d, found none. mur is of another version than %s; install both from one version: %s",
				provenance.HelperName, provenance.BuildVersion(), provenance.Protocol, clean(req.Op), provenance.Protocol, provenance.HelperName, provenance.InstallHint(provenance.BuildVersion())))
		case err != nil:
			resp = provenance.ErrorResponse(errs.Wrap(err, errs.ProvenanceUnverifiable, "%s can't read mur's request (%s), so nothing was checked; mur and %s disagree on the protocol although both say %d: install both from one version: %s",
				provenance.HelperName, clean(err.Error()), provenance.HelperName, provenance.Protocol, provenance.InstallHint(provenance.BuildVersion())))
		default:
			resp = l.answer(ctx, req)
		}
		if err := enc.Encode(resp); err != nil {
			return err
		}
	}
	return sc.Err()
}

// decodeRequest reads one request strictly. When that fails, the op is still read leniently,
// so that a hello from another protocol can be answered with this helper's.
func decodeRequest(line []byte) (provenance.Request, error) {
	var req provenance.Request
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value on a line")
	}
	if err != nil {
		var op struct {
			Op string `json:"op"`
		}
		json.Unmarshal(line, &op)
		return provenance.Request{Op: op.Op}, err
	}
	return req, nil
}

func (l *Local) answer(ctx context.Context, req provenance.Request) provenance.Response {
	switch req.Op {
	case "verify":
		facts, notes, err := l.verifyCached(ctx, req)
		if err != nil {
			resp := provenance.ErrorResponse(err)
			resp.Notes = notes
			return resp
		}
		return provenance.Response{Facts: &facts, Notes: notes}
	case "refresh-roots", "show-roots":
		return rootsAnswer(ctx, req)
	case "sign":
		b, hint, err := l.Sign(ctx, req.Key, req.Digest, req.SHA512)
		if err != nil {
			return provenance.ErrorResponse(err)
		}
		return provenance.Response{Bundle: b, Hint: hint}
	}
	return provenance.ErrorResponse(errs.New(errs.Internal, "%s: unknown op %q", provenance.HelperName, clean(req.Op)))
}
