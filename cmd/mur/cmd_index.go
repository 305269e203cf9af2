package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/fetch/github"
	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
)

func indexCmd() *command {
	var scope, release, out, merge, published string
	var platform platformFlag
	return &command{
		name:  "index",
		args:  "FILE.mur.zip... --scope S --release TAG [-o murmur-index.json] [--merge OLD] [--published TIME]",
		short: "write the murmur-index.json a scope's GitHub releases serve",
		long: `For publishers: lists each packed file (name, version, platform, release, asset, size and
SHA-256) for the scope, and when it was published (now, or --published for a back-filled
release), which update bots read. Attach the files to the release TAG and the index to the latest
release. --merge keeps the entries of an older index, with their published times; a name, version
and platform already listed with another hash is refused.`,
		examples: `mur index grep-1.2.0.mur.zip --scope acme --release v1.2.0
mur index grep-1.3.0.mur.zip --scope acme --release v1.3.0 --merge murmur-index.json
mur index grep-1.2.0-linux.mur.zip --scope acme --release v1.2.0 --platform linux-x86_64`,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&scope, "scope", "", "the scope (the GitHub owner, lowercased)")
			fs.StringVar(&release, "release", "", "the release tag the files are attached to")
			registerOutput(fs, &out, "murmur-index.json", "the index file to write")
			fs.StringVar(&merge, "merge", "", "an existing index to merge into")
			platform.registerPayload(fs)
			fs.StringVar(&published, "published", "", "when the files were released, RFC 3339 (default now)")
		},
		run: func(e *env, args []string) error {
			if len(args) == 0 || scope == "" {
				return usagef("mur index needs FILE.mur.zip... and --scope, e.g. 'mur index grep-1.2.0.mur.zip --scope acme --release v1.2.0'")
			}
			if err := platform.check(); err != nil {
				return err
			}
			at := time.Now()
			if published != "" {
				t, err := time.Parse(time.RFC3339, published)
				if err != nil {
					return usagef("--published %q is not an RFC 3339 time; give one such as --published 2026-01-02T15:04:05Z", published)
				}
				at = t
			}
			ix, err := github.IndexFilesAt(args, scope, release, platform.value, at)
			if err != nil {
				return err
			}
			if merge != "" {
				old, err := github.ReadIndexFile(merge)
				if err != nil {
					return err
				}
				if old.Scope != scope {
					return errs.New(errs.IndexMismatch, "%s is the index of scope %s, not %s", merge, old.Scope, scope)
				}
				if err := old.Merge(ix); err != nil {
					return err
				}
				ix = old
			}
			abs, _ := filepath.Abs(out)
			if err := atomicfile.WriteFile(abs, ix.Marshal(), 0o644); err != nil {
				return errs.Wrap(err, errs.IO, "can't write %s: %v", out, err)
			}
			if e.g.json {
				return e.JSON(struct {
					Index   string `json:"index"`
					Entries int    `json:"entries"`
				}{out, len(ix.Artifacts)})
			}
			fmt.Fprintf(e.stdout, "wrote %s: %s for scope %s\n", out, plural(len(ix.Artifacts), "entry", "entries"), scope)
			return nil
		},
	}
}
