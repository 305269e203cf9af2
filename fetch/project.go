package fetch

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/lock"
)

// Workspace is a project opened for the commands that pull: where it is, the capsule manifest
// when there is one, and the configuration that applies to it. Its Puller is the one assembly
// of stores, source, fallbacks and mirror that pull, warm and verify --repair share.
type Workspace struct {
	pull.Project
	Capsule  *manifest.Capsule // nil when the folder has no murmur.yaml
	Config   *config.Config
	Warnings []string // what the capsule and the configuration ignored
}

// FindProject is the project start lies in: the nearest folder, from start up, that holds
// murmur.yaml or murmur.lock; start itself when none does.
func FindProject(start string) (string, error) {
	abs, err := filepath.Abs(start)
	if err != nil {
		return "", errs.Wrap(err, errs.IO, "can't make %q absolute: %v", start, err)
	}
	for dir := abs; ; {
		for _, name := range []string{manifest.FileName, lock.FileName} {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err == nil && !fi.IsDir() {
				return dir, nil
			}
			// A folder we may not search, or start naming a file, is just not a project.
			if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) && !errors.Is(err, syscall.ENOTDIR) {
				return "", errs.Wrap(err, errs.IO, "looking for the project of %s: can't check %s: %v", abs, filepath.Join(dir, name), err)
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return abs, nil
		}
		dir = parent
	}
}

// OpenProject opens the project start lies in (FindProject): its murmur.yaml, when there is one,
// and the configuration of homeConfig and the project's own .murmur/config.yaml.
func OpenProject(start, homeConfig string) (*Workspace, error) {
	dir, err := FindProject(start)
	if err != nil {
		return nil, err
	}
	w := &Workspace{Project: pull.Project{Dir: dir}}
	mpath := filepath.Join(dir, manifest.FileName)
	if _, err := os.Stat(mpath); err == nil {
		c, err := loadIntent(mpath) // stable: not the half an editor is saving
		if err != nil {
			return nil, err
		}
		w.Capsule = c
		w.Warnings = append(w.Warnings, c.Warnings...)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Wrap(err, errs.IO, "can't read %s: %v", mpath, err)
	}
	cfg, err := config.Load(homeConfig, dir)
	if err != nil {
		return nil, err
	}
	w.Config = cfg
	w.Warnings = append(w.Warnings, cfg.Warnings...)
	return w, nil
}

// InstallFrom is where a pull of name may look: the artifact's effective install.from, else the
// capsule's, else stores then sources, narrowed by --from (flag; nil leaves it).
func (w *Workspace) InstallFrom(name string, flag []string) ([]string, error) {
	var from []string
	if w.Capsule != nil {
		from = w.Capsule.Capabilities.Install.From
		if a, err := w.Capsule.Find(name); err == nil {
			from = w.Capsule.Effective(a).Install.From
		}
	}
	if from == nil {
		from = manifest.DefaultFrom()
	}
	if flag != nil {
		return manifest.NarrowFrom(from, flag)
	}
	return from, nil
}

// PullerOptions are a command's flags and hooks for a Workspace's Puller.
type PullerOptions struct {
	CAS *cas.Store
	// Files are packed files named on the command line: asked before any store.
	Files []store.Store
	// Stores are --store addresses, asked before the configured ones; relative oci-layout:
	// paths resolve against WorkDir.
	Stores  []string
	WorkDir string
	// PlainHTTP applies to Stores and Mirror, the registries named on the command line.
	PlainHTTP bool
	// Mirror is --mirror; "" leaves config.yaml's mirror:.
	Mirror string
	// Network is how every store, mirror and source the Puller opens is reached.
	Network     Network
	Connections int // --connections: at least 1
	Jobs        int
	Platform    string
	Offline     bool
	// CASOnly pulls outside a project: into the CAS and the pull records only, with no
	// murmur.lock and no tools/.
	CASOnly bool
	// Locked pins nothing: a pull that would change murmur.lock fails with lock-mismatch.
	Locked bool
	// Precompile compiles the payloads a pull brings in; nil compiles nothing. Compiled is the
	// compiled cache, through which a pull skips what is compiled already.
	Precompile func(ctx context.Context, wasm []byte) error
	Compiled   pull.CompiledCache
	Events     func(pull.Event)
	Warn       func(string)
	// Evict removes what derives from a blob that cache.max_size trims (kept payloads, compiled
	// modules); nil leaves them to `mur cache gc`.
	Evict func(ctx context.Context, d digest.Digest, dryRun bool) []string
	// Verifier checks provenance bundles under config.yaml's policy; Provenance is
	// --provenance, over every scope's policy ("" for none).
	Verifier   provenance.Verifier
	Provenance string

	open *openers // the tests' (export_test.go); nil opens through Network
}

