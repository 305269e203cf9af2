// Command mur is the content-addressed artifact cache, fetch tool and sandbox runner behind
// Murmur capsules. This package only turns flags into library calls and results into text or
// JSON; every behaviour lives in the library packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/internal/suggest"
	"github.com/murmur-nexus/mur/internal/termtext"
)

func main() {
	ctx, stop := notifyInterrupt(context.Background(), slowdown.Scale(interruptGrace), func() {
		// A pull writes what it committed into murmur.lock as soon as Ctrl-C comes; that write is
		// not cut short, unless it takes longer than pinGrace (another process holds the lock).
		wait, cancel := context.WithTimeout(context.Background(), slowdown.Scale(pinGrace))
		fetch.WaitForPins(wait)
		cancel()
		fmt.Fprintf(os.Stderr, "\nmur: %s: %s\n", errs.TokenOf(graceMessage()), errs.Message(graceMessage()))
		os.Exit(exitInterrupted)
	})
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// globals are the flags every command accepts, before or after its name.
type globals struct {
	home    string
	json    bool
	quiet   bool
	offline bool
}

func (g *globals) register(fs *pflag.FlagSet) {
	// Defaults are the current values, so a flag given before the command name survives the
	// command's own FlagSet registering the same variables again.
	fs.StringVar(&g.home, "home", g.home, "the Murmur home (default $MURMUR_HOME, else $HOME/.murmur)")
	fs.BoolVar(&g.json, "json", g.json, "write machine-readable results to stdout")
	fs.BoolVarP(&g.quiet, "quiet", "q", g.quiet, "silence progress output")
	fs.BoolVar(&g.offline, "offline", g.offline, "forbid network use (also MUR_OFFLINE=1)")
}

// env is what a command runs with.
type env struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	g      *globals
	result any // what --json prints, in the envelope, when the command ends
	// interrupted, when set, describes what a command had finished and had in flight when
	// Ctrl-C came, for the interrupted: message.
	interrupted func() string
	// helper runs mur-provenance for the command, started only when a bundle is to be checked.
	helper *provenance.Helper
}

// verifier is the command's provenance verifier: mur-provenance, run on first use.
func (e *env) verifier() *provenance.Helper {
	if e.helper == nil {
		e.helper = &provenance.Helper{}
	}
	return e.helper
}

// Home resolves the Murmur home from --home, $MURMUR_HOME or $HOME.
func (e *env) Home() (Home, error) { return resolveHome(e.g.home) }

// Offline reports whether network use is forbidden for this command.
func (e *env) Offline() bool {
	if e.g.offline {
		return true
	}
	v := os.Getenv("MUR_OFFLINE")
	return v != "" && v != "0" && !strings.EqualFold(v, "false")
}

// JSON sets the command's --json result, which must marshal to a JSON object. It is printed
// when the command ends, inside the envelope (see envelope.go).
func (e *env) JSON(v any) error {
	e.result = v
	return nil
}

// raw is the stream beneath termtext's escaping, for output that is escaped some other way.
func raw(w io.Writer) io.Writer {
	if t, ok := w.(*termtext.Writer); ok {
		return t.Unwrap()
	}
	return w
}

// Warn writes a warning to stderr, as `mur: warning: …`. Every warning takes this path and
// none takes Progress's: -q silences progress only, since CI runs quiet and a warning is
// something the user must see (docs/commands.md).
func (e *env) Warn(format string, args ...any) {
	fmt.Fprintf(e.stderr, "mur: warning: "+format+"\n", args...)
}

// warning is Warn as the library's callbacks take it: one message, said as it is.
func (e *env) warning(msg string) { e.Warn("%s", msg) }

// Progress writes a human progress line to stderr unless -q. It is never a warning's path.
func (e *env) Progress(format string, args ...any) {
	if !e.g.quiet {
		fmt.Fprintf(e.stderr, format+"\n", args...)
	}
}

// command is one verb of the command line. A command either runs or has subcommands.
type command struct {
	name     string
	args     string // the synopsis after the name, e.g. "[REF...]"
	short    string // one line for `mur help`
	long     string // extra paragraphs for `mur COMMAND --help`
	examples string // the Examples section of `mur COMMAND --help`, one command a line
	flags    func(fs *pflag.FlagSet)
	run      func(e *env, args []string) error
	subs     []*command
	// passThrough stops flag parsing at the first positional argument, so that flags after it
	// belong to someone else (the guest, for `mur run`).
	passThrough bool
}

