package verify

import (
	"context"
	"fmt"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/lock"
)

// VerifiedProvenance is one pin whose recorded bundle `mur verify` checked again, offline.
type VerifiedProvenance struct {
	Name   string        `json:"name"`
	Digest digest.Digest `json:"digest"`
	Bundle string        `json:"bundle"`
	provenance.Facts
}

// verifyProvenance re-verifies the bundle of every pin that recorded one, from the CAS and
// against the lock's own owner and repository ids, without the network. A bundle that is gone
// or no longer verifies is a problem of kind provenance.
func verifyProvenance(ctx context.Context, in Input, rep *Report) {
	for i := range in.Lock.Artifacts {
		e := &in.Lock.Artifacts[i]
		if e.Provenance == nil {
			continue
		}
		rep.Bundles++
		subject := e.Name + " " + e.Provenance.Bundle
		problem := func(format string, args ...any) {
			rep.Problems = append(rep.Problems, Problem{Kind: "provenance", Subject: subject, Problem: fmt.Sprintf(format, args...)})
		}
		if in.Verifier == nil {
			problem("murmur.lock records provenance for %s, and this verify has no verifier to check it", e.Name)
			continue
		}
		raw, err := provenance.ReadBundle(ctx, in.CAS, digest.Digest(e.Provenance.Bundle))
		if err != nil {
			problem("the bundle murmur.lock records for %s is not in the CAS (%s); run 'mur warm' to fetch it, or 'mur cache import' an export that carries it", e.Name, errs.Message(err))
			continue
		}
		pol := config.ProvenancePolicy{Mode: config.ProvenanceRequire}
		if in.Policy != nil {
			pol = in.Policy(scopeOf(e.Name))
		}
		want := provenance.Expect{Artifact: e.Name + "@" + e.ResolvedVersion, Scope: scopeOf(e.Name), AllowSelfHosted: pol.AllowSelfHosted, SignerWorkflow: pol.SignerWorkflow}
		if pin, ok := in.Lock.Pin(scopeOf(e.Name)); ok {
			want.OwnerID, want.RepoID = pin.OwnerID, pin.RepoID
		}
		var firstErr error
		verified := false
		for _, hex := range entryHashes(e) {
			d := digest.NewDigestFromEncoded(digest.SHA256, hex)
			if !provenance.Names(raw, d) || !in.CAS.Has(d) {
				continue
			}
			w := want
			if provenance.NeedsSHA512(raw) {
				if w.SHA512, err = provenance.SHA512Of(ctx, in.CAS, d); err != nil {
					firstErr = err
					continue
				}
			}
			facts, err := in.Verifier.Verify(ctx, raw, d, w, pol.Trust)
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			if facts.Kind != e.Provenance.Kind || facts.Signer != e.Provenance.Signer {
				firstErr = errs.New(errs.ProvenanceMismatch, "the bundle now proves %s by %s, but murmur.lock recorded %s by %s", facts.Kind, facts.Signer, e.Provenance.Kind, e.Provenance.Signer)
				continue
			}
			rep.Provenance = append(rep.Provenance, VerifiedProvenance{Name: e.Name, Digest: d, Bundle: e.Provenance.Bundle, Facts: facts})
			verified = true
			break
		}
		switch {
		case verified:
		case firstErr != nil:
			problem("%s: %s", errs.TokenOf(firstErr), errs.Message(firstErr))
		default:
			problem("the bundle murmur.lock records for %s speaks for none of its pinned digests held in the CAS", e.Name)
		}
	}
}

func scopeOf(name string) string {
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			return name[:i]
		}
	}
	return name
}

func entryHashes(e *lock.Entry) []string {
	var out []string
	if e.SHA256.Any != "" {
		out = append(out, e.SHA256.Any)
	}
	for _, h := range e.SHA256.Platforms {
		out = append(out, h)
	}
	return out
}
