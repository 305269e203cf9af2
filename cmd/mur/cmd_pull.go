package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/config"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
	"github.com/murmur-nexus/mur/sandbox"
)

type pullFlags struct {
	platform     platformFlag
	update       bool
	from         []string
	stores       storeFlags
	download     downloadFlags
	noPrecompile bool
	precompile   bool // outside a project, where nothing runs what a pull brings
	provenance   string
	locked       bool
	frozen       bool
	output       string
}

func (f *pullFlags) register(fs *pflag.FlagSet) {
	f.platform.registerPins(fs, "pull for", true)
	fs.BoolVar(&f.update, "update", false, "move the lock to the version asked for")
	fs.StringSliceVar(&f.from, "from", nil, "narrow install.from for this pull: stores, sources")
	f.stores.register(fs, "add a store for this command")
	f.download.register(fs, true)
	f.stores.registerMirror(fs)
	fs.BoolVar(&f.noPrecompile, "no-precompile", false, "don't compile wasm payloads after pulling")
	fs.BoolVar(&f.precompile, "precompile", false, "compile wasm payloads outside a project too (inside one it is the default)")
	fs.StringVar(&f.provenance, "provenance", "", "provenance policy for this command, over every scope's: require, prefer or off")
	fs.BoolVar(&f.locked, "locked", false, "fail with lock-mismatch if murmur.lock does not follow murmur.yaml; write neither")
	fs.BoolVar(&f.frozen, "frozen", false, "--locked and --offline")
	registerOutput(fs, &f.output, "", "also write each pulled .mur.zip into this folder")
}

func pullCmd() *command {
	f := &pullFlags{}
	return &command{
		name:  "pull",
		args:  "[REF...]",
		short: "pull artifacts into the CAS, murmur.lock and tools/",
		long: `With no REF, pulls every artifact murmur.yaml declares. A REF is scope/name@version,
scope/name (latest), or a path to a .mur.zip file (scope local). Pinned digests come from
murmur.lock; a locked pull whose blobs are all in the CAS makes no network request.

murmur.yaml is the intent and murmur.lock follows it: an entry whose version changed is
re-resolved (acme/grep: 1.0.0 → 1.1.0), a latest entry stays at its pin until --update, and a
pin no entry declares is dropped with its tools/ folder. A REF murmur.yaml does not declare is
added to it, at the exact version it resolved to, as 'mur add' does. --update of an entry with
an exact version moves murmur.yaml's version with the pin. --locked changes neither file.

Outside a project (no murmur.yaml here or above) a pull fills the CAS and the pull records
only, and says where the blob is; -o DIR also writes the .mur.zip there. Nothing there runs
what it brings, so it compiles nothing unless asked with --precompile.
Progress goes to stderr: one line per artifact on a terminal, plain lines otherwise.`,
		examples: `mur pull
mur pull acme/grep@1.2.0
mur pull acme/grep                      # the highest version, then pinned
mur pull --update acme/grep@1.3.0
mur pull --store oci://registry.internal:5000/murmur acme/grep@1.2.0
mur pull --plain-http --store oci://registry:5000/murmur acme/grep@1.2.0
mur pull --mirror oci://registry.internal:5000/murmur   # fill the team registry as you pull
mur pull ./grep-1.2.0.mur.zip           # as local/grep
mur pull --locked                       # CI: fail if murmur.lock does not follow murmur.yaml
mur pull -o . acme/grep@1.2.0           # outside a project: the .mur.zip, as oras pull -o
mur pull --json acme/grep@1.2.0`,
		flags: f.register,
		run: func(e *env, args []string) error {
			return runPull(e, f, args)
		},
	}
}

func runPull(e *env, f *pullFlags, args []string) error {
	return pullWith(e, f, args, false)
}

