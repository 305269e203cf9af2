package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/lock"
	"github.com/murmur-nexus/mur/sandbox"
)

func lsCmd() *command {
	return &command{
		name:  "ls",
		args:  "",
		short: "list the project's artifacts: declared, pinned, cached, staged, compiled",
		long: `In a project, one row per artifact murmur.yaml declares (then any pin murmur.lock holds
that it does not): the version asked for, the version and digest murmur.lock pins for this
machine, and whether the CAS holds the blob, tools/ holds it staged and the compiled cache holds
its compiled form. Outside a project (no murmur.yaml here or above), what the CAS holds that a
pull recorded by name. No store is asked.`,
		examples: `mur ls
mur ls --json`,
		run: func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("'mur ls' takes no arguments, got %q; 'mur info %s' shows one artifact", args, args[0])
			}
			in, _, done, err := localInput(e)
			if err != nil {
				return err
			}
			defer done()
			items, err := fetch.List(e.ctx, in)
			if err != nil {
				return err
			}
			if e.g.json {
				return e.JSON(struct {
					Artifacts []fetch.Listed `json:"artifacts"`
				}{items})
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			if in.Intent == nil {
				e.Progress("ls: no murmur.yaml here or above; these are the artifacts the CAS holds")
				fmt.Fprintln(tw, "NAME\tVERSION\tPLATFORM\tDIGEST\tSIZE\tCOMPILED")
				for _, it := range items {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", it.Name, it.Version, it.Platform, shortDigest(it.Digest), cas.FormatSize(it.Size), yesNo(it.Compiled))
				}
				return tw.Flush()
			}
			fmt.Fprintln(tw, "NAME\tREQUESTED\tLOCKED\tPLATFORM\tDIGEST\tCACHED\tSTAGED\tCOMPILED")
			for _, it := range items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", it.Name, dash(it.Requested), dash(it.Version), dash(it.Platform), shortDigest(it.Digest), yesNo(it.Cached), yesNo(it.Staged), yesNo(it.Compiled))
			}
			return tw.Flush()
		},
	}
}

func infoCmd() *command {
	var (
		bundleOut string
		stores    storeFlags
	)
	return &command{
		name:  "info",
		args:  "REF [--bundle-out FILE]",
		short: "show what mur knows of one artifact: pin, cached blob, pulls, provenance, compiled",
		long: `REF is scope/name, or scope/name@version for another version than the pinned one. mur
info reads murmur.yaml, murmur.lock, the pull records, the CAS, tools/ and the compiled cache;
it asks no store. It fails with not-found when none of them knows the artifact.

--bundle-out FILE writes the Sigstore bundle of the pin for this machine to FILE: the one a pull
verified, from the CAS; else the first one the stores (--store, then config.yaml's) or the
scope's source hold for that digest, which mur info does not verify: check it with 'mur verify
FILE.mur.zip --bundle FILE' or cosign (docs/provenance.md).`,
		examples: `mur info acme/grep
mur info acme/grep@1.1.0
mur info --json acme/grep
mur info acme/grep --bundle-out grep.sigstore.json
mur info acme/grep --bundle-out grep.sigstore.json --store oci://registry.internal:5000/murmur`,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&bundleOut, "bundle-out", "", "write the pin's Sigstore bundle to this file (from the CAS, else a store or the source)")
			stores.register(fs, "a store to ask for --bundle-out's bundle")
			_ = fs.SetAnnotation("store", onlyWithAnnotation, []string{"bundle-out"})
		},
		run: func(e *env, args []string) error {
			if len(args) != 1 {
				return usagef("'mur info' takes one REF (scope/name or scope/name@version), found %d arguments; 'mur ls' lists them all", len(args))
			}
			r, err := parseRef("info", args[0])
			if err != nil {
				return err
			}
			if r.IsFile() {
				return usagef("'mur info' takes scope/name, not a file; 'mur pull %s' reads the file's name and version", args[0])
			}
			if len(stores.stores) > 0 && bundleOut == "" {
				return usagef("--store is where --bundle-out looks for a bundle; mur info itself asks no store")
			}
			in, p, done, err := localInput(e)
			if err != nil {
				return err
			}
			defer done()
			info, err := fetch.Info(e.ctx, in, r)
			if err != nil {
				return err
			}
			var out *bundleWritten
			if bundleOut != "" {
				if out, err = writePinBundle(e, p, in, info, stores, bundleOut); err != nil {
					return err
				}
			}
			if e.g.json {
				recs := make([]recordJSON, len(info.Records))
				for i, r := range info.Records {
					recs[i] = toRecordJSON(r)
				}
				return e.JSON(infoJSON{ArtifactInfo: *info, Records: recs, Bundle: out})
			}
			printInfo(e, info)
			if out != nil {
				printBundleWritten(e, out)
			}
			return nil
		},
	}
}

