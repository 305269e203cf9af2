// Command ghreleases serves a folder of packed artifacts as a scope's GitHub releases on this
// machine, so that a publisher can try a releases source before the first tag
// (docs/publishing-github.md). It is the fake GitHub of mur's own tests (fetch/github/githubtest):
// the API, web and storage hosts on 127.0.0.1, answering as GitHub does. Each TAG=DIR is a
// release whose assets are DIR's files (the .mur.zip files and murmur-index.json that mur pack
// and mur index wrote); the last one given is the latest.
//
//	go run ./contrib/ghreleases -repo acme/murmur-artifacts v1.2.0=dist -- mur pull acme/grep@1.2.0
//
// With a command after --, it runs it with MUR_GITHUB_API_BASE set to the fake (and GITHUB_TOKEN
// unset: a real token has no business there), then exits with the command's status. Without one,
// it prints the export line and serves until Ctrl-C.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/murmur-nexus/mur/fetch/github/githubtest"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// release is one TAG=DIR: a release and its assets.
type release struct {
	tag    string
	assets map[string][]byte
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ghreleases", flag.ContinueOnError)
	fs.SetOutput(stderr)
	repo := fs.String("repo", "", "the repository the scope's releases are in, OWNER/NAME (mur's default for scope acme is acme/murmur-artifacts)")
	ownerID := fs.Int64("owner-id", 1, "the owner's id, which a pull pins in murmur.lock (gh api repos/OWNER/NAME --jq .owner.id)")
	repoID := fs.Int64("repo-id", 2, "the repository's id, which a pull pins in murmur.lock (gh api repos/OWNER/NAME --jq .id)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ghreleases -repo OWNER/NAME TAG=DIR... [-- COMMAND ARGS...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	var command []string
	if i := slices.Index(rest, "--"); i >= 0 {
		rest, command = rest[:i], rest[i+1:]
	}
	owner, name, ok := strings.Cut(*repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		fmt.Fprintf(stderr, "ghreleases: -repo must be OWNER/NAME, found %q\n", *repo)
		return 2
	}
	releases, err := readReleases(rest)
	if err != nil {
		fmt.Fprintf(stderr, "ghreleases: %v\n", err)
		return 2
	}
	gh := githubtest.Start(reporter{stderr})
	defer gh.Close()
	gh.AddRepo(owner, name, *ownerID, *repoID)
	for _, r := range releases {
		gh.AddRelease(owner, name, r.tag, r.assets)
		fmt.Fprintf(stderr, "ghreleases: %s/%s release %s: %d assets\n", owner, name, r.tag, len(r.assets))
	}
	if len(command) == 0 {
		fmt.Fprintf(stdout, "export MUR_GITHUB_API_BASE=%s\n", gh.APIURL())
		fmt.Fprintln(stderr, "ghreleases: serving until Ctrl-C")
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		<-sig
		return 0
	}
	return runCommand(command, gh.APIURL(), stdout, stderr)
}

// readReleases reads each TAG=DIR: the regular files directly in DIR are the release's assets.
func readReleases(args []string) ([]release, error) {
	if len(args) == 0 {
		return nil, errors.New("name at least one release as TAG=DIR, e.g. v1.2.0=dist")
	}
	var out []release
	seen := map[string]bool{}
	for _, a := range args {
		tag, dir, ok := strings.Cut(a, "=")
		if !ok || tag == "" || dir == "" {
			return nil, fmt.Errorf("%q is not TAG=DIR, e.g. v1.2.0=dist", a)
		}
		if seen[tag] {
			return nil, fmt.Errorf("release %s is named twice", tag)
		}
		seen[tag] = true
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("release %s: %v", tag, err)
		}
		r := release{tag: tag, assets: map[string][]byte{}}
		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("release %s: %v", tag, err)
			}
			r.assets[e.Name()] = data
		}
		if len(r.assets) == 0 {
			return nil, fmt.Errorf("release %s: %s holds no files; write the .mur.zip files and murmur-index.json there first", tag, dir)
		}
		out = append(out, r)
	}
	return out, nil
}

// runCommand runs command against the fake and returns its exit status.
func runCommand(command []string, api string, stdout, stderr io.Writer) int {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MUR_GITHUB_API_BASE=") && !strings.HasPrefix(kv, "GITHUB_TOKEN=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "MUR_GITHUB_API_BASE="+api)
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode()
	case err != nil:
		fmt.Fprintf(stderr, "ghreleases: %v\n", err)
		return 127
	}
	return 0
}

// reporter is the fake's word of a misuse, which readReleases should have made impossible.
type reporter struct{ w io.Writer }

func (r reporter) Helper() {}
func (r reporter) Fatalf(format string, args ...any) {
	fmt.Fprintf(r.w, "ghreleases: "+format+"\n", args...)
	os.Exit(2)
}
