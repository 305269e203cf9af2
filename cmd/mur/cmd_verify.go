package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/sandbox"
)

func verifyCmd() *command {
	var (
		repair   bool
		platform platformFlag
		stores   storeFlags
		download downloadFlags
		locked   lockedFlags
		file     fileBundleFlags
	)
	return &command{
		name:  "verify",
		args:  "[FILE.mur.zip --bundle B (--owner-id N --repo-id M | --key K.pub)]",
		short: "check murmur.lock against the CAS and tools/, or a packed file against its bundle",
		long: `Re-hashes every blob murmur.lock pins (using every core), checks the staged tools/
against their digests, the compiled cache and the owner pins it can check offline, and that
murmur.lock follows murmur.yaml. One line per problem; exit 1 if there is any. A blob whose
bytes no longer match its digest is moved to $MURMUR_HOME/cas/quarantine/ even without
--repair, so that nothing runs it; 'mur cache gc' removes it in time. --repair fetches and
restores what it can.

'mur verify FILE.mur.zip --bundle B' checks a packed file against a Sigstore bundle before it
is released, as 'gh attestation verify FILE' and 'cosign verify-blob --bundle' do: the file's
SHA-256 must be the bundle's subject, and its signer the one named. A GitHub attestation is
checked offline against mur's trusted roots (or the home's trusted_root) and must carry
--owner-id and --repo-id (and start with --signer-workflow when given), as a consumer's pull
requires; a keyed bundle must be signed by --key. It needs no project.`,
		examples: `mur verify
mur verify --platform all
mur verify --repair --store oci://registry.internal:5000/murmur
mur verify --repair --mirror oci://registry.internal:5000/murmur --connections 8
mur verify --locked                     # CI: also fail if murmur.lock does not follow murmur.yaml
mur verify --json
mur verify grep-1.2.0.mur.zip --bundle grep-1.2.0.mur.zip.sigstore.json --key team.pub
mur verify grep-1.2.0.mur.zip --bundle attestation.json --owner-id 1234567 --repo-id 7654321
mur verify grep-1.2.0.mur.zip --bundle attestation.json --owner-id 1234567 --repo-id 7654321 --signer-workflow https://github.com/acme/murmur-tools/.github/workflows/release.yml@`,
		flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&repair, "repair", false, "fetch and restore what is missing or damaged")
			platform.registerPins(fs, "check", true)
			stores.register(fs, "add a store for --repair")
			download.register(fs, false) // for --repair
			stores.registerMirror(fs)
			locked.register(fs)
			file.register(fs)
		},
		run: func(e *env, args []string) error {
			if file.bundle != "" || len(args) > 0 {
				if repair || platform.value != "" || locked.locked || locked.frozen {
					return usagef("mur verify FILE --bundle B checks one file; --repair, --platform, --locked and --frozen apply to a project's murmur.lock")
				}
				return verifyFile(e, args, file)
			}
			if err := platform.check(); err != nil {
				return err
			}
			p, l, err := e.openLocked()
			if err != nil {
				return err
			}
			if err := locked.check(e, p, l, platform.value); err != nil {
				return err
			}
			store, err := openCAS(p.home)
			if err != nil {
				return err
			}
			in := fetch.VerifyInput{
				Project: p.Project, Lock: l, CAS: store, Platform: platform.value,
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
				if in.Repair, err = p.puller(e, stores, fetch.PullerOptions{CAS: store, Platform: platform.value, Connections: download.connections}); err != nil {
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

// fileBundleFlags are the flags of 'mur verify FILE --bundle B'.
type fileBundleFlags struct {
	bundle, key, signerWorkflow string
	ownerID, repoID             int64
}

func (f *fileBundleFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.bundle, "bundle", "", "with FILE: the Sigstore bundle to check FILE against")
	fs.Int64Var(&f.ownerID, "owner-id", 0, "with --bundle: the GitHub owner id the attestation must carry")
	fs.Int64Var(&f.repoID, "repo-id", 0, "with --bundle: the GitHub repository id the attestation must carry")
	fs.StringVar(&f.signerWorkflow, "signer-workflow", "", "with --bundle: a prefix the attesting workflow's URL must start with")
	fs.StringVar(&f.key, "key", "", "with --bundle: the public key (PEM) a keyed bundle must be signed by")
}

// verifyFile is 'mur verify FILE --bundle B': one file, one bundle, no project.
func verifyFile(e *env, args []string, f fileBundleFlags) error {
	switch {
	case len(args) != 1:
		return usagef("mur verify --bundle B checks one FILE.mur.zip, found %d arguments; e.g. 'mur verify grep-1.2.0.mur.zip --bundle grep.sigstore.json --key team.pub'", len(args))
	case f.bundle == "":
		return usagef("mur verify takes no arguments, found %q; to check a packed file: mur verify FILE.mur.zip --bundle B (--owner-id N --repo-id M | --key K.pub)", args[0])
	}
	in := fetch.VerifyFileInput{File: args[0], Bundle: f.bundle, OwnerID: f.ownerID, RepoID: f.repoID,
		SignerWorkflow: f.signerWorkflow, KeyFile: f.key, Verifier: e.verifier()}
	if f.key != "" {
		key, err := readKeyArg(f.key)
		if err != nil {
			return err
		}
		in.Key = key
	} else {
		// The home's trusted_root replaces the embedded roots, as for a pull.
		h, err := e.Home()
		if err != nil {
			return err
		}
		cfg, err := config.Load(h.ConfigFile(), "")
		if err != nil {
			return err
		}
		in.TrustedRoot = cfg.Provenance.TrustedRoot
	}
	res, err := fetch.VerifyFile(e.ctx, in)
	if e.g.json {
		return jsonThen(e, res, err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, res.String())
	return nil
}

// readKeyArg reads --key, a public key file named on the command line.
func readKeyArg(path string) ([]byte, error) {
	key, err := readKeyFile(path)
	if err != nil {
		return nil, errs.Wrap(err, errs.Usage, "--key %s can't be read: %v; give the public key file (NAME.pub of 'mur key generate NAME')", path, err)
	}
	return key, nil
}
