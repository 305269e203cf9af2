package main

import (
	"fmt"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/provenance"
)

// `mur trust` is its own command rather than a `mur cache` subcommand: the trusted roots are
// not cached artifacts (`mur cache gc` and `mur cache clear` leave them alone), and what they
// decide, which signatures a pull believes, is a matter of trust, not of disk space.
func trustCmd() *command {
	return &command{name: "trust", short: "refresh and show the Sigstore trusted roots that attestations are checked against",
		long: `mur checks GitHub attestations against the trusted roots of Sigstore's public-good
instance and of GitHub's own. It ships both, and refreshes them through TUF (the repositories
tuf-repo-cdn.sigstore.dev and tuf-repo.github.com) into $MURMUR_HOME/trust/: at most once a day,
when a pull or a verify has an attestation to check, within a few seconds and never failing the
command. --offline never fetches. trusted_root in $MURMUR_HOME/config.yaml replaces them all.`,
		examples: `mur trust refresh
mur trust show
mur trust show --json`, subs: []*command{trustRefreshCmd(), trustShowCmd()}}
}

func trustRefreshCmd() *command {
	return &command{name: "refresh", short: "fetch the trusted roots through TUF now and say what changed",
		examples: `mur trust refresh
mur trust refresh --json`,
		run: func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("'mur trust refresh' takes no arguments, got %q", args)
			}
			h, cache, cfg, err := e.trustSetup()
			if err != nil {
				return err
			}
			if err := h.Ensure(); err != nil {
				return err
			}
			helper := e.verifier()
			helper.Timeout = provenance.RefreshTimeout + provenance.DefaultTimeout
			st, err := helper.RefreshRoots(e.ctx, cache)
			if e.g.json {
				e.JSON(trustJSON{Roots: rootsJSON(st), TrustedRoot: cfg.Provenance.TrustedRoot})
				return err
			}
			for _, s := range st {
				switch {
				case s.Error != "":
					fmt.Fprintf(e.stdout, "%s: not refreshed; still using the %s (%s)\n", s.Instance, sourceWords(s), s.Summary)
				case s.Changed:
					fmt.Fprintf(e.stdout, "%s: trusted root updated (%s; was %s)\n", s.Instance, s.Summary, s.Was)
				default:
					fmt.Fprintf(e.stdout, "%s: unchanged (%s)\n", s.Instance, s.Summary)
				}
			}
			if cfg.Provenance.TrustedRoot != "" {
				e.Warn("trusted_root %s in %s replaces these roots: attestations are checked against it alone", cfg.Provenance.TrustedRoot, h.ConfigFile())
			}
			return err
		}}
}

func trustShowCmd() *command {
	return &command{name: "show", short: "list where each trusted root comes from: the cache, mur itself, or trusted_root",
		examples: `mur trust show
mur trust show --json`,
		run: func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("'mur trust show' takes no arguments, got %q", args)
			}
			_, cache, cfg, err := e.trustSetup()
			if err != nil {
				return err
			}
			st, err := e.verifier().ShowRoots(e.ctx, cache)
			if err != nil {
				return err
			}
			if e.g.json {
				return e.JSON(trustJSON{Roots: rootsJSON(st), TrustedRoot: cfg.Provenance.TrustedRoot})
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			for _, s := range st {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Instance, sourceWords(s), s.Summary, s.Repository)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if cfg.Provenance.TrustedRoot != "" {
				fmt.Fprintf(e.stdout, "trusted_root %s replaces both: attestations are checked against it alone\n", cfg.Provenance.TrustedRoot)
			}
			return nil
		}}
}

// trustJSON is the --json result of `mur trust refresh` and `mur trust show`.
type trustJSON struct {
	Roots []rootJSON `json:"roots"`
	// TrustedRoot is the home's trusted_root, which replaces every root listed; "" for none.
	TrustedRoot string `json:"trusted_root"`
}

// rootJSON is one trusted root: the helper's report, whose tags leave out what it lacks, with
// every key present, as docs/json.md lists them (a fetched time never confirmed is null).
type rootJSON struct {
	provenance.RootStatus
	Was        string     `json:"was"`
	Fetched    *time.Time `json:"fetched"`
	Repository string     `json:"repository"`
	Error      string     `json:"error"`
}

func rootsJSON(st []provenance.RootStatus) []rootJSON {
	out := make([]rootJSON, len(st))
	for i, s := range st {
		out[i] = rootJSON{RootStatus: s, Was: s.Was, Repository: s.Repository, Error: s.Error}
		if !s.Fetched.IsZero() {
			t := s.Fetched.UTC()
			out[i].Fetched = &t
		}
	}
	return out
}

// sourceWords says where a root in use comes from.
func sourceWords(s provenance.RootStatus) string {
	switch s.Source {
	case "cache", "tuf":
		return "root TUF delivered on " + s.Fetched.UTC().Format("2006-01-02")
	}
	return "root this mur embeds"
}

// trustSetup reads what `mur trust` needs: the home, its config.yaml alone (a project has no
// say in trust) and the cache of the trusted roots.
func (e *env) trustSetup() (Home, provenance.RootsCache, *config.Config, error) {
	h, err := e.Home()
	if err != nil {
		return Home{}, provenance.RootsCache{}, nil, err
	}
	cfg, err := config.Load(h.ConfigFile(), "")
	if err != nil {
		return Home{}, provenance.RootsCache{}, nil, err
	}
	return h, rootsCache(e, h, cfg), cfg, nil
}

// rootsCache is where the command's helper keeps the trusted roots it refreshes through TUF.
func rootsCache(e *env, h Home, cfg *config.Config) provenance.RootsCache {
	return provenance.RootsCache{Dir: filepath.Join(h.Root, "trust"), Offline: e.Offline(), Repos: cfg.Provenance.TUFRepos}
}

// trustingVerifier is the command's verifier, told where the trusted roots are cached so that
// it checks attestations against the newest it has; a refresh that fails is said once.
func (e *env) trustingVerifier(h Home, cfg *config.Config) *provenance.Helper {
	v := e.verifier()
	c := rootsCache(e, h, cfg)
	v.Roots = &c
	v.Warn = e.warning
	return v
}
