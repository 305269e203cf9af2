package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/sandbox"
)

func cacheCmd() *command {
	return &command{name: "cache", short: "inspect and keep the content-addressed store", examples: `mur cache ls
mur cache records --digest sha256:3f…
mur cache gc --keep murmur.lock --older-than 720h --dry-run
mur cache export --lock murmur.lock -o bundle.tar.zst`, subs: []*command{
		cacheLsCmd(),
		cacheVerifyCmd(),
		cacheGCCmd(),
		cacheRecordsCmd(),
		cachePathCmd(),
		cacheExportCmd(), // cmd_cache_bundle.go
		cacheImportCmd(),
	}}
}

func openCacheStore(e *env) (*cas.Store, error) {
	h, err := e.Home()
	if err != nil {
		return nil, err
	}
	return openCAS(h)
}

func noArgs(name string, args []string) error {
	if len(args) > 0 {
		return usagef("'mur cache %s' takes no arguments, got %q; run 'mur cache %s --help'", name, strings.Join(args, " "), name)
	}
	return nil
}

// cacheEntry is one line of `mur cache ls`.
type cacheEntry struct {
	cas.BlobInfo
	Names []string `json:"names"`
}

func cacheLsCmd() *command {
	return &command{name: "ls", short: "list blobs with their size, last use and the names they were pulled as",
		examples: `mur cache ls
mur cache ls --json`,
		run: func(e *env, args []string) error {
			if err := noArgs("ls", args); err != nil {
				return err
			}
			s, err := openCacheStore(e)
			if err != nil {
				return err
			}
			blobs, err := s.List(e.ctx)
			if err != nil {
				return err
			}
			recs, err := s.Records("")
			if err != nil {
				return err
			}
			names := namesByDigest(recs)
			out := make([]cacheEntry, 0, len(blobs))
			for _, b := range blobs {
				out = append(out, cacheEntry{BlobInfo: b, Names: names[b.Digest]})
			}
			if e.g.json {
				return e.JSON(struct {
					Blobs []cacheEntry `json:"blobs"`
				}{out})
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "DIGEST\tSIZE\tLAST USE\tNAMES")
			for _, c := range out {
				n := strings.Join(c.Names, ", ")
				if n == "" {
					n = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Digest, cas.FormatSize(c.Size), c.LastUse.Local().Format("2006-01-02 15:04"), n)
			}
			return tw.Flush()
		}}
}

// namesByDigest collects name@version (or the reference as asked) of every pull that brought or
// found a blob, sorted and without repeats.
func namesByDigest(recs []cas.Record) map[digest.Digest][]string {
	seen := map[digest.Digest]map[string]bool{}
	for _, r := range recs {
		if r.Digest == "" || r.Outcome == cas.OutcomeFailed {
			continue
		}
		n := r.Ref
		if r.Name != "" && r.Version != "" {
			n = r.Name + "@" + r.Version
		}
		if n == "" {
			continue
		}
		if seen[r.Digest] == nil {
			seen[r.Digest] = map[string]bool{}
		}
		seen[r.Digest][n] = true
	}
	out := map[digest.Digest][]string{}
	for d, set := range seen {
		for n := range set {
			out[d] = append(out[d], n)
		}
		sort.Strings(out[d])
	}
	return out
}

