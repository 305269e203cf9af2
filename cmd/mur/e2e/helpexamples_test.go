package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/murmur-nexus/mur/internal/slowdown/deadline"
)

func init() { scriptCmds["help-examples"] = helpExamples }

// helpExamples FILE: runs every example that `mur help` and every command's --help show, through
// bash, after replacing each placeholder FILE lists ("placeholder => value", $NAMES expanded) with
// something real. Each example starts from the world as it was when help-examples began (fresh
// copies of the current folder and the Murmur home, where it runs), so that no example depends on
// another, and several run at once. An example fails when mur calls it a usage error (a flag
// or an argument that no longer exists): the examples are what users copy, so a stale one must
// fail the build. Other failures (a guest's own status, an owner pin a source never made) are
// logged, not judged.
func helpExamples(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: help-examples PLACEHOLDERS-FILE")
	}
	var fill [][2]string
	for _, l := range strings.Split(ts.ReadFile(args[0]), "\n") {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		from, to, ok := strings.Cut(l, " => ")
		if !ok {
			ts.Fatalf("%s: %q is not 'placeholder => value'", args[0], l)
		}
		fill = append(fill, [2]string{from, scriptVar.ReplaceAllStringFunc(to, func(v string) string { return ts.Getenv(v[1:]) })})
	}
	mur := func(args ...string) string {
		cmd := exec.Command(murBin, args...)
		cmd.Dir = ts.MkAbs(".")
		cmd.Env = scriptEnv(ts)
		b, err := cmd.Output()
		if err != nil {
			ts.Fatalf("mur %s: %v", strings.Join(args, " "), err)
		}
		return string(b)
	}
	var examples []helpExample
	for _, c := range listed(mur("help"), "Commands:") {
		examples = append(examples, examplesOf(ts, mur, args[0], fill, []string{c})...)
		for _, s := range listed(mur(c, "--help"), "Subcommands:") {
			examples = append(examples, examplesOf(ts, mur, args[0], fill, []string{c, s})...)
		}
	}
	examplesSnapshot(ts)
	results := make([]exampleResult, len(examples))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := range examplesWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = runExample(ts, w, examples[i].line)
			}
		}()
	}
	for i := range examples {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, ex := range examples {
		res := results[i]
		if res.err != nil {
			ts.Fatalf("%s: %v", ex.line, res.err)
		}
		ts.Logf("mur %s example: %s\n  ran: %s\n  exit %d", ex.command, ex.text, ex.line, res.code)
		if strings.Contains(res.stderr, "mur: usage:") {
			ts.Fatalf("the example %q of 'mur %s --help' is a usage error now:\n%s", ex.text, ex.command, res.stderr)
		}
	}
	ts.Logf("ran %d examples", len(examples))
}

// examplesWorkers is how many examples run at once, each in its own copy of the world: much of an
// example's time is mur starting, files being copied, and the registry answering.
const examplesWorkers = 4

type helpExample struct {
	command    string // "cache gc"
	text, line string // as the help shows it, and with its placeholders filled
}

type exampleResult struct {
	code   int
	stderr string
	err    error // the example could not be run at all
}

// examplesOf lists the examples of `mur p... --help` with the placeholders in fill filled; it
// fails the script when there are none, or when one keeps a placeholder FILE does not fill.
func examplesOf(ts *testscript.TestScript, mur func(...string) string, file string, fill [][2]string, p []string) []helpExample {
	var out []helpExample
	for _, ex := range listed(mur(append(p, "--help")...), "Examples:") {
		line := ex
		for _, f := range fill {
			line = strings.ReplaceAll(line, f[0], f[1])
		}
		if strings.Contains(line, "…") {
			ts.Fatalf("example %q has a placeholder (…) that %s does not fill", ex, file)
		}
		out = append(out, helpExample{command: strings.Join(p, " "), text: ex, line: line})
	}
	if len(out) == 0 {
		ts.Fatalf("mur %s --help shows no examples", strings.Join(p, " "))
	}
	return out
}

