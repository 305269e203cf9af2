package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/config"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/ref"
)

func addCmd() *command {
	f := &pullFlags{}
	return &command{
		name:  "add",
		args:  "REF...",
		short: "declare artifacts in murmur.yaml, then pull them",
		long: `Adds each REF to murmur.yaml's artifacts, keeping the file's comments, order and style, and
pulls it. Without a version, the version latest resolves to is written. An artifact murmur.yaml
declares already moves to the version asked for, with its pin.`,
		examples: `mur add acme/grep
mur add acme/grep@1.2.0 acme/sed@4.9.0
mur add --json acme/grep`,
		flags: func(fs *pflag.FlagSet) {
			f.platform.registerPins(fs, "pull for", true)
			f.stores.register(fs, "add a store for this command")
			f.download.register(fs, true)
			fs.BoolVar(&f.noPrecompile, "no-precompile", false, "don't compile wasm payloads after pulling")
		},
		run: func(e *env, args []string) error {
			if len(args) == 0 {
				return usagef("mur add needs at least one REF, e.g. 'mur add acme/grep@1.2.0'")
			}
			return pullWith(e, f, args, true)
		},
	}
}

// warnStoresNotKept says, of each --store that config.yaml does not list, that it served this
// command only: murmur.yaml and murmur.lock now name artifacts that the next pull, a teammate's
// or CI's, will not find there. It shows the line that keeps it.
func warnStoresNotKept(e *env, p *project, stores []string) {
	wd, _ := os.Getwd()
	for _, s := range stores {
		if slices.Contains(p.cfg.Stores, fstore.ResolveStore(fstore.CleanStoreAddress(s), wd)) {
			continue
		}
		line, err := fetch.ProjectStore(s, wd, p.Dir)
		if err != nil {
			continue
		}
		e.Warn("--store %s is for this command only: no config.yaml lists it, so the next 'mur pull' (yours, a teammate's or CI's) won't ask it; to keep it, add it to %s: stores: [%q]", s, filepath.Join(p.Dir, config.ProjectFile), line)
	}
}

func rmCmd() *command {
	return &command{
		name:  "rm",
		args:  "NAME...",
		short: "remove artifacts from murmur.yaml, murmur.lock and tools/",
		long: `Removes each NAME's entry from murmur.yaml (with the comment lines right above it, keeping
the rest of the file as it was), drops its pin from murmur.lock and its tools/ folder. Nothing
is downloaded. The blob stays in the CAS until 'mur cache gc' frees it.`,
		examples: `mur rm acme/grep
mur rm grep                      # the one declared artifact named grep
mur rm --json acme/grep acme/sed`,
		run: func(e *env, args []string) error {
			if len(args) == 0 {
				return usagef("mur rm needs at least one NAME, e.g. 'mur rm acme/grep'")
			}
			p, err := e.openProject()
			if err != nil {
				return err
			}
			if p.capsule == nil {
				return usagef("no murmur.yaml in %s or above, so there is nothing to remove from", p.Dir)
			}
			in := fetch.Intent{Path: p.capsule.Path, Capsule: p.capsule}
			var names []ref.Name
			for _, a := range args {
				n, err := in.DeclaredName(a)
				if err != nil {
					return err
				}
				names = append(names, n)
			}
			removed, err := fetch.Undeclare(e.ctx, p.Project, in, names, func(s string) { e.Warn("%s", s) })
			if e.g.json {
				var undeclared []string
				for _, n := range names {
					undeclared = append(undeclared, n.String())
				}
				if err != nil {
					undeclared = nil
				}
				return jsonThen(e, struct {
					Undeclared []string `json:"undeclared"`
					Removed    []string `json:"removed"`
				}{undeclared, removed}, err)
			}
			if err != nil {
				return err
			}
			for _, n := range names {
				fmt.Fprintf(e.stdout, "removed %s from %s\n", n, p.capsule.Path)
			}
			for _, name := range removed {
				fmt.Fprintf(e.stdout, "removed %s from murmur.lock and tools/ ('mur cache gc' may free its blob)\n", name)
			}
			return nil
		},
	}
}