// pullWith is mur pull, and mur add when add is set: the REFs are then declared, moving entries
// murmur.yaml already has.
func pullWith(e *env, f *pullFlags, args []string, add bool) error {
	if err := f.platform.check(); err != nil {
		return err
	}
	if f.precompile && f.noPrecompile {
		return usagef("--precompile and --no-precompile contradict each other; give one")
	}
	// --platform all means what it means to warm and verify: every platform murmur.lock pins.
	// The pull itself is this machine's (it syncs the lock and stages tools/); the other pinned
	// platforms' blobs follow into the CAS.
	allPlatforms := f.platform.value == "all"
	if allPlatforms {
		f.platform.value = ""
	}
	if f.provenance != "" {
		if err := config.ValidProvenanceMode(f.provenance); err != nil {
			return usagef("--provenance: %s", errs.Message(err))
		}
	}
	for _, v := range f.from {
		if err := manifest.CheckFrom(v); err != nil {
			return usagef("--from %s", errs.Message(err))
		}
	}
	if f.frozen {
		f.locked, e.g.offline = true, true
	}
	if f.locked && f.update {
		return usagef("--locked and --update contradict each other: --update moves pins, --locked refuses to; drop one")
	}
	p, err := e.openProject()
	if err != nil {
		return err
	}
	if add && p.capsule == nil {
		return usagef("no murmur.yaml in %s or above, so there is nothing to add to; create one (name: my-capsule) or use 'mur pull REF' to fill the cache only", p.Dir)
	}
	if allPlatforms && p.capsule == nil {
		return usagef("--platform all pulls every platform murmur.lock pins, and there is no murmur.yaml in %s or above; name one platform, e.g. --platform %s", p.Dir, ref.HostPlatform())
	}
	if f.locked && p.capsule == nil {
		return usagef("--locked checks murmur.lock against murmur.yaml, and there is no murmur.yaml in %s or above", p.Dir)
	}
	verb := "pull"
	if add {
		verb = "add"
	}
	reqs, files, err := pullRequests(p, verb, args, f)
	if err != nil {
		return err
	}
	store, err := openCAS(p.home)
	if err != nil {
		return err
	}
	pr := newProgress(e.stderr, e.g.quiet || e.g.json, "pull").watch(e)
	o := fetch.PullerOptions{
		CAS: store, Files: files, Platform: f.platform.value, Jobs: f.download.jobs, Connections: f.download.connections, Events: pr.event,
		Provenance: f.provenance, CASOnly: p.capsule == nil, Locked: f.locked,
	}
	// Inside a project its tools run from here, so a pull compiles them; outside one, compiling
	// would be most of the pull's time for nothing that runs.
	if !f.noPrecompile && (p.capsule != nil || f.precompile) {
		runner, err := sandbox.New(e.ctx, p.runnerOptions(e.warning))
		if err == nil {
			defer closeRunner(e, runner)
			o.Precompile, o.Compiled = interruptible(runner.Precompile), runner
		}
	}
	puller, err := p.puller(e, f.stores, o)
	if err != nil {
		return err
	}
	names := make([]string, len(reqs))
	for i, r := range reqs {
		names[i] = r.Name.String()
	}
	pr.expect(names)
	rep := &fetch.SyncReport{}
	if p.capsule == nil {
		rep.Results, err = puller.Pull(e.ctx, p.Project, reqs)
	} else {
		rep, err = puller.PullProject(e.ctx, p.Project, fetch.Intent{Path: p.capsule.Path, Capsule: p.capsule}, reqs,
			fetch.SyncOptions{Args: len(args) > 0, Locked: f.locked, Add: add})
	}
	if allPlatforms && err == nil {
		err = pullOtherPlatforms(e, p, puller, reqs, rep)
	}
	pr.finish(err)
	err, covered := commandFailure(e, rep.Results, err)
	out := toResultsJSON(rep.Results)
	for i, r := range rep.Results {
		if r.Error == "" && r.Digest != "" && p.capsule == nil {
			out[i].Blob = store.Path(digest.Digest(r.Digest))
		}
		if r.Error == "" && r.Digest != "" && f.output != "" {
			n, _ := ref.ParseName(r.Name)
			file, werr := fetch.WriteZip(e.ctx, store, digest.Digest(r.Digest), f.output, fetch.ZipName(n, r.Version, r.Platform))
			if werr != nil && err == nil {
				err = werr
			}
			out[i].File = file
		}
	}
	if e.g.json {
		return jsonThen(e, struct {
			Results  []resultJSON `json:"results"`
			Moved    []fetch.Move `json:"moved"`
			Declared []string     `json:"declared"`
			Removed  []string     `json:"removed"`
		}{out, rep.Moved, rep.Declared, rep.Removed}, err)
	}
	// A store that failed other than by lacking the artifact is worth a warning, once per
	// command: the chain fell through it (fallback: any-error).
	warned := map[string]bool{}
	for _, r := range rep.Results {
		for _, s := range r.Skipped {
			if s.Token != "not-found" && !warned[s.Place] {
				warned[s.Place] = true
				e.Warn("%s: skipped %s: %s: %s", r.Name, s.Place, s.Token, s.Reason)
			}
		}
	}
	printFailures(e, rep.Results, err, covered)
	for _, m := range rep.Moved {
		fmt.Fprintln(e.stdout, m.String())
	}
	for i, r := range out {
		if rep.Results[i].Error != "" {
			continue
		}
		if r.NewPin != nil {
			scope, _, _ := strings.Cut(r.Name, "/")
			fmt.Fprintf(e.stdout, "pinned scope %s to %s (owner id %d, repo id %d) in murmur.lock\n",
				scope, r.NewPin.Source, r.NewPin.OwnerID, r.NewPin.RepoID)
		}
		fmt.Fprintf(e.stdout, "%s@%s %s %s\n", r.Name, r.Version, resultDigest(e.stdout, r.Digest), r.Platform)
		if r.Blob != "" {
			fmt.Fprintf(e.stdout, "  in the CAS at %s (no murmur.yaml here or above: murmur.lock and tools/ were not written)\n", r.Blob)
		}
		if r.File != "" {
			fmt.Fprintf(e.stdout, "  wrote %s\n", r.File)
		}
		for _, w := range r.Warnings {
			if w == rep.Results[i].Unsigned { // said once per scope, below
				continue
			}
			if strings.HasPrefix(w, "stale-index: ") { // names the artifact itself, after its token
				e.Warn("%s", w)
				continue
			}
			if e.ctx.Err() == nil { // a compile cut short by Ctrl-C is not worth a warning
				e.Warn("%s: %s", r.Name, w)
			}
		}
	}
	if e.ctx.Err() == nil {
		for _, w := range fetch.UnsignedWarnings(rep.Results) {
			e.Warn("%s", w)
		}
	}
	if s := fetch.IntegritySummary(rep.Results); s != "" {
		e.Warn("%s", s)
	}
	if len(args) == 0 && p.capsule != nil && len(p.capsule.Artifacts) == 0 {
		e.Progress("pull: %s declares no artifacts; add one with 'mur add acme/grep@1.2.0'", p.capsule.Path)
	}
	for _, d := range rep.Declared {
		fmt.Fprintf(e.stdout, "declared %s in %s\n", d, p.capsule.Path)
	}
	if err == nil && (add || len(rep.Declared) > 0) {
		warnStoresNotKept(e, p, f.stores.stores)
	}
	for _, name := range rep.Removed {
		fmt.Fprintf(e.stdout, "removed %s: murmur.yaml no longer declares it, so its murmur.lock entry and tools/ folder are gone ('mur cache gc' may free its blob)\n", name)
	}
	return err
}