func cacheVerifyCmd() *command {
	return &command{name: "verify", short: "re-hash every blob and check each packed artifact as a pull does; damaged ones go to quarantine",
		examples: `mur cache verify
mur cache verify --json`,
		run: func(e *env, args []string) error {
			if err := noArgs("verify", args); err != nil {
				return err
			}
			s, err := openCacheStore(e)
			if err != nil {
				return err
			}
			start := time.Now()
			rep, err := fetch.VerifyCache(e.ctx, s)
			if err != nil {
				return err
			}
			var failure error
			if n := len(rep.Damaged); n > 0 {
				failure = errs.New(errs.Integrity, "%s in %s were damaged and moved to quarantine; run 'mur pull' or 'mur warm' in your projects to fetch them again", plural(n, "file"), s.Root())
			}
			if e.g.json {
				return jsonThen(e, rep, failure)
			} else {
				for _, d := range rep.Damaged {
					what := string(d.Digest)
					if what == "" {
						what = d.Path
					}
					line := what + ": " + d.Problem
					if d.Quarantined != "" && !strings.Contains(d.Problem, d.Quarantined) {
						line += " (moved to " + d.Quarantined + ")"
					}
					fmt.Fprintln(e.stdout, line)
				}
				fmt.Fprintf(e.stdout, "checked %s, %s in %s\n", plural(rep.Checked, "blob"), cas.FormatSize(rep.Bytes), time.Since(start).Round(time.Millisecond))
			}
			return failure
		}}
}

func cacheGCCmd() *command {
	var (
		keep      []string
		olderThan time.Duration
		maxSize   string
		dryRun    bool
	)
	return &command{name: "gc", short: "remove blobs nothing pins that were not used lately, or over a size, and leftovers of killed pulls",
		long: `A blob stays while any project mur pulled into still pins it in its murmur.lock (every pull
and warm registers its lock), while the current project's lock or one given with --keep pins
it, or while a pull in flight is bringing it in. Of the rest, blobs unused for --older-than go;
then, with --max-size, the least recently used, until the blobs hold at most that much. Kept
payloads and compiled modules go with their blob. Temporary files and staging folders of
killed pulls go once no process holds them. --dry-run lists what would go, and why.`,
		examples: `mur cache gc
mur cache gc --keep murmur.lock
mur cache gc --older-than 0s --dry-run
mur cache gc --older-than 30d
mur cache gc --max-size 20GiB
mur cache gc --keep a/murmur.lock --keep b/murmur.lock --older-than 168h`,
		flags: func(fs *pflag.FlagSet) {
			fs.StringArrayVar(&keep, "keep", nil, "keep every blob this murmur.lock pins (repeatable)")
			olderThan = 720 * time.Hour
			fs.Var(durationFlag{&olderThan}, "older-than", "remove unpinned blobs unused for at least this long (90m, 24h, 30d)")
			fs.StringVar(&maxSize, "max-size", "", "then remove unpinned blobs, least recently used first, down to this size (e.g. 20GiB)")
			fs.BoolVar(&dryRun, "dry-run", false, "list what would be removed and why, remove nothing")
		},
		run: func(e *env, args []string) error {
			if err := noArgs("gc", args); err != nil {
				return err
			}
			if olderThan < 0 {
				return usagef("--older-than is %s; give a duration of zero or more, e.g. 720h", olderThan)
			}
			var capBytes int64
			if maxSize != "" {
				n, err := cas.ParseSize(maxSize)
				if err != nil {
					return usagef("--max-size: %s", errs.Message(err))
				}
				capBytes = n
			}
			cwd, err := os.Getwd()
			if err != nil {
				return errs.Wrap(err, errs.IO, "can't read the current folder: %v", err)
			}
			project, err := fetch.FindProject(cwd)
			if err != nil {
				return err
			}
			h, err := e.Home()
			if err != nil {
				return err
			}
			s, err := openCAS(h)
			if err != nil {
				return err
			}
			rep, err := fetch.GC(e.ctx, fetch.GCInput{
				CAS: s, Project: project, KeepLocks: keep, OlderThan: olderThan, MaxSize: capBytes, DryRun: dryRun,
				Evict: func(ctx context.Context, d digest.Digest, dryRun bool) []string {
					return sandbox.Evict(ctx, h.Compiled(), s, d, dryRun)
				},
			})
			if err != nil {
				return err
			}
			// Kept payloads whose blob went some other way.
			payloads, err := sandbox.PrunePayloads(h.Compiled(), s, rep.GCReport, dryRun)
			if err != nil {
				return err
			}
			if e.g.json {
				return e.JSON(struct {
					fetch.GCReport
					Payloads []string `json:"payloads"`
				}{rep, payloads})
			}
			verb, forget := "removed", "forgot"
			if dryRun {
				verb, forget = "would remove", "would forget"
			}
			for _, b := range rep.Blobs {
				fmt.Fprintf(e.stdout, "%s %s (%s): %s\n", verb, b.Digest, cas.FormatSize(b.Size), b.Reason)
			}
			for _, p := range rep.Derived {
				fmt.Fprintf(e.stdout, "%s %s, derived from a removed blob\n", verb, p)
			}
			for _, p := range rep.Ingest {
				fmt.Fprintf(e.stdout, "%s leftover %s: no process holds it\n", verb, p)
			}
			for _, p := range rep.Staging {
				fmt.Fprintf(e.stdout, "%s staging leftover %s: no process holds it\n", verb, p)
			}
			for _, p := range rep.Quarantine {
				fmt.Fprintf(e.stdout, "%s quarantined %s\n", verb, p)
			}
			for _, p := range payloads {
				fmt.Fprintf(e.stdout, "%s kept payload %s: its blob is gone\n", verb, p)
			}
			for _, p := range rep.PrunedRoots {
				fmt.Fprintf(e.stdout, "%s the GC root %s: the lock is gone, so it pins nothing\n", forget, p)
			}
			fmt.Fprintf(e.stdout, "%s %s and %s, %s; %s\n",
				verb, plural(len(rep.Blobs), "blob"), plural(len(rep.Ingest)+len(rep.Staging)+len(rep.Quarantine), "leftover"), cas.FormatSize(rep.Freed),
				keptWhy(rep.GCReport, len(rep.Roots), olderThan, capBytes))
			for _, w := range rep.Warnings {
				e.Warn("%s", w)
			}
			if rep.OverMaxSize {
				e.Warn("the blobs that locks pin or pulls are bringing in hold %s, over --max-size %s; remove projects you no longer use, or raise the size", cas.FormatSize(rep.Size), cas.FormatSize(capBytes))
			}
			return nil
		}}
}

