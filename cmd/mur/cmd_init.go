package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/fetch"
)

func initCmd() *command {
	var name, store string
	return &command{
		name:  "init",
		args:  "[DIR] [--name NAME] [--store STORE]",
		short: "start a project: murmur.yaml, .murmur/config.yaml and .gitignore lines",
		long: `Writes a new project into DIR (default the current folder, created if missing): a
murmur.yaml that declares no artifact yet, .murmur/config.yaml with the store given (or
commented examples), and the lines .gitignore lacks (tools/, workdir/, .murmur.lock.lck). It never
overwrites: a folder that already holds murmur.yaml, murmur.lock or .murmur/config.yaml is
refused, and nothing is written. The capsule's name is --name, else the folder's. Commit
murmur.yaml, .murmur/config.yaml and, after the first pull, murmur.lock.`,
		examples: `mur init hello                          # in the folder hello, created if missing
mur init hello --store oci-layout:../store
mur init tools --name my-capsule --store oci://registry.internal:5000/murmur
mur init --json hello`,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&name, "name", "", "the capsule's name (default: the folder's)")
			fs.StringVar(&store, "store", "", "the store to write into .murmur/config.yaml (oci://HOST[:PORT]/PREFIX or oci-layout:PATH)")
		},
		run: func(e *env, args []string) error {
			if len(args) > 1 {
				return usagef("mur init takes at most one folder, found %d arguments", len(args))
			}
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			wd, _ := os.Getwd()
			rep, err := fetch.Init(dir, fetch.InitOptions{Name: name, Store: store, WorkDir: wd})
			if e.g.json && rep != nil {
				return jsonThen(e, rep, err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "created %s for capsule %s\n", strings.Join(rep.Created, " and "), rep.Name)
			if rep.Store != "" {
				fmt.Fprintf(e.stdout, "  stores: [%s]\n", rep.Store)
			} else {
				fmt.Fprintf(e.stdout, "  no store yet: add yours to %s's stores, or pass --store to each pull\n", ".murmur/config.yaml")
			}
			if len(rep.Gitignore) > 0 {
				fmt.Fprintf(e.stdout, "added %s to .gitignore\n", strings.Join(rep.Gitignore, ", "))
			}
			fmt.Fprintf(e.stdout, "next: mur add SCOPE/NAME@VERSION, then commit murmur.yaml, murmur.lock and .murmur/config.yaml\n")
			return nil
		},
	}
}
