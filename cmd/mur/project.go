package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/lock"
	"github.com/murmur-nexus/mur/sandbox"
	"github.com/murmur-nexus/mur/state"
)

// project is what most commands work on: the project as fetch opened it (its folder, capsule
// manifest and configuration) and the Murmur home.
type project struct {
	*fetch.Workspace
	capsule *manifest.Capsule // nil when the folder has no murmur.yaml
	cfg     *config.Config
	home    Home
}

func (e *env) openProject() (*project, error) {
	if _, err := networkTimeoutFromEnv(); err != nil {
		return nil, err
	}
	if _, err := compileWorkersFromEnv(); err != nil {
		return nil, err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, errs.Wrap(err, errs.IO, "can't read the current folder: %v", err)
	}
	h, err := e.Home()
	if err != nil {
		return nil, err
	}
	w, err := fetch.OpenProject(cwd, h.ConfigFile())
	if err != nil {
		return nil, err
	}
	if w.Capsule != nil {
		if err := state.CheckCapsule(w.Capsule); err != nil {
			return nil, err
		}
	}
	for _, msg := range w.Warnings {
		e.warning(msg)
	}
	if w.Capsule != nil {
		for _, g := range w.Capsule.GrantWarnings {
			e.warning(g)
		}
	}
	return &project{Workspace: w, capsule: w.Capsule, cfg: w.Config, home: h}, nil
}

// openLocked opens the project and reads its murmur.lock (empty when there is none).
func (e *env) openLocked() (*project, *lock.Lock, error) {
	p, err := e.openProject()
	if err != nil {
		return nil, nil, err
	}
	l, err := lock.Read(p.LockPath())
	if err != nil {
		return nil, nil, err
	}
	return p, l, nil
}

// openCAS opens the content-addressed store, creating the home at 0700 if needed.
func openCAS(h Home) (*cas.Store, error) {
	if err := h.Ensure(); err != nil {
		return nil, err
	}
	return cas.Open(h.CAS())
}

// puller is the command's Puller, as fetch assembles it from the project, the flags f and o:
// this file only hands it the network's settings and the compiled cache's eviction.
func (p *project) puller(e *env, f storeFlags, o fetch.PullerOptions) (*fetch.Puller, error) {
	o.Stores, o.PlainHTTP, o.Mirror = f.stores, f.plainHTTP, f.mirror
	o.WorkDir, _ = os.Getwd()
	o.Offline = e.Offline()
	o.Network = fetch.Network{Timeout: networkTimeout(), Registries: p.home.Registries()}
	o.Verifier = e.trustingVerifier(p.home, p.cfg)
	o.Warn = e.warning
	o.Evict = func(ctx context.Context, d digest.Digest, dryRun bool) []string {
		return sandbox.Evict(ctx, p.home.Compiled(), o.CAS, d, dryRun)
	}
	return p.Workspace.Puller(o)
}

// networkTimeout is MUR_NETWORK_TIMEOUT: how long a registry or GitHub may stay silent before
// mur gives up on a request; 0 (unset) means each client's default. openProject refuses an
// invalid value, so every command that reaches the network has checked it.
func networkTimeout() time.Duration {
	d, _ := networkTimeoutFromEnv()
	return d
}

// networkTimeoutFromEnv reads MUR_NETWORK_TIMEOUT: unset or empty is 0; anything but a positive
// duration is a usage error, rather than a silent fall back to the default.
func networkTimeoutFromEnv() (time.Duration, error) {
	v := strings.TrimSpace(os.Getenv("MUR_NETWORK_TIMEOUT"))
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, usagef("MUR_NETWORK_TIMEOUT is %q; expected a positive duration such as 30s or 2m, or unset it for the default of %s", v, fetch.DefaultTimeout)
	}
	return d, nil
}

// runnerOptions are the sandbox options every command that compiles or runs uses: the home's
// compiled cache and MUR_COMPILE_WORKERS.
func (p *project) runnerOptions(warn func(string)) sandbox.Options {
	n, _ := compileWorkersFromEnv()
	return sandbox.Options{CacheDir: p.home.Compiled(), Warn: warn, CompileWorkers: n}
}

// compileWorkersFromEnv reads MUR_COMPILE_WORKERS: unset or empty is 0 (one per core, at most
// sandbox.MaxCompileWorkers); anything but a positive whole number is a usage error.
func compileWorkersFromEnv() (int, error) {
	v := strings.TrimSpace(os.Getenv("MUR_COMPILE_WORKERS"))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > 256 {
		return 0, usagef("MUR_COMPILE_WORKERS is %q; expected a whole number from 1 to 256, or unset it for one per core (at most %d)", v, sandbox.MaxCompileWorkers)
	}
	return n, nil
}

// storeFlags are --store and --plain-http, for the commands that read from stores, and --mirror
// for those that write through.
type storeFlags struct {
	stores    []string
	plainHTTP bool
	mirror    string
}

func (f *storeFlags) register(fs *pflag.FlagSet, usage string) {
	fs.StringArrayVar(&f.stores, "store", nil, usage+" (oci://HOST[:PORT]/PREFIX or oci-layout:PATH)")
	fs.BoolVar(&f.plainHTTP, "plain-http", false, "speak plain HTTP to the --store (and --mirror) registries (mur never does off loopback on its own)")
}

// registerMirror adds --mirror, for the commands that bring artifacts in and may write them
// through.
func (f *storeFlags) registerMirror(fs *pflag.FlagSet) {
	fs.StringVar(&f.mirror, "mirror", "", "write every artifact brought in from elsewhere through to this registry (oci://HOST[:PORT]/PREFIX)")
}

// resolveStoreArg makes a relative oci-layout: path given on the command line absolute.
func resolveStoreArg(addr string) string {
	cwd, _ := os.Getwd()
	return store.ResolveStore(addr, cwd)
}

// intent is the project's murmur.yaml for the checks of murmur.lock against it; nil when the
// folder has none (a lock on its own is warmed and verified as it is).
func (p *project) intent() *fetch.Intent {
	if p.capsule == nil {
		return nil
	}
	return &fetch.Intent{Path: p.capsule.Path, Capsule: p.capsule}
}

// lockedFlags are --locked and --frozen, for the commands that read murmur.lock.
type lockedFlags struct {
	locked bool
	frozen bool
}

func (f *lockedFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.locked, "locked", false, "fail with lock-mismatch if murmur.lock does not follow murmur.yaml")
	fs.BoolVar(&f.frozen, "frozen", false, "--locked and --offline")
}

// check applies --frozen's --offline and, under --locked, refuses a lock that does not follow
// murmur.yaml before the command does anything.
func (f *lockedFlags) check(e *env, p *project, l *lock.Lock, platform string) error {
	if f.frozen {
		f.locked, e.g.offline = true, true
	}
	if !f.locked {
		return nil
	}
	in := p.intent()
	if in == nil {
		return usagef("--locked checks murmur.lock against murmur.yaml, and there is no murmur.yaml in %s or above", p.Dir)
	}
	return lock.MismatchError(in.Mismatches(l, platform))
}