// runExample runs line through bash in worker w's copy of the world, made afresh from the
// snapshot. It runs beside the other workers, so it reports rather than fails the script.
func runExample(ts *testscript.TestScript, w int, line string) exampleResult {
	dir, home, err := examplesFresh(ts, w)
	if err != nil {
		return exampleResult{err: err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline.Limit())
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Dir = dir
	cmd.Env = append(scriptEnv(ts), "MURMUR_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return exampleResult{err: fmt.Errorf("still running after %s, and killed", deadline.Limit())}
	case errors.As(err, &ee):
		return exampleResult{code: ee.ExitCode(), stderr: stderr.String()}
	}
	return exampleResult{stderr: stderr.String(), err: err}
}

// scriptVar is a $NAME in a placeholder's value; anything else ($(…) for one) is bash's.
var scriptVar = regexp.MustCompile(`\$[A-Z_][A-Z0-9_]*`)

// listed is the first word of each line of the section titled title in help text out; for
// Examples, the whole line.
func listed(out, title string) []string {
	_, rest, ok := strings.Cut(out, "\n"+title+"\n")
	if !ok {
		return nil
	}
	var items []string
	for _, l := range strings.Split(rest, "\n") {
		if strings.TrimSpace(l) == "" {
			break
		}
		l = strings.TrimSpace(l)
		if title != "Examples:" {
			l = strings.Fields(l)[0]
		}
		items = append(items, l)
	}
	return items
}

// examplesSnapshot keeps the current folder and the Murmur home as they are, for fresh to put back.
func examplesSnapshot(ts *testscript.TestScript) {
	snap := filepath.Join(ts.Getenv("WORK"), ".examples-snapshot")
	ts.Check(os.RemoveAll(snap))
	ts.Check(os.MkdirAll(snap, 0o755))
	for _, dir := range []string{ts.MkAbs("."), ts.Getenv("MURMUR_HOME")} {
		out, err := exec.Command("cp", "-a", dir, filepath.Join(snap, filepath.Base(dir))).CombinedOutput()
		if err != nil {
			ts.Fatalf("snapshot of %s: %v\n%s", dir, err, out)
		}
	}
}

// examplesFresh puts worker w's copies of the current folder and the Murmur home back as
// examplesSnapshot kept them, and says where they are. Most examples change little (a record, a
// lock) or nothing, so the copies are brought back file by file (syncTree) rather than made
// anew: copying the whole world for each of a hundred examples was a quarter of its CPU.
func examplesFresh(ts *testscript.TestScript, w int) (dir, home string, err error) {
	snap := filepath.Join(ts.Getenv("WORK"), ".examples-snapshot")
	base := filepath.Join(ts.Getenv("WORK"), fmt.Sprintf(".examples-%d", w))
	dir = filepath.Join(base, filepath.Base(ts.MkAbs(".")))
	home = filepath.Join(base, filepath.Base(ts.Getenv("MURMUR_HOME")))
	for _, d := range []string{dir, home} {
		if err := syncTree(filepath.Join(snap, filepath.Base(d)), d); err != nil {
			return "", "", fmt.Errorf("restoring %s: %v", d, err)
		}
	}
	return dir, home, nil
}

// syncTree makes dst hold what src holds: the same folders, links, and files with the same
// bytes, mode and modification time. A file of dst with src's size, mode and modification time
// is taken to hold its bytes and kept (every copy keeps the time, and a write changes it); the
// rest is copied again, and what src lacks is removed. A dst it cannot bring back so (an example
// left a folder it may not enter) is removed and copied whole, as cp -a copies.
func syncTree(src, dst string) error {
	if err := syncInto(src, dst); err == nil {
		return nil
	}
	_ = exec.Command("chmod", "-R", "u+rwx", dst).Run() // RemoveAll says what is still wrong
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("%v\n%s", err, out)
	}
	return nil
}

type dirMode struct {
	path string
	perm fs.FileMode
}

func syncInto(src, dst string) error {
	seen := map[string]bool{}
	var dirs []dirMode // given their modes last, deepest first, so that a read-only one is filled
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		seen[rel] = true
		to := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		have, haveErr := os.Lstat(to)
		switch {
		case fi.IsDir():
			if haveErr == nil && !have.IsDir() {
				if err := os.RemoveAll(to); err != nil {
					return err
				}
			}
			if err := os.MkdirAll(to, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirMode{to, fi.Mode().Perm()})
			return nil
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if cur, err := os.Readlink(to); err == nil && cur == target {
				return nil
			}
			if err := os.RemoveAll(to); err != nil {
				return err
			}
			return os.Symlink(target, to)
		case fi.Mode().IsRegular():
			if haveErr == nil && have.Mode() == fi.Mode() && have.Size() == fi.Size() && have.ModTime().Equal(fi.ModTime()) {
				return nil
			}
			if err := os.RemoveAll(to); err != nil {
				return err
			}
			return copyFile(p, to, fi)
		}
		return fmt.Errorf("%s: not a folder, link or file", p)
	})
	if err != nil {
		return err
	}
	// What an example added: removed, deepest first, so that a folder goes with what it held.
	var extra []string
	err = filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dst, p)
		if !seen[rel] {
			extra = append(extra, p)
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range extra {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(dirs[i].path, dirs[i].perm); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies the regular file from to to, with fi's mode and modification time.
func copyFile(from, to string, fi fs.FileInfo) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Chmod(to, fi.Mode().Perm()); err != nil {
		return err
	}
	return os.Chtimes(to, fi.ModTime(), fi.ModTime())
}
