package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/internal/artifact"
)

func packCmd() *command {
	var output string
	return &command{
		name:  "pack",
		args:  "DIR [-o FILE]",
		short: "pack a folder into a .mur.zip",
		long: `Packs DIR's murmur.yaml and its wasm payload (capsule.wasm, or the one *.wasm file) into a
reproducible .mur.zip: the same inputs give the same bytes, and so the same digest. The default
output is <name>-<version>.mur.zip in the current folder.`,
		examples: `mur pack ./grep
mur pack ./grep -o dist/grep-1.2.0.mur.zip
mur pack ./grep --json`,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVarP(&output, "output", "o", "", "the file to write (default <name>-<version>.mur.zip)")
		},
		run: func(e *env, args []string) error {
			if len(args) != 1 {
				return usagef("mur pack takes one folder, got %d arguments; run 'mur pack DIR [-o FILE]'", len(args))
			}
			return runPack(e, args[0], output)
		},
	}
}

// packResult is the --json output of mur pack.
type packResult struct {
	File    string `json:"file"`
	Digest  string `json:"digest"`
	Size    int64  `json:"size"`
	Name    string `json:"name"`
	Version string `json:"version"`
}

func runPack(e *env, dir, output string) error {
	p, err := artifact.PackFile(dir, output)
	if err != nil {
		return err
	}
	res := packResult{File: p.File, Digest: p.Digest.String(), Size: p.Size, Name: p.Manifest.Name, Version: p.Manifest.Version}
	if e.g.json {
		return e.JSON(res)
	}
	fmt.Fprintf(e.stdout, "packed %s %s into %s (%d bytes)\n%s\n", res.Name, res.Version, res.File, res.Size, res.Digest)
	return nil
}