// exitCode lets a command choose its own exit status (mur run uses the guest's code and 124-127).
type exitCode struct {
	code int
	err  error // printed when non-nil
}

func (x *exitCode) Error() string {
	if x.err != nil {
		return x.err.Error()
	}
	return fmt.Sprintf("exit status %d", x.code)
}
func (x *exitCode) Unwrap() error { return x.err }

func commands() []*command {
	return []*command{
		initCmd(),
		pullCmd(),
		addCmd(),
		rmCmd(),
		outdatedCmd(),
		lsCmd(),
		infoCmd(),
		runCmd(),
		verifyCmd(),
		warmCmd(),
		packCmd(),
		pushCmd(),
		keyCmd(),
		indexCmd(),
		cacheCmd(),
		stateCmd(),
		lockCmd(),
		trustCmd(),
		versionCmd(),
		completionCmd(),
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, rawStdout, rawStderr io.Writer) int {
	// Everything mur itself prints passes through termtext, so that no byte a server, an index
	// or a packed file sent can drive the terminal. Only a guest's own output (mur run), the
	// JSON envelope (escaped as JSON) and the progress display's cursor moves take the raw
	// streams.
	stdout, stderr := termtext.NewWriter(rawStdout), termtext.NewWriter(rawStderr)
	if len(args) > 0 && args[0] == completeCommand {
		dir, _ := os.Getwd()
		complete(stdout, args[1:], dir)
		return 0
	}
	g := &globals{}
	top := pflag.NewFlagSet("mur", pflag.ContinueOnError)
	top.SetInterspersed(false)
	top.SetOutput(io.Discard)
	g.register(top)
	help := top.BoolP("help", "h", false, "show help")
	showVersion := top.Bool("version", false, "print mur's version")
	if err := top.Parse(args); err != nil {
		return failUsage(stdout, stderr, g.json || asksJSON(args), errs.New(errs.Usage, "%v; run 'mur help' for the list of commands and flags", err))
	}
	rest := top.Args()
	cmds := commands()
	if *showVersion && !*help {
		rest = append([]string{"version"}, rest...)
	}
	if *help || len(rest) == 0 || rest[0] == "help" {
		if len(rest) > 1 && rest[0] == "help" {
			if c := find(cmds, rest[1]); c != nil {
				if len(rest) > 2 && len(c.subs) > 0 {
					if s := find(c.subs, rest[2]); s != nil {
						printCommandHelp(stdout, "mur "+c.name, s, g)
						return 0
					}
				}
				printCommandHelp(stdout, "mur", c, g)
				return 0
			}
			if t := findTopic(rest[1]); t != nil {
				fmt.Fprint(stdout, t.text())
				return 0
			}
			return fail(stderr, unknownHelp(rest[1], cmds))
		}
		printTopHelp(stdout, cmds)
		if len(rest) == 0 && !*help {
			return 2
		}
		return 0
	}
	e := &env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, g: g}
	return dispatch(e, "mur", cmds, rest)
}

