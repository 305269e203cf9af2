package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/sandbox"
)

func verifyCmd() *command {
	var (
		repair      bool
		platform    string
		stores      storeFlags
		connections int
		locked      lockedFlags
	)
	return &command{
		name:  "verify",
		short: "check murmur.lock against the CAS, tools/ and the compiled cache",
		long: `Re-hashes every blob murmur.lock pins (using every core), checks the staged tools/
against their digests, the compiled cache and the owner pins it can check offline, and that
murmur.lock follows murmur.yaml. One line per problem; exit 1 if there is any. A blob whose
bytes no longer match its digest is moved to $MURMUR_HOME/cas/quarantine/ even without
--repair, so that nothing runs it; 'mur cache gc' removes it in time. --repair fetches and
restores what it can.`,
		examples: `mur verify
mur verify --platform all
mur verify --repair --store oci://registry.internal:5000/murmur
mur verify --repair --mirror oci://registry.internal:5000/murmur --connections 8
mur verify --locked                     # CI: also fail if murmur.lock does not follow murmur.yaml
mur verify --json`,
		flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&repair, "repair", false, "fetch and restore what is missing or damaged")
			fs.StringVar(&platform, "platform", "", "platform whose pins to check, or all (default: this machine's)")
			stores.register(fs, "add a store for --repair")
			stores.registerDownload(fs, &connections) // for --repair
			locked.register(fs)
		},
		run: func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("mur verify takes no arguments, found %q", args)
			}
			if err := checkPlatform(&platform, true); err != nil {
				return err
			}
			p, l, err := e.openLocked()
			if err != nil {
				return err
			}
			if err := locked.check(e, p, l, platform); err != nil {
				return err
			}
			store, err := openCAS(p.home)
			if err != nil {
				return err
			}
			in := fetch.VerifyInput{
				Project: p.Project, Lock: l, CAS: store, Platform: platform,
				SourceFor: p.cfg.SourceFor, Intent: p.intent(),
				Verifier: e.trustingVerifier(p.home, p.cfg), Policy: p.cfg.ProvenanceFor,
			}
			runner, rerr := sandbox.New(e.ctx, p.runnerOptions(nil))
			if rerr == nil {
				defer runner.Close(e.ctx)
				in.Runner = runner
			}
			if repair {
				// The same assembly as pull and warm: fallbacks, the mirror's write-through and
				// --connections apply to what a repair fetches.
				if in.Repair, err = p.puller(e, stores, fetch.PullerOptions{CAS: store, Platform: platform, Connections: connections}); err != nil {
					return err
				}
			}
			rep, err := fetch.Verify(e.ctx, in)
			if err != nil {
				return err
			}
			failure := rep.Err(repair)
			if e.g.json {
				return jsonThen(e, verifyJSON{rep.Blobs, rep.Tools, rep.Compiled, rep.Bundles, rep.Problems, rep.Provenance}, failure)
			} else {
				for _, pr := range rep.Problems {
					state := ""
					if pr.Repaired {
						state = " (repaired)"
					}
					fmt.Fprintf(e.stdout, "%s %s: %s%s\n", pr.Kind, pr.Subject, pr.Problem, state)
				}
				// The summary is the result, so it goes to stdout with the problems, -q or not.
				fmt.Fprintf(e.stdout, "verify: %s, %s, %s, %s checked; %s, %d repaired\n",
					plural(rep.Blobs, "blob"), plural(rep.Tools, "staged tool"), plural(rep.Compiled, "compiled module"), plural(rep.Bundles, "provenance bundle"),
					plural(len(rep.Problems), "problem"), rep.RepairedCount())
			}
			return failure
		},
	}
}