// Puller assembles the one Puller of a command: packed files first, then --store in the order
// given, then the configured stores, each once; the source of every scope; the stores' fallbacks;
// the write-through mirror (--mirror, else config.yaml's); cache.max_size; and the download's
// connections.
func (w *Workspace) Puller(o PullerOptions) (*Puller, error) {
	if o.PlainHTTP && len(o.Stores) == 0 && o.Mirror == "" {
		return nil, errs.New(errs.Usage, "--plain-http applies to the registries given with --store or --mirror; for a store in config.yaml write it as {url: oci://HOST:PORT/PREFIX, plain_http: true}")
	}
	if o.Connections < 1 {
		return nil, errs.New(errs.Usage, "--connections is %d; give at least 1 (1 fetches every blob as one stream)", o.Connections)
	}
	open := networkOpeners(o.Network)
	if o.open != nil {
		open = *o.open
	}
	stores, err := w.stores(o, open)
	if err != nil {
		return nil, err
	}
	pl := &pull.Puller{
		CAS: o.CAS, Stores: stores, Offline: o.Offline, Platform: o.Platform, CASOnly: o.CASOnly,
		Limits:     pull.Limits{Jobs: o.Jobs, Connections: o.Connections, MaxDecompressed: w.Config.MaxPullDecompressed},
		Chain:      pull.Chain{Fallbacks: w.Config.Fallbacks},
		Provenance: pull.Provenance{Verifier: o.Verifier, Policy: w.Config.ProvenanceFor, Override: o.Provenance},
		Compile:    pull.Compile{Precompile: o.Precompile, Cache: o.Compiled},
		Report:     pull.Report{Events: o.Events, Warn: o.Warn},
	}
	if open.source != nil {
		pl.Source = open.source(w.Config.SourceFor)
		// A scope nobody mapped has only a guessed source, asked once (github/guess.go).
		if g, ok := pl.Source.(interface{ Unmapped(func(string) bool) }); ok {
			g.Unmapped(func(scope string) bool { return !w.Config.Mapped(scope) })
		}
	}
	if pl.Mirror, err = w.mirror(o, open); err != nil {
		return nil, err
	}
	return &Puller{pl: pl, maxCacheSize: w.Config.MaxCacheSize, evict: o.Evict, locked: o.Locked}, nil
}

// stores opens the stores a pull asks, in order: packed files, --store, the configured ones.
func (w *Workspace) stores(o PullerOptions, open openers) ([]store.Store, error) {
	var addrs []string
	plain := map[string]bool{}
	for _, a := range o.Stores {
		a = store.CleanStoreAddress(a)
		if err := store.ValidateStoreAddress(a); err != nil {
			return nil, err
		}
		r := store.ResolveStore(a, o.WorkDir)
		addrs = append(addrs, r)
		plain[r] = o.PlainHTTP
	}
	addrs = append(addrs, w.Config.Stores...)
	stores := append([]store.Store(nil), o.Files...)
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			continue
		}
		seen[a] = true
		s, err := open.store(a, plain[a] || w.Config.PlainHTTP[a])
		if err != nil {
			return nil, err
		}
		stores = append(stores, s)
	}
	return stores, nil
}

// mirror opens the write-through mirror: --mirror, else config.yaml's; none when neither names one.
func (w *Workspace) mirror(o PullerOptions, open openers) (pull.Mirror, error) {
	addr, plainMirror := w.Config.Mirror, w.Config.PlainHTTP[w.Config.Mirror]
	if o.Mirror != "" {
		o.Mirror = store.CleanStoreAddress(o.Mirror)
		if !strings.HasPrefix(o.Mirror, store.SchemeOCI) {
			return pull.Mirror{}, errs.New(errs.Usage, "--mirror %q is not a registry; write oci://HOST[:PORT]/PREFIX (a folder is filled with 'mur warm --layout DIR')", o.Mirror)
		}
		if err := store.ValidateStoreAddress(o.Mirror); err != nil {
			return pull.Mirror{}, err
		}
		addr, plainMirror = o.Mirror, o.PlainHTTP
	}
	if addr == "" {
		return pull.Mirror{}, nil
	}
	openMirror := open.mirror
	if openMirror == nil {
		openMirror = open.store
	}
	m, err := openMirror(addr, plainMirror)
	if err != nil {
		return pull.Mirror{}, err
	}
	// --mirror is the operator's own choice, as the home's config is; a mirror only the
	// project names never receives what was fetched with credentials (mirror.go).
	return pull.Mirror{Store: m, Required: w.Config.MirrorRequired, FromProject: w.Config.MirrorFromProject && o.Mirror == "", ProjectStores: w.Config.ProjectStores}, nil
}