func dispatch(e *env, path string, cmds []*command, args []string) int {
	c := find(cmds, args[0])
	if c == nil {
		return failUsage(e.stdout, e.stderr, e.g.json || asksJSON(args), unknownCommand(args[0], cmds, path))
	}
	args = args[1:]
	// A command with subcommands may also run itself (mur lock [REF...] beside mur lock
	// forget-scope): a first argument that names no subcommand is its own.
	ownRun := c.run != nil && (len(args) == 0 || find(c.subs, firstWord(args)) == nil && args[0] != "help")
	if len(c.subs) > 0 && !ownRun {
		if len(args) == 0 || args[0] == "help" || args[0] == "--help" || args[0] == "-h" {
			printCommandHelp(e.stdout, path, c, e.g)
			if len(args) == 0 {
				return 2
			}
			return 0
		}
		// Global flags may come between a command and its subcommand.
		pre := pflag.NewFlagSet(path+" "+c.name, pflag.ContinueOnError)
		pre.SetInterspersed(false)
		pre.SetOutput(io.Discard)
		e.g.register(pre)
		if err := pre.Parse(args); err != nil {
			return failUsage(e.stdout, e.stderr, e.g.json || asksJSON(args), errs.New(errs.Usage, "%v; run '%s %s --help'", err, path, c.name))
		}
		if len(pre.Args()) == 0 {
			printCommandHelp(e.stdout, path, c, e.g)
			return 2
		}
		return dispatch(e, path+" "+c.name, c.subs, pre.Args())
	}
	fs := pflag.NewFlagSet(path+" "+c.name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SetInterspersed(!c.passThrough)
	e.g.register(fs)
	help := fs.BoolP("help", "h", false, "show help")
	if c.flags != nil {
		c.flags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return failUsage(e.stdout, e.stderr, e.g.json || asksJSON(args), errs.New(errs.Usage, "%s %s: %v; run '%s %s --help'", path, c.name, err, path, c.name))
	}
	if *help {
		printCommandHelp(e.stdout, path, c, e.g)
		return 0
	}
	err := c.run(e, fs.Args())
	if e.helper != nil {
		_ = e.helper.Close()
	}
	if e.ctx.Err() != nil && !isExitStatus(err) && errs.TokenOf(err) != errs.Interrupted {
		err = interrupted(e, err)
	}
	if e.g.json && (e.result != nil || (err != nil && !isExitStatus(err))) {
		if jerr := writeEnvelope(raw(e.stdout), e.result, err); jerr != nil && err == nil {
			err = jerr
		}
	}
	if err != nil {
		return fail(e.stderr, err)
	}
	return 0
}

// isExitStatus reports whether err only carries a status to exit with (a guest's own), with
// nothing to print.
func isExitStatus(err error) bool {
	var x *exitCode
	return errors.As(err, &x) && x.err == nil
}

// interrupted is the error of a command that Ctrl-C (or SIGTERM) stopped: what it said, if it
// was already winding down with an error, gives way to one message that says what is kept.
func interrupted(e *env, err error) error {
	detail := "what was in flight was removed, and what had finished stays pinned"
	if e.interrupted != nil {
		detail = e.interrupted()
	}
	return errs.Wrap(err, errs.Interrupted, "stopped by a signal; %s; run the command again to finish", detail)
}

func find(cmds []*command, name string) *command {
	for _, c := range cmds {
		if c.name == name {
			return c
		}
	}
	return nil
}

func unknownCommand(name string, cmds []*command, path string) error {
	best, bestD := "", 3
	for _, c := range cmds {
		if d := suggest.Distance(name, c.name); d < bestD {
			best, bestD = c.name, d
		}
	}
	if best != "" {
		return errs.New(errs.Usage, "unknown command %q for %s: did you mean '%s %s'? ('%s help' lists them all)", name, path, path, best, path)
	}
	return errs.New(errs.Usage, "unknown command %q for %s; run '%s help' for the list", name, path, path)
}

// unknownHelp is the error of `mur help NAME` for a NAME that is neither a command nor a topic.
func unknownHelp(name string, cmds []*command) error {
	best, bestD := "", 3
	for _, n := range append(names(cmds), topicNames()...) {
		if d := suggest.Distance(name, n); d < bestD {
			best, bestD = n, d
		}
	}
	if best != "" {
		return errs.New(errs.Usage, "no command or help topic %q: did you mean 'mur help %s'? ('mur help' lists them all)", name, best)
	}
	return errs.New(errs.Usage, "no command or help topic %q; run 'mur help' for the list", name)
}

// topicNames are the names of the help topics.
func topicNames() []string {
	var out []string
	for _, t := range helpTopics() {
		out = append(out, t.name)
	}
	return out
}

// failUsage fails with a usage error found before the command ran (a bad flag, an unknown
// command); under --json it prints the envelope too, as every other failure does.
func failUsage(stdout, stderr io.Writer, json bool, err error) int {
	if json {
		_ = writeEnvelope(raw(stdout), nil, err)
	}
	return fail(stderr, err)
}

// asksJSON reports whether args, which did not parse, ask for --json anyway: a flag parser stops
// at the first bad flag, so a --json after it was never seen. Arguments after "--" are the
// guest's.
func asksJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "--json=true", "--json=1":
			return true
		}
	}
	return false
}