// infoJSON is mur info --json: what fetch.Info found, the pull records in cache records' shape,
// and what --bundle-out wrote (null without it).
type infoJSON struct {
	fetch.ArtifactInfo
	Records []recordJSON   `json:"records"`
	Bundle  *bundleWritten `json:"bundle"`
}

func printInfo(e *env, info *fetch.ArtifactInfo) {
	w := e.stdout
	fmt.Fprintln(w, info.Name)
	if info.Requested != "" {
		fmt.Fprintf(w, "  requested   %s (murmur.yaml)\n", info.Requested)
	}
	if info.Locked != "" {
		fmt.Fprintf(w, "  locked      %s (murmur.lock)\n", info.Locked)
	}
	if info.Source != "" {
		fmt.Fprintf(w, "  source      %s (the scope's owner pin)\n", info.Source)
	}
	for _, p := range info.Pins {
		var has []string
		if p.Cached {
			has = append(has, "cached ("+cas.FormatSize(p.Size)+")")
		} else {
			has = append(has, "not cached")
		}
		if p.Staged {
			has = append(has, "staged in tools/")
		}
		if p.Compiled {
			has = append(has, "compiled")
		} else if p.Cached {
			has = append(has, "not compiled")
		}
		fmt.Fprintf(w, "  %-11s %s@%s %s: %s\n", p.Platform, info.Name, p.Version, p.Digest, strings.Join(has, ", "))
	}
	if pv := info.Provenance; pv != nil {
		fmt.Fprintf(w, "  provenance  %s signed by %s", pv.Kind, pv.Signer)
		if pv.Repository != "" {
			fmt.Fprintf(w, " from %s", pv.Repository)
		}
		if pv.SourceCommit != "" {
			fmt.Fprintf(w, " at %s", pv.SourceCommit)
		}
		fmt.Fprintf(w, " (bundle %s)\n", pv.Bundle)
	} else {
		fmt.Fprintln(w, "  provenance  none verified")
	}
	if n := len(info.Records); n > 0 {
		last := info.Records[n-1]
		fmt.Fprintf(w, "  pulls       %s; the last %s at %s, %s from %s\n", plural(n, "record"), last.Ref, last.Time.Local().Format(time.RFC3339), last.Outcome, dash(last.Source))
	} else {
		fmt.Fprintln(w, "  pulls       none recorded")
	}
}

// localInput is where mur ls and mur info look: the project (if any), its lock, the CAS and the
// compiled cache. done closes the compiled cache.
func localInput(e *env) (fetch.LocalInput, *project, func(), error) {
	p, err := e.openProject()
	if err != nil {
		return fetch.LocalInput{}, nil, nil, err
	}
	store, err := openCAS(p.home)
	if err != nil {
		return fetch.LocalInput{}, nil, nil, err
	}
	in := fetch.LocalInput{CAS: store, Project: p.Project, Intent: p.intent()}
	if p.capsule != nil {
		if in.Lock, err = lock.Read(p.LockPath()); err != nil {
			return fetch.LocalInput{}, nil, nil, err
		}
	}
	done := func() {}
	if runner, err := sandbox.New(e.ctx, p.runnerOptions(func(string) {})); err == nil {
		in.Compiled = runner
		done = func() { closeRunner(e, runner) }
	}
	return in, p, done, nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shortDigest is the algorithm and the first 12 hex digits (as docker shows image ids), as a
// table column or a result line on a terminal.
func shortDigest(d string) string {
	if alg, hex, ok := strings.Cut(d, ":"); ok && len(hex) > 12 {
		return alg + ":" + hex[:12]
	}
	return dash(d)
}
