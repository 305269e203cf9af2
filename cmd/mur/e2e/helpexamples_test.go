package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

func init() { scriptCmds["help-examples"] = helpExamples }

// helpExamples FILE: runs every example that `mur help` and every command's --help show, through
// bash in the script's current folder, after replacing each placeholder FILE lists
// ("placeholder => value", $NAMES expanded) with something real. Each example starts from the
// world as it was when help-examples began (the current folder and the Murmur home are put back),
// so that no example depends on another. An example fails when mur calls it a usage error (a flag
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
	examplesSnapshot(ts)
	var paths [][]string
	for _, c := range listed(mur("help"), "Commands:") {
		paths = append(paths, []string{c})
		for _, s := range listed(mur(c, "--help"), "Subcommands:") {
			paths = append(paths, []string{c, s})
		}
	}
	ran := 0
	for _, p := range paths {
		examples := listed(mur(append(p, "--help")...), "Examples:")
		if len(examples) == 0 {
			ts.Fatalf("mur %s --help shows no examples", strings.Join(p, " "))
		}
		for _, ex := range examples {
			line := ex
			for _, f := range fill {
				line = strings.ReplaceAll(line, f[0], f[1])
			}
			if strings.Contains(line, "…") {
				ts.Fatalf("example %q has a placeholder (…) that %s does not fill", ex, args[0])
			}
			examplesFresh(ts)
			cmd := exec.Command("bash", "-c", line)
			cmd.Dir = ts.MkAbs(".")
			cmd.Env = scriptEnv(ts)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				ts.Fatalf("%s: %v", line, err)
			}
			ts.Logf("mur %s example: %s\n  ran: %s\n  exit %d", strings.Join(p, " "), ex, line, code)
			if strings.Contains(stderr.String(), "mur: usage:") {
				ts.Fatalf("the example %q of 'mur %s --help' is a usage error now:\n%s", ex, strings.Join(p, " "), stderr.String())
			}
			ran++
		}
	}
	ts.Logf("ran %d examples of %d commands", ran, len(paths))
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

// examplesFresh puts back what examplesSnapshot kept.
func examplesFresh(ts *testscript.TestScript) {
	snap := filepath.Join(ts.Getenv("WORK"), ".examples-snapshot")
	for _, dir := range []string{ts.MkAbs("."), ts.Getenv("MURMUR_HOME")} {
		ts.Check(os.RemoveAll(dir))
		out, err := exec.Command("cp", "-a", filepath.Join(snap, filepath.Base(dir)), dir).CombinedOutput()
		if err != nil {
			ts.Fatalf("restoring %s: %v\n%s", dir, err, out)
		}
	}
}