// fail prints err as `mur: <token>: <sentence>` and returns its exit status.
func fail(stderr io.Writer, err error) int {
	var x *exitCode
	if errors.As(err, &x) {
		if x.err != nil {
			fmt.Fprintf(stderr, "mur: %s: %s\n", errs.TokenOf(x.err), errs.Message(x.err))
		}
		return x.code
	}
	tok := errs.TokenOf(err)
	fmt.Fprintf(stderr, "mur: %s: %s\n", tok, errs.Message(err))
	return exitStatus(tok)
}

// exitStatus is the status of a failure with token tok: 2 for usage, 130 when interrupted,
// else 1.
func exitStatus(tok errs.Token) int {
	switch tok {
	case errs.Usage:
		return 2
	case errs.Interrupted:
		return exitInterrupted
	}
	return 1
}

func printTopHelp(w io.Writer, cmds []*command) {
	fmt.Fprintln(w, "mur: the content-addressed artifact cache, fetch tool and sandbox runner for Murmur capsules")
	fmt.Fprintln(w, "\nUsage:\n  mur [global flags] COMMAND [flags] [args]\n\nCommands:")
	sorted := append([]*command(nil), cmds...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	width := 0
	for _, c := range sorted {
		width = max(width, len(c.name))
	}
	for _, t := range helpTopics() {
		width = max(width, len(t.name))
	}
	for _, c := range sorted {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.short)
	}
	fmt.Fprintln(w, "\nHelp topics (mur help TOPIC):")
	for _, t := range helpTopics() {
		fmt.Fprintf(w, "  %-*s  %s\n", width, t.name, t.short)
	}
	fmt.Fprintln(w, "\nGlobal flags (before or after the command):")
	fs := pflag.NewFlagSet("mur", pflag.ContinueOnError)
	(&globals{}).register(fs)
	fmt.Fprint(w, fs.FlagUsages())
	fmt.Fprintln(w, "\nRun 'mur help COMMAND' or 'mur COMMAND --help' for more.")
}

func printCommandHelp(w io.Writer, path string, c *command, g *globals) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", usageLine(path, c), c.short)
	if c.long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.long))
	}
	if c.examples != "" {
		fmt.Fprintln(w, "\nExamples:")
		for _, l := range strings.Split(strings.TrimSpace(c.examples), "\n") {
			fmt.Fprintf(w, "  %s\n", strings.TrimSpace(l))
		}
	}
	if len(c.subs) > 0 {
		fmt.Fprintln(w, "\nSubcommands:")
		for _, s := range c.subs {
			fmt.Fprintf(w, "  %-14s %s\n", s.name, s.short)
		}
		fmt.Fprintf(w, "\nRun '%s %s SUBCOMMAND --help' for more.\n", path, c.name)
		if c.run == nil {
			return
		}
	}
	fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
	if c.flags != nil {
		c.flags(fs)
	}
	if u := fs.FlagUsages(); u != "" {
		fmt.Fprintf(w, "\nFlags:\n%s", u)
	}
	gfs := pflag.NewFlagSet("globals", pflag.ContinueOnError)
	(&globals{}).register(gfs)
	fmt.Fprintf(w, "\nGlobal flags:\n%s", gfs.FlagUsages())
}

// usageLine is a command's synopsis: its name, a summary of its own flags (the short ones by
// letter, the rest as [flags]), and its arguments.
func usageLine(path string, c *command) string {
	parts := []string{path, c.name}
	if len(c.subs) > 0 {
		return strings.Join(append(parts, "SUBCOMMAND", "[flags]"), " ")
	}
	fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
	if c.flags != nil {
		c.flags(fs)
	}
	switch {
	case strings.HasPrefix(c.args, "[-"):
		// The synopsis names its flags itself.
	case fs.HasFlags():
		parts = append(parts, "[flags]")
	default:
		parts = append(parts, "[global flags]")
	}
	if c.args != "" {
		parts = append(parts, c.args)
	}
	return strings.Join(parts, " ")
}

// usagef is a usage error for a command's arguments.
func usagef(format string, args ...any) error { return errs.New(errs.Usage, format, args...) }

// firstWord is the first argument that is not a flag, for telling a subcommand from a command's
// own arguments; global flags may come before a subcommand.
func firstWord(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}
