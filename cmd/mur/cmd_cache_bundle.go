package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/lock"
)

func cacheExportCmd() *command {
	var locks []string
	var out string
	return &command{
		name:  "export",
		args:  "--lock murmur.lock -o bundle.tar.zst",
		short: "write the blobs a lock needs, and their records, as a zstd tar",
		examples: `mur cache export --lock murmur.lock -o bundle.tar.zst
mur cache export --lock a/murmur.lock --lock b/murmur.lock -o ci.tar.zst`,
		flags: func(fs *pflag.FlagSet) {
			fs.StringArrayVar(&locks, "lock", nil, "a murmur.lock whose pinned blobs to export (repeatable)")
			registerOutput(fs, &out, "", "the bundle file to write")
		},
		run: func(e *env, args []string) error {
			if len(args) > 0 || len(locks) == 0 || out == "" {
				return usagef("mur cache export needs --lock murmur.lock and -o bundle.tar.zst")
			}
			var ds []digest.Digest
			for _, lp := range locks {
				if _, err := os.Stat(lp); err != nil {
					return errs.Wrap(err, errs.NotFound, "lock %s: %v", lp, err)
				}
				l, err := lock.Read(lp)
				if err != nil {
					return err
				}
				ds = append(ds, l.Digests()...)
			}
			h, err := e.Home()
			if err != nil {
				return err
			}
			store, err := openCAS(h)
			if err != nil {
				return err
			}
			abs, _ := filepath.Abs(out)
			f, err := atomicfile.Create("", abs, 0o644)
			if err != nil {
				return errs.Wrap(err, errs.IO, "can't write %s: %v", out, err)
			}
			defer f.Abort()
			n, err := store.Export(e.ctx, ds, f)
			if err != nil {
				return err
			}
			if err := f.Commit(); err != nil {
				return errs.Wrap(err, errs.IO, "can't write %s: %v", out, err)
			}
			if e.g.json {
				return e.JSON(struct {
					Bundle string `json:"bundle"`
					Blobs  int    `json:"blobs"`
				}{out, n})
			}
			fmt.Fprintf(e.stdout, "exported %s to %s\n", plural(n, "blob"), out)
			return nil
		},
	}
}

func cacheImportCmd() *command {
	return &command{
		name:     "import",
		args:     "bundle.tar.zst",
		short:    "verify and admit the blobs of a bundle",
		examples: `mur cache import bundle.tar.zst`,
		run: func(e *env, args []string) error {
			if len(args) != 1 {
				return usagef("mur cache import takes one bundle file")
			}
			f, err := os.Open(args[0])
			if err != nil {
				return errs.Wrap(err, errs.NotFound, "can't read bundle %s: %v", args[0], err)
			}
			defer f.Close()
			h, err := e.Home()
			if err != nil {
				return err
			}
			store, err := openCAS(h)
			if err != nil {
				return err
			}
			rep, err := store.Import(e.ctx, f, args[0], fetch.CheckImportedBlob)
			if err != nil {
				return err
			}
			if e.g.json {
				return e.JSON(rep)
			}
			fmt.Fprintf(e.stdout, "imported %s (%d already present) and %s (%d already present) from %s\n", plural(rep.Blobs, "blob"), rep.Already, plural(rep.Records, "record"), rep.RecordsAlready, args[0])
			return nil
		},
	}
}
