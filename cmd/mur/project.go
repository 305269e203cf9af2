package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/github"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/lock"
	"github.com/murmur-nexus/mur/sandbox"
	"github.com/murmur-nexus/mur/state"
)

// project is what most commands work on: the folder with murmur.yaml and murmur.lock, the
// capsule manifest when there is one, the configuration and the Murmur home.
type project struct {
	fetch.Project
	capsule *manifest.Capsule // nil when the folder has no murmur.yaml
	cfg     *fetch.Config
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
	dir, err := findProject(cwd)
	if err != nil {
		return nil, err
	}
	h, err := e.Home()
	if err != nil {
		return nil, err
	}
	p := &project{Project: fetch.Project{Dir: dir}, home: h}
	mpath := filepath.Join(dir, "murmur.yaml")
	if _, err := os.Stat(mpath); err == nil {
		c, err := manifest.Load(mpath)
		if err != nil {
			return nil, err
		}
		if err := state.CheckCapsule(c); err != nil {
			return nil, err
		}
		for _, w := range c.Warnings {
			e.Progress("mur: warning: %s", w)
		}
		for _, w := range c.GrantWarnings {
			e.SandboxWarning(w)
		}
		p.capsule = c
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Wrap(err, errs.IO, "can't read %s: %v", mpath, err)
	}
	cfg, err := fetch.LoadConfig(h.ConfigFile(), dir)
	if err != nil {
		return nil, err
	}
	for _, w := range cfg.Warnings {
		e.Progress("mur: warning: %s", w)
	}
	p.cfg = cfg
	return p, nil
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

// stores opens the stores of one command: those given with --store first, then the project's
// and the user's configuration. --plain-http applies to the --store registries; a configured
// store is plain HTTP when config.yaml says plain_http: true for it.
func (p *project) stores(f storeFlags) ([]fetch.Store, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	cwd, _ := os.Getwd()
	var addrs []string
	plain := map[string]bool{}
	for _, a := range f.stores {
		if err := fetch.ValidateStoreAddress(a); err != nil {
			return nil, err
		}
		r := fetch.ResolveStore(a, cwd)
		addrs = append(addrs, r)
		plain[r] = f.plainHTTP
	}
	addrs = append(addrs, p.cfg.Stores...)
	seen := map[string]bool{}
	var out []fetch.Store
	pool := ocistore.NewPool() // one authenticated transport per registry for this command
	for _, a := range addrs {
		if seen[a] {
			continue
		}
		seen[a] = true
		opt := storeOptions()
		opt.Pool = pool
		opt.PlainHTTP = plain[a] || p.cfg.PlainHTTP[a]
		s, err := ocistore.Open(a, opt)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// source is the GitHub source of every scope, labelled by the configuration.
func (p *project) source() fetch.Source {
	opt := github.ClientOptionsFromEnv()
	if t := networkTimeout(); t > 0 {
		opt.Timeout = t
	}
	return github.NewSource(github.NewClient(opt), p.cfg.SourceFor)
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
		return 0, usagef("MUR_NETWORK_TIMEOUT is %q; expected a positive duration such as 30s or 2m, or unset it for the default of %s", v, ocistore.DefaultTimeout)
	}
	return d, nil
}

// chain applies the stores' fallbacks and the write-through mirror (config.yaml's mirror:, or
// --mirror) to a puller, and the per-blob connection count.
func (p *project) chain(pl *fetch.Puller, f storeFlags, connections int) (*fetch.Puller, error) {
	if connections < 1 {
		return nil, usagef("--connections is %d; give at least 1 (1 fetches every blob as one stream)", connections)
	}
	pl.Fallbacks = p.cfg.Fallbacks
	pl.Connections = connections
	addr, plain := p.cfg.Mirror, p.cfg.PlainHTTP[p.cfg.Mirror]
	if f.mirror != "" {
		if !strings.HasPrefix(f.mirror, fetch.SchemeOCI) {
			return nil, usagef("--mirror %q is not a registry; write oci://HOST[:PORT]/PREFIX (a folder is filled with 'mur warm --layout DIR')", f.mirror)
		}
		if err := fetch.ValidateStoreAddress(f.mirror); err != nil {
			return nil, err
		}
		addr, plain = f.mirror, f.plainHTTP
	}
	if addr == "" {
		return pl, nil
	}
	opt := storeOptions()
	opt.PlainHTTP = plain
	m, err := ocistore.Open(addr, opt)
	if err != nil {
		return nil, err
	}
	pl.Mirror, pl.MirrorRequired = m, p.cfg.MirrorRequired
	return pl, nil
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

// cacheCap makes a puller trim the CAS to cache.max_size after it pulls, removing what the
// compiled cache derives from each blob that goes, and report what it could not do.
func (p *project) cacheCap(e *env, pl *fetch.Puller) *fetch.Puller {
	pl.MaxCacheSize = p.cfg.MaxCacheSize
	pl.Evict = func(ctx context.Context, d digest.Digest, dryRun bool) []string {
		return sandbox.Evict(ctx, p.home.Compiled(), pl.CAS, d, dryRun)
	}
	pl.Warn = func(msg string) { e.Progress("mur: warning: %s", msg) }
	pl.Verifier = e.verifier()
	pl.Policy = p.cfg.ProvenanceFor
	return pl
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

func (f storeFlags) check() error {
	if f.plainHTTP && len(f.stores) == 0 && f.mirror == "" {
		return usagef("--plain-http applies to the registries given with --store or --mirror; for a store in config.yaml write it as {url: oci://HOST:PORT/PREFIX, plain_http: true}")
	}
	return nil
}

func storeOptions() ocistore.Options {
	return ocistore.Options{Timeout: networkTimeout()}
}

// resolveStoreArg makes a relative oci-layout: path given on the command line absolute.
func resolveStoreArg(addr string) string {
	cwd, _ := os.Getwd()
	return fetch.ResolveStore(addr, cwd)
}

// installFrom is where a pull of name may look: the artifact's effective install.from, else
// the capsule's, else both kinds, narrowed by --from.
func (p *project) installFrom(name string, flag []string) ([]string, error) {
	from := fetch.DefaultFrom
	if p.capsule != nil {
		from = p.capsule.Capabilities.Install.From
		if a, err := p.capsule.Find(name); err == nil {
			from = p.capsule.Effective(a).Install.From
		}
	}
	if from == nil {
		from = fetch.DefaultFrom
	}
	if flag != nil {
		return manifest.NarrowFrom(from, flag)
	}
	return from, nil
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