func cacheRecordsCmd() *command {
	var (
		only  string
		limit int
		since string
	)
	return &command{name: "records", short: "show the pull records: what came from where, when",
		long: `The table shows each pull's outcome: pulled, cache-hit, or failed with the error's token
(failed: not-found). --json has the whole error, as {"token", "message"}. Records are listed
oldest first; --since keeps those from a moment on, and --limit the newest N of what is left.`,
		examples: `mur cache records
mur cache records --limit 20
mur cache records --since 24h
mur cache records --since 7d --limit 5
mur cache records --since 2026-11-30
mur cache records --digest sha256:3f…
mur cache records --json`,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&only, "digest", "", "show only the records of this digest (sha256:<hex>)")
			fs.IntVar(&limit, "limit", 0, "show only the newest N records (0: all)")
			fs.StringVar(&since, "since", "", "show only records since a DURATION ago (90m, 24h, 7d) or a DATE (2026-11-30, RFC 3339)")
		},
		run: func(e *env, args []string) error {
			if err := noArgs("records", args); err != nil {
				return err
			}
			if limit < 0 {
				return usagef("--limit %d is negative; give the number of newest records to show, or 0 for all", limit)
			}
			from, err := parseSince(since, time.Now())
			if err != nil {
				return err
			}
			var filter digest.Digest
			if only != "" {
				d, err := parseDigestArg(only)
				if err != nil {
					return err
				}
				filter = d
			}
			s, err := openCacheStore(e)
			if err != nil {
				return err
			}
			recs, err := s.Records(filter)
			if err != nil {
				return err
			}
			recs = cas.Recent(recs, from, limit)
			if e.g.json {
				out := make([]recordJSON, len(recs))
				for i, r := range recs {
					out[i] = toRecordJSON(r)
				}
				return e.JSON(struct {
					Records []recordJSON `json:"records"`
				}{out})
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tOUTCOME\tREF\tDIGEST\tSIZE\tSOURCE\tPROVENANCE")
			for _, r := range recs {
				src := r.Source
				if r.Release != "" || r.Asset != "" {
					src += " " + r.Release + "/" + r.Asset
				}
				d := string(r.Digest)
				if d == "" {
					d = "-"
				}
				outcome := string(r.Outcome)
				if je := recordError(r.Error); je != nil {
					outcome += ": " + string(je.Token)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.Local().Format(time.RFC3339), outcome, r.Ref, d, cas.FormatSize(r.Size), strings.TrimSpace(src), provenanceFacts(r.Provenance))
			}
			return tw.Flush()
		}}
}

