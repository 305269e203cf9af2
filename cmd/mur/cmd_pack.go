package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/internal/artifact"
)

func packCmd() *command {
	var output, compression string
	return &command{
		name:  "pack",
		args:  "DIR [-o FILE] [--compression zstd]",
		short: "pack a folder into a .mur.zip",
		long: `Packs DIR's murmur.yaml and its wasm payload (capsule.wasm, or the one *.wasm file) into a
reproducible .mur.zip: the same inputs give the same bytes, and so the same digest. The default
output is <name>-<version>.mur.zip in the current folder. The payload is deflated, which every
zip tool opens; --compression zstd packs it smaller and faster to read back, but fewer tools
open that (7-Zip 24.01 and later and libarchive's bsdtar do; Info-ZIP's unzip 6.0 and Python's
zipfile before 3.14 do not). murmur.yaml stays deflated either way.`,
		examples: `mur pack ./grep
mur pack ./grep -o dist/grep-1.2.0.mur.zip
mur pack ./grep --compression zstd
mur pack ./grep --json`,
		flags: func(fs *pflag.FlagSet) {
			registerOutput(fs, &output, "", "the file to write (default <name>-<version>.mur.zip)")
			fs.StringVar(&compression, "compression", string(artifact.Deflate), "how to compress the payload: deflate (every unzip opens it) or zstd (smaller, faster to read)")
		},
		run: func(e *env, args []string) error {
			if len(args) != 1 {
				return usagef("mur pack takes one folder, got %d arguments; run 'mur pack DIR [-o FILE]'", len(args))
			}
			c, err := artifact.ParseCompression(compression)
			if err != nil {
				return err
			}
			return runPack(e, args[0], output, c)
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

func runPack(e *env, dir, output string, c artifact.Compression) error {
	p, err := artifact.PackFile(dir, output, artifact.PackOptions{Compression: c})
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
