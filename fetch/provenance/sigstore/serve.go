package sigstore

import (
	"bufio"
	"context"
	"encoding/json"
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

// Serve answers provenance.Requests, one JSON line each, until in ends: the loop of mur-provenance.
func Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	var l Local
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		var req provenance.Request
		var resp provenance.Response
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			resp = provenance.ErrorResponse(errs.Wrap(err, errs.Internal, "%s got a request it can't read: %v", provenance.HelperName, err))
		} else {
			resp = l.answer(ctx, req)
		}
		if err := enc.Encode(resp); err != nil {
			return err
		}
	}
	return sc.Err()
}

func (l *Local) answer(ctx context.Context, req provenance.Request) provenance.Response {
	switch req.Op {
	case "verify":
		facts, err := l.Verify(ctx, req.Bundle, req.Digest, req.Expect, req.Trust)
		if err != nil {
			return provenance.ErrorResponse(err)
		}
		return provenance.Response{Facts: &facts}
	case "sign":
		b, hint, err := l.Sign(ctx, req.Key, req.Digest, req.SHA512)
		if err != nil {
			return provenance.ErrorResponse(err)
		}
		return provenance.Response{Bundle: b, Hint: hint}
	}
	return provenance.ErrorResponse(errs.New(errs.Internal, "%s: unknown op %q", provenance.HelperName, req.Op))
}
