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

// attestor checks the Sigstore bundles of what a pull fetched, before anything is committed, and
// keeps those that verified in the CAS. It holds what the provenance phase reads of the Puller.
type attestor struct {
	cas  *cas.Store
	prov Provenance
	// pins is set when the pull may change murmur.lock (it has a LockWriter), casOnly when it
	// pulls outside a project: either way a pinned blob's recorded bundles are not re-verified.
	pins, casOnly bool
	run           *run // the metadata slots a look-up of bundles takes; nil outside a Pull
}

func (p *Puller) attestor() *attestor {
	return &attestor{cas: p.CAS, prov: p.Provenance, pins: p.Lock != nil, casOnly: p.CASOnly, run: p.run}
}

func (a *attestor) policy(scope string) config.ProvenancePolicy {
	pol := config.ProvenancePolicy{Mode: config.ProvenancePrefer}
	if a.prov.Policy != nil {
		pol = a.prov.Policy(scope)
	}
	if a.prov.Override != "" {
		pol.Mode = a.prov.Override
	}
	return pol
}

// check finds and verifies the bundles of what a place served, before anything is committed. The
// trust rule:
//   - a bundle whose signer is anchored (its certificate chains to a trusted root, or its key is
//     in trusted_keys for the scope) binds: if it names other bytes, another owner or repository,
//     another workflow or a self-hosted runner, the pull fails with provenance-mismatch under
//     prefer and require alike;
//   - a bundle whose signer nothing anchors proves nothing: under prefer it counts as absent,
//     with a warning that names the signer; under require it fails, provenance-unverifiable;
//   - a pin that recorded provenance requires it, whatever the policy says.
func (a *attestor) check(ctx context.Context, req Request, pin pinned, got *fetched, res *Result) error {
	defer got.lookup.stop()
	pol := a.policy(req.Name.Scope)
	what := req.Name.String() + "@" + got.desc.Version
	if pin.provenance != nil && pol.Mode == config.ProvenanceOff {
		return errs.New(errs.ProvenanceMissing, "murmur.lock records verified provenance for %s (%s by %s), and --provenance=off would downgrade that pin, so nothing was pulled; pull with provenance, or remove the entry's provenance from murmur.lock if you really accept unsigned bytes",
			req.Name, pin.provenance.Kind, pin.provenance.Signer)
	}
	if pol.Mode == config.ProvenanceOff || (a.prov.Verifier == nil && pin.provenance == nil) {
		return nil
	}
	if pin.provenance != nil {
		pol.Mode = config.ProvenanceRequire
	}
	candidates, asked, err := a.candidates(ctx, req, pin, got, what)
	if err != nil {
		return err
	}
	if len(candidates) == 0 {
		if pol.Mode == config.ProvenanceRequire {
			return missingBundle(req, what, asked, pol, pin)
		}
		res.Unsigned = string(errs.NoProvenance) + ": " + what + noBundleAt + asked + "; pulled on its digest alone (scope " + req.Name.Scope + ": " + ProvenanceWayOut + ")"
		res.Warnings = append(res.Warnings, res.Unsigned)
		return nil
	}
	if a.prov.Verifier == nil {
		return errs.New(errs.ProvenanceUnverifiable, "%s needs its provenance checked, and this mur has no verifier; run it with mur-provenance installed", what)
	}
	return a.verify(ctx, req, got, res, pol, expect(req, pin, got, pol, what), candidates)
}

