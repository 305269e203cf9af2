package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

func lockCmd() *command {
	var (
		f              pullFlags
		bump, dry, chk bool
	)
	return &command{name: "lock", args: "[REF...]", short: "pin what murmur.yaml declares, from metadata alone",
		long: `Resolves every artifact murmur.yaml declares (or the REFs named) and pins it in murmur.lock
from metadata alone: a registry's manifest, a layout's index.json, a GitHub source's index. It
downloads no payload and stages no tools/; the next pull checks the bytes against the pin. A
latest entry stays at its pin unless --bump; an entry whose version changed moves; a pin no
entry declares is dropped (when no REF is named). --bump NAME also moves an exact entry named to
the newest release, in murmur.yaml as well as murmur.lock, and says so ("declared NAME@VERSION
in murmur.yaml"), as 'mur pull --update' does. --check changes nothing and fails with
lock-mismatch when murmur.lock does not follow murmur.yaml.`,
		examples: `mur lock
mur lock --check                        # CI: fail if murmur.lock does not follow murmur.yaml
mur lock --bump                         # move latest entries to the newest version
mur lock --bump acme/grep               # move acme/grep to the newest version, in murmur.yaml too
mur lock acme/grep --dry-run --json
mur lock forget-scope acme`,
		flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&bump, "bump", false, "move latest entries to the newest version; with REFs, the exact entries named too, in murmur.yaml as well")
			fs.BoolVar(&dry, "dry-run", false, "resolve and report, write nothing")
			fs.BoolVar(&chk, "check", false, "only check that murmur.lock follows murmur.yaml; no network, no writes")
			f.platform.registerPins(fs, "pin for", false)
			fs.StringSliceVar(&f.from, "from", nil, "narrow install.from: stores, sources")
			f.stores.register(fs, "add a store for this command")
		},
		run: func(e *env, args []string) error { return runLock(e, &f, args, bump, dry, chk) },
		subs: []*command{
			{
				name:  "forget-scope",
				args:  "SCOPE",
				short: "forget a scope's owner pin",
				long: `Removes the owner pin of SCOPE from murmur.lock, so that the next source pull of SCOPE
pins the repository's current owner again. Use it after a transfer of the repository that you
expected; mur refuses a changed owner until then. Pinned artifact hashes are kept.`,
				examples: `mur lock forget-scope acme
mur lock forget-scope acme --json`,
				run: runForgetScope,
			},
		}}
}

func runLock(e *env, f *pullFlags, args []string, bump, dryRun, check bool) error {
	if err := f.platform.check(); err != nil {
		return err
	}
	p, l, err := e.openLocked()
	if err != nil {
		return err
	}
	in := p.intent()
	if in == nil {
		return usagef("no murmur.yaml in %s or above; mur lock pins what murmur.yaml declares", p.Dir)
	}
	if check {
		if len(args) > 0 || bump || dryRun {
			return usagef("--check takes no REF, --bump or --dry-run: it checks the whole lock and changes nothing")
		}
		ms := in.Mismatches(l, f.platform.value)
		if e.g.json {
			return jsonThen(e, struct {
				Mismatches []lock.Mismatch `json:"mismatches"`
			}{ms}, lock.MismatchError(ms))
		}
		if err := lock.MismatchError(ms); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s follows %s\n", p.LockPath(), in.Path)
		return nil
	}
	reqs, _, err := pullRequests(p, "lock", args, f)
	if err != nil {
		return err
	}
	// Metadata only: one connection, and nothing is brought in for a mirror to receive.
	f.stores.mirror = ""
	// The CAS keeps the bundles that verify, where the lock's provenance records point.
	store, err := openCAS(p.home)
	if err != nil {
		return err
	}
	puller, err := p.puller(e, f.stores, fetch.PullerOptions{CAS: store, Platform: f.platform.value, Connections: 1})
	if err != nil {
		return err
	}
	rep, err := puller.LockProject(e.ctx, p.Project, *in, reqs, fetch.LockOptions{Args: len(args) > 0, Bump: bump, DryRun: dryRun})
	if e.g.json {
		return jsonThen(e, rep, err)
	}
	for _, w := range rep.Warnings {
		e.Warn("%s", w)
	}
	for _, c := range rep.Changes {
		if c.Action != fetch.LockKept || err == nil {
			fmt.Fprintln(e.stdout, c.String())
		}
	}
	if err == nil {
		for _, d := range rep.Declared {
			if dryRun {
				fmt.Fprintf(e.stdout, "would declare %s in %s\n", d, in.Path)
			} else {
				fmt.Fprintf(e.stdout, "declared %s in %s\n", d, in.Path)
			}
		}
		switch {
		case dryRun:
			fmt.Fprintf(e.stdout, "dry run: %s was not changed\n", p.LockPath())
		case !rep.Changed():
			fmt.Fprintf(e.stdout, "%s already follows %s\n", p.LockPath(), in.Path)
		}
	}
	return err
}

// forgetResult is the --json output of `mur lock forget-scope`.
type forgetResult struct {
	Lock    string         `json:"lock"`
	Scope   string         `json:"scope"`
	Removed bool           `json:"removed"`
	Pin     *lock.ScopePin `json:"pin"` // the same shape as pull's new_pin
}

func runForgetScope(e *env, args []string) error {
	if len(args) != 1 {
		return usagef("mur lock forget-scope takes exactly one SCOPE, found %d arguments; for example: mur lock forget-scope acme", len(args))
	}
	scope := args[0]
	if err := ref.ValidateSegment(scope); err != nil {
		return usagef("scope %s; a scope is the lowercase GitHub owner, for example acme", errs.Message(err))
	}
	wd, err := os.Getwd()
	if err != nil {
		return errs.Wrap(err, errs.IO, "can't find the current folder: %v", err)
	}
	dir, err := fetch.FindProject(wd)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, lock.FileName)
	removed, err := fetch.ForgetScope(e.ctx, fetch.Project{Dir: dir}, scope)
	if err != nil {
		return err
	}
	if e.g.json {
		return e.JSON(forgetResult{Lock: path, Scope: scope, Removed: removed != nil, Pin: removed})
	}
	if removed == nil {
		fmt.Fprintf(e.stdout, "%s has no owner pin for scope %s; nothing changed\n", path, scope)
		return nil
	}
	fmt.Fprintf(e.stdout, "forgot scope %s in %s (was %s, owner id %d, repo id %d); the next source pull of %s pins its current owner\n",
		scope, path, removed.Source, removed.OwnerID, removed.RepoID, scope)
	return nil
}
