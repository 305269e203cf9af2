package pull

import (
	"context"
	"crypto/sha512"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// noBundleAt is the part of the no-provenance warning that says a place holds no bundle at all.
const noBundleAt = " has no provenance bundle at "

// ProvenanceWayOut is how a no-provenance warning names both ways out of it, in config.yaml.
const ProvenanceWayOut = "provenance: off to silence, require to enforce"

// verifiedBundle is a bundle that passed, waiting for the pull to commit.
type verifiedBundle struct {
	raw   []byte
	facts provenance.Facts
}

func (v *verifiedBundle) digest() digest.Digest { return digest.FromBytes(v.raw) }

func (v *verifiedBundle) lockEntry() lock.Provenance {
	return lock.Provenance{Kind: v.facts.Kind, Bundle: v.digest().String(), Signer: v.facts.Signer}
}

func (v *verifiedBundle) record() *cas.Provenance {
	f := v.facts
	return &cas.Provenance{Kind: f.Kind, Bundle: v.digest(), Signer: f.Signer, OwnerID: f.OwnerID, RepoID: f.RepoID,
		Repository: f.Repository, SourceCommit: f.SourceCommit}
}

func (p *Puller) provenancePolicy(scope string) config.ProvenancePolicy {
	pol := config.ProvenancePolicy{Mode: config.ProvenancePrefer}
	if p.Provenance.Policy != nil {
		pol = p.Provenance.Policy(scope)
	}
	if p.Provenance.Override != "" {
		pol.Mode = p.Provenance.Override
	}
	return pol
}

// checkProvenance finds and verifies the bundles of what a place served, before anything is
// committed. The trust rule:
//   - a bundle whose signer is anchored (its certificate chains to a trusted root, or its key is
//     in trusted_keys for the scope) binds: if it names other bytes, another owner or repository,
//     another workflow or a self-hosted runner, the pull fails with provenance-mismatch under
//     prefer and require alike;
//   - a bundle whose signer nothing anchors proves nothing: under prefer it counts as absent,
//     with a warning that names the signer; under require it fails, provenance-unverifiable;
//   - a pin that recorded provenance requires it, whatever the policy says.
func (p *Puller) checkProvenance(ctx context.Context, req Request, pin pinned, got *fetched, res *Result) error {
	defer got.lookup.stop()
	pol := p.provenancePolicy(req.Name.Scope)
	what := req.Name.String() + "@" + got.desc.Version
	if pin.provenance != nil && pol.Mode == config.ProvenanceOff {
		return errs.New(errs.ProvenanceMissing, "murmur.lock records verified provenance for %s (%s by %s), and --provenance=off would downgrade that pin, so nothing was pulled; pull with provenance, or remove the entry's provenance from murmur.lock if you really accept unsigned bytes",
			req.Name, pin.provenance.Kind, pin.provenance.Signer)
	}
	if pol.Mode == config.ProvenanceOff || (p.Provenance.Verifier == nil && pin.provenance == nil) {
		return nil
	}
	if pin.provenance != nil {
		pol.Mode = config.ProvenanceRequire
	}
	d := got.desc.Digest
	var candidates [][]byte
	asked := "the place that served it"
	if got.bundles != nil {
		asked = got.desc.Origin
		var found [][]byte
		var err error
		if got.lookup != nil {
			found, err = got.lookup.wait(ctx)
		} else {
			found, err = got.bundles.Bundles(ctx, req.Name, got.desc.Version, d)
		}
		if err != nil {
			return errs.Wrap(err, errs.TokenOf(err), "looking for the provenance of %s at %s: %s; nothing was pulled", what, asked, errs.Message(err))
		}
		// Every bundle found for the artifact is a candidate, those that name these bytes first:
		// an anchored one that names other bytes (an asset replaced after it was attested) is
		// evidence against them, not a bundle to pass over.
		var others [][]byte
		for _, b := range found {
			if provenance.Names(b, d) {
				candidates = append(candidates, b)
			} else {
				others = append(others, b)
			}
		}
		candidates = append(candidates, others...)
	}
	if pin.provenance != nil {
		// The bundle the lock recorded goes first, so that a store's copy of it leaves the lock
		// as it is; when this machine kept it, it proves these bytes without any store.
		recorded := digest.Digest(pin.provenance.Bundle)
		if b, err := p.readSmallBlob(ctx, recorded); err == nil && provenance.Names(b, d) {
			candidates = append([][]byte{b}, candidates...)
		} else {
			for i, b := range candidates {
				if digest.FromBytes(b) == recorded {
					candidates[0], candidates[i] = candidates[i], candidates[0]
				}
			}
		}
	}
	if len(candidates) == 0 {
		if pol.Mode == config.ProvenanceRequire {
			return missingBundle(req, what, asked, pol, pin)
		}
		res.Unsigned = string(errs.NoProvenance) + ": " + what + noBundleAt + asked + "; pulled on its digest alone (scope " + req.Name.Scope + ": " + ProvenanceWayOut + ")"
		res.Warnings = append(res.Warnings, res.Unsigned)
		return nil
	}
	if p.Provenance.Verifier == nil {
		return errs.New(errs.ProvenanceUnverifiable, "%s needs its provenance checked, and this mur has no verifier; run it with mur-provenance installed", what)
	}
	want := provenance.Expect{Artifact: what, Scope: req.Name.Scope, AllowSelfHosted: pol.AllowSelfHosted, SignerWorkflow: pol.SignerWorkflow}
	switch {
	case got.newPin != nil:
		want.OwnerID, want.RepoID = got.newPin.OwnerID, got.newPin.RepoID
	case pin.owner != nil:
		want.OwnerID, want.RepoID = pin.owner.OwnerID, pin.owner.RepoID
	}
	var mismatch, unverifiable error
	var unanchored []string
	for _, b := range candidates {
		if provenance.NeedsSHA512(b) && want.SHA512 == nil {
			sum, err := p.sha512Of(ctx, got)
			if err != nil {
				return err
			}
			want.SHA512 = sum
		}
		if want.OwnerID == 0 && !strings.Contains(string(b), `"publicKey"`) {
			// An attestation proves owner and repository ids, and this scope has none pinned
			// (it was never pulled from its source): nothing to hold them against.
			if unverifiable == nil {
				unverifiable = errs.New(errs.ProvenanceUnverifiable, "%s carries a GitHub attestation, but murmur.lock pins no owner id for scope %s to check it against; pull it once from its GitHub source (or with --from sources) to pin the owner", what, req.Name.Scope)
			}
			continue
		}
		facts, err := p.Provenance.Verifier.Verify(ctx, b, d, want, pol.Trust)
		var u *provenance.Unanchored
		switch {
		case err == nil:
			got.verified = &verifiedBundle{raw: b, facts: facts}
			return nil
		case errors.As(err, &u):
			unanchored = append(unanchored, u.Signer)
			if unverifiable == nil {
				unverifiable = err
			}
		case errs.TokenOf(err) == errs.ProvenanceMismatch:
			if mismatch == nil {
				mismatch = err
			}
		case unverifiable == nil:
			unverifiable = err
		}
	}
	switch {
	case mismatch != nil:
		return mismatch
	case pol.Mode == config.ProvenanceRequire || len(unanchored) == 0 || len(unanchored) < len(candidates):
		return unverifiable
	}
	// Only unanchored signers: under prefer the artifact is as if unsigned.
	res.Warnings = append(res.Warnings, string(errs.NoProvenance)+": "+what+" carries a bundle signed by "+strings.Join(unanchored, ", ")+", which nothing you trust anchors, so it proves nothing; pulled on its digest alone ("+errs.Message(unverifiable)+")")
	return nil
}

// missingBundle is the refusal of an artifact that must have a bundle and has none: why it must,
// and how its publisher signs it, with the scope's key when the scope is keyed.
func missingBundle(req Request, what, asked string, pol config.ProvenancePolicy, pin pinned) error {
	why := "scope " + req.Name.Scope + " sets provenance: require"
	keyed := len(pol.Trust.Keys) > 0
	if pin.provenance != nil {
		// The pin is the version murmur.lock holds, which may not be the one asked for.
		why = fmt.Sprintf("murmur.lock's pin %s@%s recorded a verified bundle (%s), so one is required of it and of every version it moves to", req.Name, pin.provenanceOf, pin.provenance.Bundle)
		keyed = pin.provenance.Kind == lock.ProvenanceKey
	}
	how := "attest it (actions/attest-build-provenance)"
	if keyed {
		how = "sign it with the scope's key ('mur push FILE.mur.zip --scope " + req.Name.Scope + " --sign-key KEY --store STORE')"
	}
	return errs.New(errs.ProvenanceMissing, "%s has no Sigstore bundle at %s, and %s; nothing was pulled. The publisher must %s, or the store must carry its bundle",
		what, asked, why, how)
}

func (p *Puller) readSmallBlob(ctx context.Context, d digest.Digest) ([]byte, error) {
	return provenance.ReadBundle(ctx, p.CAS, d)
}

func (p *Puller) sha512Of(ctx context.Context, got *fetched) ([]byte, error) {
	h := sha512.New()
	if got.w != nil {
		if _, err := io.Copy(h, io.NewSectionReader(got.w, 0, got.w.Size())); err != nil {
			return nil, err
		}
		return h.Sum(nil), nil
	}
	return provenance.SHA512Of(ctx, p.CAS, got.desc.Digest)
}

// keepBundle puts a verified bundle in the CAS, where the lock's entry and the pull record
// point; it is called only once every check has passed.
func (p *Puller) keepBundle(ctx context.Context, v *verifiedBundle) error {
	_, err := p.CAS.Ingest(ctx, strings.NewReader(string(v.raw)), int64(len(v.raw)), v.digest())
	return err
}

// provenanceFromCAS re-verifies, offline, the bundles the CAS's records verified for a pinned
// blob the CAS holds, when the pin recorded none: murmur.lock is then a function of the
// artifacts, not of the cache, and a warm home records the provenance block a fresh home, which
// finds the bundle online, records. Without such a bundle nothing is asked: a warm pull of a pin
// makes no request.
func (p *Puller) provenanceFromCAS(ctx context.Context, req Request, pin pinned, got *fetched, res *Result) error {
	// A locked pull changes no pin and a pull outside a project writes no lock: nothing to record.
	if pin.provenance != nil || p.Lock == nil || p.CASOnly || p.Provenance.Verifier == nil || p.provenancePolicy(req.Name.Scope).Mode == config.ProvenanceOff {
		return nil
	}
	held := p.recordedBundles(ctx, got.desc.Digest)
	if len(held) == 0 {
		return nil
	}
	got.bundles = heldBundles(held)
	return p.checkProvenance(ctx, req, pin, got, res)
}

// heldBundles are bundles the CAS holds, as a BundleFinder.
type heldBundles [][]byte

func (h heldBundles) Bundles(context.Context, ref.Name, string, digest.Digest) ([][]byte, error) {
	return h, nil
}

// recordedBundles are the bundles the CAS's records verified for d, through the CAS's provenance
// index: one small file per blob, not the home's whole history, since every warm pull asks.
func (p *Puller) recordedBundles(ctx context.Context, d digest.Digest) [][]byte {
	var out [][]byte
	for _, b := range p.CAS.ProvenanceOf(d) {
		if raw, err := provenance.ReadBundle(ctx, p.CAS, b); err == nil {
			out = append(out, raw)
		}
	}
	return out
}
