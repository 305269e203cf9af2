package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/state"
)

func stateCmd() *command {
	return &command{name: "state", short: "list and remove the durable state stores of capsules",
		long: `A state store is $MURMUR_HOME/state/<name>/, where <name> is the capsule's name (or
capabilities.state.store): two projects with the same name on one machine share one store.`,
		examples: `mur state ls
mur state rm daily`, subs: []*command{stateLsCmd(), stateRmCmd()}}
}

func stateLsCmd() *command {
	return &command{name: "ls", args: "", short: "list the state stores with their size",
		examples: `mur state ls
mur state ls --json`,
		run: func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("'mur state ls' takes no arguments, got %q", args)
			}
			h, err := e.Home()
			if err != nil {
				return err
			}
			stores, err := state.List(h.State())
			if err != nil {
				return err
			}
			if e.g.json {
				if stores == nil {
					stores = []state.Store{}
				}
				return e.JSON(struct {
					Stores []state.Store `json:"stores"`
				}{stores})
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			for _, s := range stores {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, cas.FormatSize(s.Bytes), plural(s.Files, "file"))
			}
			return tw.Flush()
		}}
}

func stateRmCmd() *command {
	return &command{name: "rm", args: "NAME", short: "remove a state store and everything in it (refused while a run uses it)",
		examples: `mur state rm daily`,
		run: func(e *env, args []string) error {
			if len(args) != 1 {
				return usagef("'mur state rm' takes one store NAME; run 'mur state ls' for the names")
			}
			h, err := e.Home()
			if err != nil {
				return err
			}
			if err := state.Remove(h.State(), args[0]); err != nil {
				return err
			}
			if e.g.json {
				return e.JSON(struct {
					Removed string `json:"removed"`
				}{args[0]})
			}
			fmt.Fprintf(e.stdout, "removed the state store %s\n", args[0])
			return nil
		}}
}
