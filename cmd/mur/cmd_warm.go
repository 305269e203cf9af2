package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/sandbox"
)

func warmCmd() *command {
	var (
		platform platformFlag
		layout   string
		stores   storeFlags
		download downloadFlags
		locked   lockedFlags
	)
	return &command{
		name:  "warm",
		short: "make the project runnable offline: pull, verify, precompile and stage every pin",
		long: `Pulls every digest murmur.lock pins for this platform (--platform all for every platform the
lock names), verifies it, precompiles it and stages tools/. It is idempotent: when everything is
warm it makes no request and prints one summary line. --layout DIR also writes the blobs into an
OCI layout folder that other machines can use as the store oci-layout:DIR.`,
		examples: `mur warm
mur warm --platform all
mur warm --locked                       # CI: fail first if murmur.lock does not follow murmur.yaml
mur warm --layout ./ci-store            # then: mur pull --store oci-layout:./ci-store
mur warm --store oci://registry.internal:5000/murmur
mur warm --mirror oci://registry.internal:5000/murmur   # the fleet's warming machine fills the team registry`,
		flags: func(fs *pflag.FlagSet) {
			platform.registerPins(fs, "warm", true)
			fs.StringVar(&layout, "layout", "", "also write an OCI layout store into this folder")
			stores.register(fs, "add a store for this command")
			download.register(fs, true)
			stores.registerMirror(fs)
			locked.register(fs)
		},
		run: func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("mur warm takes no arguments, found %q; it warms what murmur.lock pins", args)
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
			if len(l.Artifacts) == 0 {
				return usagef("%s pins nothing; run 'mur pull' first", p.LockPath())
			}
			store, err := openCAS(p.home)
			if err != nil {
				return err
			}
			// Warm is quiet when everything is warm: an artifact gets a line only once it is
			// being fetched.
			pr := newProgress(e.stderr, e.g.quiet || e.g.json, "warm").watch(e)
			pr.hide[fetch.PhaseResolve], pr.hide[fetch.PhaseCached] = true, true
			puller, err := p.puller(e, stores, fetch.PullerOptions{CAS: store, Jobs: download.jobs, Connections: download.connections, Events: pr.event})
			if err != nil {
				return err
			}
			in := fetch.WarmInput{
				Project: p.Project, Lock: l, Platform: platform.value,
				From:   func(name string) ([]string, error) { return p.InstallFrom(name, nil) },
				Puller: puller, Intent: p.intent(),
			}
			runner, err := sandbox.New(e.ctx, p.runnerOptions(e.warning))
			if err != nil {
				return err
			}
			defer closeRunner(e, runner)
			in.Precompile = interruptible(runner.Precompile)
			if layout != "" {
				dst, err := fetch.OpenStore(resolveStoreArg("oci-layout:"+layout), false, fetch.Network{Timeout: networkTimeout()})
				if err != nil {
					return err
				}
				in.Layout = dst
			}
			rep, err := fetch.Warm(e.ctx, in)
			pr.finish(err)
			if rep != nil {
				err, _ = commandFailure(e, rep.Results, err)
			}
			if rep != nil && !e.g.json {
				if s := fetch.IntegritySummary(rep.Results); s != "" {
					e.Warn("%s", s)
				}
			}
			if e.g.json {
				if rep == nil {
					rep = &fetch.WarmReport{}
				}
				return jsonThen(e, warmJSON{rep.Artifacts, rep.Fetched, rep.Cached, rep.Compiled, rep.Bytes, toResultsJSON(rep.Results), rep.Problems}, err)
			}
			for _, pr := range rep.Problems {
				fmt.Fprintf(e.stdout, "%s %s: %s\n", pr.Kind, pr.Subject, pr.Problem)
			}
			if err == nil || len(rep.Problems) > 0 {
				fmt.Fprintf(e.stdout, "warm: %s ready (%d fetched, %s; %d already cached), %d compiled\n",
					plural(rep.Artifacts, "artifact"), rep.Fetched, cas.FormatSize(rep.Bytes), rep.Cached, rep.Compiled)
				if layout != "" && err == nil {
					fmt.Fprintf(e.stdout, "warm: wrote the layout store %s; on another machine, even offline: mur pull --store oci-layout:%s\n", layout, layout)
				}
			}
			return err
		},
	}
}
