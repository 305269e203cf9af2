package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/sandbox"
)

type pullFlags struct {
	platform     string
	update       bool
	from         []string
	stores       storeFlags
	jobs         int
	connections  int
	noPrecompile bool
}

func (f *pullFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.platform, "platform", "", "platform to pull for (default: this machine's)")
	fs.BoolVar(&f.update, "update", false, "move the lock to the version asked for")
	fs.StringSliceVar(&f.from, "from", nil, "narrow install.from for this pull: stores, sources")
	f.stores.register(fs, "add a store for this command")
	fs.IntVar(&f.jobs, "jobs", 4, "downloads at once (every artifact resolves at once); also bounds the connections of all downloads")
	fs.IntVar(&f.connections, "connections", fetch.DefaultConnections, "connections one large blob is fetched over, when its server serves ranges (1: one stream)")
	fs.StringVar(&f.stores.mirror, "mirror", "", "write every artifact brought in from elsewhere through to this registry (oci://HOST[:PORT]/PREFIX)")
	fs.BoolVar(&f.noPrecompile, "no-precompile", false, "don't compile wasm payloads after pulling")
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
Progress goes to stderr: one line per artifact on a terminal, plain lines otherwise.`,
		examples: `mur pull
mur pull acme/grep@1.2.0
mur pull acme/grep                      # the highest version, then pinned
mur pull --update acme/grep@1.3.0
mur pull --store oci://registry.internal:5000/murmur acme/grep@1.2.0
mur pull --plain-http --store oci://registry:5000/murmur acme/grep@1.2.0
mur pull --mirror oci://registry.internal:5000/murmur   # fill the team registry as you pull
mur pull ./grep-1.2.0.mur.zip           # as local/grep
mur pull --json acme/grep@1.2.0`,
		flags: f.register,
		run: func(e *env, args []string) error {
			return runPull(e, f, args)
		},
	}
}

func runPull(e *env, f *pullFlags, args []string) error {
	if err := checkPlatform(f.platform, false); err != nil {
		return err
	}
	for _, v := range f.from {
		if v != fetch.FromStores && v != fetch.FromSources {
			return usagef("--from %q is not one of stores, sources", v)
		}
	}
	p, err := e.openProject()
	if err != nil {
		return err
	}
	reqs, files, err := pullRequests(p, args, f)
	if err != nil {
		return err
	}
	store, err := openCAS(p.home)
	if err != nil {
		return err
	}
	stores, err := p.stores(f.stores)
	if err != nil {
		return err
	}
	pr := newProgress(e.stderr, e.g.quiet || e.g.json, "pull").watch(e)
	puller, err := p.chain(p.cacheCap(e, &fetch.Puller{
		CAS: store, Stores: append(files, stores...), Source: p.source(), Offline: e.Offline(),
		Platform: f.platform, Jobs: f.jobs, Events: pr.event,
	}), f.stores, f.connections)
	if err != nil {
		return err
	}
	if !f.noPrecompile {
		runner, err := sandbox.New(e.ctx, p.runnerOptions(func(s string) { e.Progress("mur: warning: %s", s) }))
		if err == nil {
			defer closeRunner(e, runner)
			puller.Precompile = interruptible(runner.Precompile)
			puller.Compiled = runner
		}
	}
	results, err := puller.Pull(e.ctx, p.Project, reqs)
	pr.finish(err)
	if e.g.json {
		out := make([]pullResult, len(results))
		for i, r := range results {
			out[i] = pullResult{Result: r, Error: toJSONError(r.Err)}
		}
		return jsonThen(e, struct {
			Results []pullResult `json:"results"`
		}{out}, err)
	} else {
		// A store that failed other than by lacking the artifact is worth a line, once per
		// command: the chain fell through it (fallback: any-error).
		warned := map[string]bool{}
		for _, r := range results {
			for _, s := range r.Skipped {
				if s.Token != "not-found" && !warned[s.Place] {
					warned[s.Place] = true
					e.Progress("mur: warning: %s: skipped %s: %s: %s", r.Name, s.Place, s.Token, s.Reason)
				}
			}
		}
		for _, r := range results {
			if r.Error != "" {
				continue
			}
			if r.NewPin != nil {
				scope, _, _ := strings.Cut(r.Name, "/")
				fmt.Fprintf(e.stdout, "pinned scope %s to %s (owner id %d, repo id %d) in murmur.lock\n",
					scope, r.NewPin.Source, r.NewPin.OwnerID, r.NewPin.RepoID)
			}
			fmt.Fprintf(e.stdout, "%s@%s %s %s\n", r.Name, r.Version, r.Digest, r.Platform)
			for _, w := range r.Warnings {
				if e.ctx.Err() == nil { // a compile cut short by Ctrl-C is not worth a warning
					e.Progress("mur: warning: %s: %s", r.Name, w)
				}
			}
		}
	}
	return err
}

// pullRequests turns arguments (or the capsule's declarations) into requests, with each
// artifact's install.from narrowed by the capsule and by --from.
func pullRequests(p *project, args []string, f *pullFlags) ([]fetch.Request, []fetch.Store, error) {
	var reqs []fetch.Request
	var files []fetch.Store
	fromFor := func(name string) ([]string, error) { return p.installFrom(name, f.from) }
	if len(args) == 0 {
		if p.capsule == nil {
			return nil, nil, usagef("no REF given and no murmur.yaml in %s; name what to pull, for example 'mur pull acme/grep@1.2.0'", p.Dir)
		}
		if len(p.capsule.Artifacts) == 0 {
			return nil, nil, usagef("%s declares no artifacts; add one under artifacts: or name it, e.g. 'mur pull acme/grep@1.2.0'", p.capsule.Path)
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
		r, err := parseRef(arg)
		if err != nil {
			return nil, nil, err
		}
		if r.IsFile() {
			fs, err := fetch.OpenFile(r.Path)
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

// pullResult is one artifact of `mur pull --json`: the pull's result, with its failure as
// {"token", "message"}.
type pullResult struct {
	fetch.Result
	Error *jsonError `json:"error"`
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