// provenanceFacts is what a record's verified bundle proved, on one line: "-" for none.
func provenanceFacts(p *cas.Provenance) string {
	if p == nil {
		return "-"
	}
	out := p.Kind + " by " + p.Signer
	if p.OwnerID != 0 || p.RepoID != 0 {
		out += fmt.Sprintf("; owner %d, repository %d", p.OwnerID, p.RepoID)
		if p.Repository != "" {
			out += " (" + p.Repository + ")"
		}
	}
	if p.SourceCommit != "" {
		out += "; commit " + p.SourceCommit
	}
	return out
}

// recordError splits a record's error, written as "token: sentence", back into its parts.
func recordError(s string) *jsonError {
	if s == "" {
		return nil
	}
	tok, msg, ok := strings.Cut(s, ": ")
	if !ok || tok == "" || strings.Trim(tok, "abcdefghijklmnopqrstuvwxyz-") != "" {
		return &jsonError{Token: errs.Internal, Message: s}
	}
	return &jsonError{Token: errs.Token(tok), Message: msg}
}

// parseDigestArg accepts sha256:<hex>, or the bare hex that murmur.lock shows.
func parseDigestArg(s string) (digest.Digest, error) {
	if !strings.Contains(s, ":") {
		return ref.DigestFromHex(s)
	}
	return ref.ParseDigest(s)
}

func cachePathCmd() *command {
	return &command{name: "path", short: "print the folder of the content-addressed store",
		examples: `mur cache path
du -sh "$(mur cache path)"`,
		run: func(e *env, args []string) error {
			if err := noArgs("path", args); err != nil {
				return err
			}
			h, err := e.Home()
			if err != nil {
				return err
			}
			if e.g.json {
				return e.JSON(struct {
					Path string `json:"path"`
				}{h.CAS()})
			}
			_, err = fmt.Fprintln(e.stdout, h.CAS())
			return err
		}}
}

// keptWhy says what gc kept and why, each reason with its count: a blob a lock pins, one a pull
// in flight is bringing in, one used more recently than --older-than (and, with --max-size, not
// trimmed).
func keptWhy(r cas.GCReport, locks int, olderThan time.Duration, maxSize int64) string {
	out := fmt.Sprintf("kept %s (%s)", plural(r.Kept, "blob"), cas.FormatSize(r.Size))
	var why []string
	if n := r.Pinned - r.InUse; n > 0 {
		why = append(why, fmt.Sprintf("%d pinned by %s", n, plural(locks, "project lock")))
	}
	if r.InUse > 0 {
		why = append(why, fmt.Sprintf("%d in use by %s in flight", r.InUse, plural(r.Leases, "pull")))
	}
	if r.Recent > 0 {
		w := fmt.Sprintf("%d used within --older-than %s", r.Recent, cas.FormatAge(olderThan))
		if maxSize > 0 {
			w += " and under --max-size " + cas.FormatSize(maxSize)
		}
		why = append(why, w)
	}
	if len(why) == 0 {
		return out
	}
	return out + ": " + strings.Join(why, ", ")
}