// pullRequests turns arguments (or the capsule's declarations) into requests, with each
// artifact's install.from narrowed by the capsule and by --from.
func pullRequests(p *project, verb string, args []string, f *pullFlags) ([]fetch.Request, []fstore.Store, error) {
	var reqs []fetch.Request
	var files []fstore.Store
	fromFor := func(name string) ([]string, error) { return p.InstallFrom(name, f.from) }
	if len(args) == 0 {
		if p.capsule == nil {
			return nil, nil, usagef("no REF given and no murmur.yaml in %s; name what to pull, for example 'mur pull acme/grep@1.2.0'", p.Dir)
		}
		for _, a := range p.capsule.Artifacts {
			from, err := fromFor(a.Name.String())
			if err != nil {
				return nil, nil, err
			}
			reqs = append(reqs, fetch.Request{Asked: a.Name.String() + "@" + a.Version, Name: a.Name, Version: a.Version, From: from, Update: f.update})
		}
		return reqs, nil, nil
	}
	seen := map[string]bool{}
	for _, arg := range args {
		r, err := parseRef(verb, arg)
		if err != nil {
			return nil, nil, err
		}
		if r.IsFile() {
			fs, err := fstore.OpenFile(r.Path)
			if err != nil {
				return nil, nil, err
			}
			d := fs.Descriptor()
			files = append(files, fs)
			r = ref.Ref{Name: d.Name, Version: d.Version}
		}
		if seen[r.Name.String()] {
			return nil, nil, usagef("%s is named twice; pull one version of it at a time", r.Name)
		}
		seen[r.Name.String()] = true
		from, err := fromFor(r.Name.String())
		if err != nil {
			return nil, nil, err
		}
		if r.Name.Scope == ref.ScopeLocal {
			from = []string{fetch.FromStores}
		}
		reqs = append(reqs, fetch.Request{Asked: arg, Name: r.Name, Version: r.Version, From: from, Update: f.update})
	}
	return reqs, files, nil
}

// pullOtherPlatforms brings in the blobs of every platform murmur.lock pins for reqs beyond the
// ones this machine's pull already has, adding their results to rep.
func pullOtherPlatforms(e *env, p *project, puller *fetch.Puller, reqs []fetch.Request, rep *fetch.SyncReport) error {
	l, err := lock.Read(p.LockPath())
	if err != nil {
		return err
	}
	only := map[string]bool{}
	for _, r := range reqs {
		only[r.Name.String()] = true
	}
	wrep, err := fetch.Warm(e.ctx, fetch.WarmInput{
		Project: p.Project, Lock: l, Puller: puller, Platform: "all", Only: only,
		From: func(name string) ([]string, error) { return p.InstallFrom(name, nil) },
	})
	have := map[string]bool{}
	for _, r := range rep.Results {
		have[r.Name+" "+r.Platform] = true
	}
	if wrep != nil {
		for _, r := range wrep.Results {
			if !have[r.Name+" "+r.Platform] {
				have[r.Name+" "+r.Platform] = true
				rep.Results = append(rep.Results, r)
			}
		}
	}
	return err
}

// jsonThen sets the --json result and passes err on, so that a failed command still reports
// what it did.
func jsonThen(e *env, v any, err error) error {
	if jerr := e.JSON(v); jerr != nil {
		return jerr
	}
	return err
}

// interruptible returns at once when ctx ends, leaving a compile that wazero can't cut short to
// finish (or be abandoned) on its own: Ctrl-C must not wait seconds for it.
func interruptible(compile func(context.Context, []byte) error) func(context.Context, []byte) error {
	return func(ctx context.Context, wasm []byte) error {
		done := make(chan error, 1)
		go func() { done <- compile(ctx, wasm) }()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// closeRunner closes the runner unless the command was interrupted, when a compile may still be
// running in it and closing would wait for that compile.
func closeRunner(e *env, r *sandbox.Runner) {
	if e.ctx.Err() == nil {
		r.Close(context.Background())
	}
}