// candidates are the bundles to try for got, in order, and the place they were asked of: the
// bundle murmur.lock recorded first, then those that name got's bytes, then the rest.
func (a *attestor) candidates(ctx context.Context, req Request, pin pinned, got *fetched, what string) (candidates [][]byte, asked string, err error) {
	d := got.desc.Digest
	asked = "the place that served it"
	if got.bundles != nil {
		asked = got.desc.Origin
		var found [][]byte
		if got.lookup != nil {
			found, err = got.lookup.wait(ctx)
		} else {
			found, err = got.bundles.Bundles(ctx, req.Name, got.desc.Version, d)
		}
		if err != nil {
			return nil, asked, errs.Wrap(err, errs.TokenOf(err), "looking for the provenance of %s at %s: %s; nothing was pulled", what, asked, errs.Message(err))
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
		if b, err := a.readSmallBlob(ctx, recorded); err == nil && provenance.Names(b, d) {
			candidates = append([][]byte{b}, candidates...)
		} else {
			for i, b := range candidates {
				if digest.FromBytes(b) == recorded {
					candidates[0], candidates[i] = candidates[i], candidates[0]
				}
			}
		}
	}
	return candidates, asked, nil
}

// expect is what a bundle of got must prove: the artifact, the scope's policy, and the owner and
// repository ids the pull learned from the source or murmur.lock pins.
func expect(req Request, pin pinned, got *fetched, pol config.ProvenancePolicy, what string) provenance.Expect {
	want := provenance.Expect{Artifact: what, Scope: req.Name.Scope, AllowSelfHosted: pol.AllowSelfHosted, SignerWorkflow: pol.SignerWorkflow}
	switch {
	case got.newPin != nil:
		want.OwnerID, want.RepoID = got.newPin.OwnerID, got.newPin.RepoID
	case pin.owner != nil:
		want.OwnerID, want.RepoID = pin.owner.OwnerID, pin.owner.RepoID
	}
	return want
}

// verify tries the candidates in order until one verifies (got.verified), and otherwise decides
// what their failures add up to: a mismatch fails; under prefer, bundles whose signers nothing
// anchors are as if none were there; anything else fails unverifiable.
func (a *attestor) verify(ctx context.Context, req Request, got *fetched, res *Result, pol config.ProvenancePolicy, want provenance.Expect, candidates [][]byte) error {
	d := got.desc.Digest
	var mismatch, unverifiable error
	var unanchored []string
	for _, b := range candidates {
		if provenance.NeedsSHA512(b) && want.SHA512 == nil {
			sum, err := a.sha512Of(ctx, got)
			if err != nil {
				return err
			}
			want.SHA512 = sum
		}
		if want.OwnerID == 0 && !strings.Contains(string(b), `"publicKey"`) {
			// An attestation proves owner and repository ids, and this scope has none pinned
			// (it was never pulled from its source): nothing to hold them against.
			if unverifiable == nil {
				unverifiable = errs.New(errs.ProvenanceUnverifiable, "%s carries a GitHub attestation, but murmur.lock pins no owner id for scope %s to check it against; pull it once from its GitHub source (or with --from sources) to pin the owner", want.Artifact, req.Name.Scope)
			}
			continue
		}
		facts, err := a.prov.Verifier.Verify(ctx, b, d, want, pol.Trust)
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
	res.Warnings = append(res.Warnings, string(errs.NoProvenance)+": "+want.Artifact+" carries a bundle signed by "+strings.Join(unanchored, ", ")+", which nothing you trust anchors, so it proves nothing; pulled on its digest alone ("+errs.Message(unverifiable)+")")
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

func (a *attestor) readSmallBlob(ctx context.Context, d digest.Digest) ([]byte, error) {
	return provenance.ReadBundle(ctx, a.cas, d)
}

func (a *attestor) sha512Of(ctx context.Context, got *fetched) ([]byte, error) {
	h := sha512.New()
	if got.w != nil {
		if _, err := io.Copy(h, io.NewSectionReader(got.w, 0, got.w.Size())); err != nil {
			return nil, err
		}
		return h.Sum(nil), nil
	}
	return provenance.SHA512Of(ctx, a.cas, got.desc.Digest)
}

// keep puts a verified bundle in the CAS, where the lock's entry and the pull record point; it
// is called only once every check has passed.
func (a *attestor) keep(ctx context.Context, v *verifiedBundle) error {
	_, err := a.cas.Ingest(ctx, strings.NewReader(string(v.raw)), int64(len(v.raw)), v.digest())
	return err
}

// fromCAS re-verifies, offline, the bundles the CAS's records verified for a pinned
// blob the CAS holds, when the pin recorded none: murmur.lock is then a function of the
// artifacts, not of the cache, and a warm home records the provenance block a fresh home, which
// finds the bundle online, records. Without such a bundle nothing is asked: a warm pull of a pin
// makes no request.
func (a *attestor) fromCAS(ctx context.Context, req Request, pin pinned, got *fetched, res *Result) error {
	// A locked pull changes no pin and a pull outside a project writes no lock: nothing to record.
	if pin.provenance != nil || !a.pins || a.casOnly || a.prov.Verifier == nil || a.policy(req.Name.Scope).Mode == config.ProvenanceOff {
		return nil
	}
	held := a.recordedBundles(ctx, got.desc.Digest)
	if len(held) == 0 {
		return nil
	}
	got.bundles = heldBundles(held)
	return a.check(ctx, req, pin, got, res)
}

// heldBundles are bundles the CAS holds, as a BundleFinder.
type heldBundles [][]byte

func (h heldBundles) Bundles(context.Context, ref.Name, string, digest.Digest) ([][]byte, error) {
	return h, nil
}

// recordedBundles are the bundles the CAS's records verified for d, through the CAS's provenance
// index: one small file per blob, not the home's whole history, since every warm pull asks.
func (a *attestor) recordedBundles(ctx context.Context, d digest.Digest) [][]byte {
	var out [][]byte
	for _, b := range a.cas.ProvenanceOf(d) {
		if raw, err := provenance.ReadBundle(ctx, a.cas, b); err == nil {
			out = append(out, raw)
		}
	}
	return out
}
