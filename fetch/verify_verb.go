package fetch

import (
	"context"
	"errors"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/verify"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/lock"
)

// VerifyInput is what one `mur verify` looks at.
type VerifyInput struct {
	Project   Project
	Lock      *lock.Lock
	CAS       *cas.Store
	Platform  string                    // "" means the host's; "all" checks every pinned platform's blob
	SourceFor func(scope string) string // the configured source of a scope, for pin checks
	Runner    verify.Compiler           // nil skips the compiled cache
	Repair    *Puller                   // nil reports only
	// Verifier re-checks the provenance bundles the lock records, offline, under Policy's
	// trust and signer rules (nil Policy: the embedded roots).
	Verifier provenance.Verifier
	Policy   func(scope string) config.ProvenancePolicy
	Intent   *Intent // murmur.yaml, whose differences with the lock are problems; nil for none
}

// Verify is `mur verify`: it holds murmur.lock against murmur.yaml, the CAS, the staged tools/,
// the compiled cache and the provenance it records (Run), and with a repairer restores what it
// can by pulling it again for the platform verified.
func Verify(ctx context.Context, in VerifyInput) (*VerifyReport, error) {
	run := verify.Input{
		Project: in.Project, Lock: in.Lock, CAS: in.CAS, Platform: in.Platform, SourceFor: in.SourceFor,
		Runner: in.Runner, Verifier: in.Verifier, Policy: in.Policy,
		Mismatches: intentProblems(in.Intent, in.Lock, in.Platform),
	}
	if in.Repair != nil {
		run.Repair = in.Repair
		if in.Platform != "" && in.Platform != "all" {
			run.Repair = in.Repair.with(func(pl *pull.Puller) { pl.Platform = in.Platform })
		}
	}
	return verify.Run(ctx, run)
}

// RepairHint says why a repair's pull failed, and when no store or source could serve it, what
// to do about that.
func (p *Puller) RepairHint(r Result) string {
	reached := len(p.pl.Stores) > 0 || p.pl.Source != nil
	switch {
	case p.pl.Offline:
		return r.Error + "; --repair needs the network, or a layout store given with --store oci-layout:PATH"
	case !reached || errors.Is(r.Err, errs.NotFound) || errors.Is(r.Err, errs.Network):
		return r.Error + "; no store or source could serve it: pass --store oci://HOST/PREFIX or --store oci-layout:PATH that holds it, or add one to config.yaml"
	}
	return r.Error
}

// What Verify reports, in verify's words (fetch/verify), for the commands that print it.
type (
	VerifyReport       = verify.Report
	Problem            = verify.Problem
	VerifiedProvenance = verify.VerifiedProvenance
)
