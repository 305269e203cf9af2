package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/fetch"
)

func outdatedCmd() *command {
	var (
		f          pullFlags
		failBehind bool
	)
	return &command{
		name:  "outdated",
		short: "show each declared artifact's requested, locked and newest version",
		long: `One row per artifact murmur.yaml declares: the version it requests, the version murmur.lock
pins, the newest release its store or source lists (read from metadata alone: tags and
manifests, or the scope's index), and where that came from. --exit-code exits 1 when any
artifact is behind: its newest release is newer than its pin, or it is not pinned.`,
		examples: `mur outdated
mur outdated --exit-code           # in CI: fail when something is behind
mur outdated --json`,
		flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&failBehind, "exit-code", false, "exit 1 when any artifact is behind")
			fs.StringSliceVar(&f.from, "from", nil, "narrow install.from: stores, sources")
			f.stores.register(fs, "add a store for this command")
		},
		run: func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("mur outdated takes no arguments, found %q; it reads murmur.yaml", args)
			}
			p, err := e.openProject()
			if err != nil {
				return err
			}
			in := p.intent()
			if in == nil {
				return usagef("no murmur.yaml in %s or above; mur outdated reads what it declares", p.Dir)
			}
			reqs, _, err := pullRequests(p, "outdated", nil, &f)
			if err != nil {
				return err
			}
			// Metadata only: nothing is brought in for a mirror to receive.
			f.stores.mirror = ""
			puller, err := p.puller(e, f.stores, fetch.PullerOptions{Connections: 1})
			if err != nil {
				return err
			}
			rows, err := puller.Outdated(e.ctx, p.Project, *in, reqs)
			behind := 0
			for _, r := range rows {
				if r.Behind {
					behind++
				}
			}
			if err == nil && failBehind && behind > 0 {
				err = &exitCode1{}
			}
			if e.g.json {
				type row struct {
					fetch.Outdated
					Error *jsonError `json:"error"`
				}
				out := make([]row, len(rows))
				for i, r := range rows {
					out[i] = row{r, toJSONError(r.Err)}
				}
				if _, quiet := err.(*exitCode1); quiet {
					err = &exitCode{code: 1}
				}
				return jsonThen(e, struct {
					Artifacts []row `json:"artifacts"`
				}{out}, err)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tREQUESTED\tLOCKED\tLATEST\tSOURCE")
			for _, r := range rows {
				locked, latest := orDash(r.Locked), orDash(r.Latest)
				if r.Behind {
					latest += " (behind)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Requested, locked, latest, orDash(r.Source))
			}
			tw.Flush()
			for _, r := range rows {
				if m := r.Move(); m != "" {
					fmt.Fprintf(e.stdout, "to move %s: %s\n", r.Name, m)
				}
			}
			if _, quiet := err.(*exitCode1); quiet {
				return &exitCode{code: 1}
			}
			return err
		},
	}
}

// exitCode1 marks the --exit-code failure, which prints nothing beyond the table.
type exitCode1 struct{}

func (*exitCode1) Error() string { return "behind" }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
