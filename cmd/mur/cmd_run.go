package main

import (
	"context"
	"errors"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/sandbox"
)

// hostHeapLimit bounds mur's own heap during a run, so that peak RSS stays within the guest's
// memory plus 128 MiB (BENCHMARKS.md) even when a long run makes garbage with the collector off.
const hostHeapLimit = 64 << 20

// runFlags are mur run's own flags, which go before ARTIFACT: what follows it is the guest's.
type runFlags struct {
	workdir string
	timeout time.Duration
	explain bool
	locked  lockedFlags
}

func (f *runFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.workdir, "workdir", "", "the guest's workdir (default workdir/ beside murmur.yaml)")
	fs.Var(durationFlag{&f.timeout}, "timeout", "wall-time limit, overriding limits.timeout_s (90s, 5m, 1d)")
	fs.BoolVar(&f.explain, "explain-scope", false, "print the effective grants and exit")
	f.locked.register(fs)
}

func runCmd() *command {
	f := &runFlags{}
	return &command{
		name:  "run",
		args:  "[--workdir DIR] [--timeout D] ARTIFACT [-- ARGS...]",
		short: "run a pulled artifact in the sandbox",
		long: `Runs the payload pinned in murmur.lock, loaded from the CAS and verified, with exactly the
preopens the capsule grants. mur's flags go before ARTIFACT and the guest's arguments after --:
one of mur's flags between ARTIFACT and -- is refused as a usage error that shows the order (a
guest flag of the same name goes after --). Exit status: the guest's
own; 2 for a usage error; 124 on timeout; 125 when mur fails; 126 when the payload can't be
executed; 127 when the artifact is not pulled; 130 when Ctrl-C or SIGTERM stopped the guest (a
second Ctrl-C kills mur at once); 134 when the guest crashed (a trap). --explain-scope prints the grants and changes nothing; --json goes only with it, since the guest owns stdout.`,
		examples: `mur run grep -- --help
mur run acme/grep -- -n TODO src/
mur run --timeout 30s --workdir ./data acme/grep -- pattern
mur run --explain-scope acme/grep
mur run --locked grep                   # CI: refuse a murmur.lock that does not follow murmur.yaml
mur run --explain-scope --json grep`,
		passThrough: true,
		flags:       f.register,
		run: func(e *env, args []string) error {
			if len(args) == 0 {
				return usagef("mur run needs an ARTIFACT, e.g. 'mur run acme/grep -- --help'")
			}
			if err := checkArtifactArg(args[0]); err != nil {
				return err
			}
			if err := misplacedRunFlags(args); err != nil {
				return err
			}
			if e.g.json && !f.explain {
				// The guest owns stdout: a JSON object after its output would be no JSON at all.
				return usagef("--json goes only with --explain-scope: a run's stdout is the guest's own; drop --json, or add --explain-scope to see the grants as JSON")
			}
			if len(args) > 1 && args[1] == "--" {
				args = append(args[:1], args[2:]...)
			}
			return runArtifact(e, args[0], args[1:], f.workdir, f.timeout, f.explain, &f.locked)
		},
	}
}

// misplacedRunFlags refuses one of mur's own flags between ARTIFACT and "--": the guest would
// get it, and the run would go on without it (no --timeout, or the tool run for
// --explain-scope). args are ARTIFACT and what follows it; the error shows them in order.
func misplacedRunFlags(args []string) error {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	(&runFlags{}).register(fs)
	(&globals{}).register(fs)
	fs.BoolP("help", "h", false, "")
	var ours, guest, found []string
	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			guest = append(guest, rest[i+1:]...)
			break
		}
		f := lookupFlag(fs, a)
		if f == nil {
			guest = append(guest, a)
			continue
		}
		found = append(found, strings.SplitN(a, "=", 2)[0])
		ours = append(ours, a)
		if f.Value.Type() != "bool" && !strings.Contains(a, "=") && i+1 < len(rest) {
			i++
			ours = append(ours, rest[i])
		}
	}
	if len(found) == 0 {
		return nil
	}
	order := append(append([]string{"mur", "run"}, ours...), args[0])
	if len(guest) > 0 {
		order = append(append(order, "--"), guest...)
	}
	return usagef("%s after the artifact %s would go to the guest, not to mur: mur's flags go before ARTIFACT and the guest's arguments after --, as in '%s'; a guest flag of that name goes after --",
		strings.Join(found, ", "), args[0], strings.Join(order, " "))
}

// lookupFlag is the flag of fs that the argument a names (--name, --name=value or -x), or nil.
func lookupFlag(fs *pflag.FlagSet, a string) *pflag.Flag {
	name, _, _ := strings.Cut(a, "=")
	switch {
	case strings.HasPrefix(name, "--") && len(name) > 2:
		return fs.Lookup(name[2:])
	case strings.HasPrefix(name, "-") && len(name) == 2:
		return fs.ShorthandLookup(name[1:])
	}
	return nil
}

func runArtifact(e *env, artifact string, guestArgs []string, workdir string, timeout time.Duration, explain bool, locked *lockedFlags) error {
	fail := func(code int, err error) error {
		if errs.TokenOf(err) == errs.Usage {
			code = 2 // usage errors exit 2 under every command
		}
		return &exitCode{code: code, err: err}
	}
	p, l, err := e.openLocked()
	if err != nil {
		return fail(sandbox.StatusRunnerFailed, err)
	}
	if err := locked.check(e, p, l, ""); err != nil {
		return fail(sandbox.StatusRunnerFailed, err)
	}
	if in := p.intent(); in != nil {
		// Without --locked a run still runs what the lock pins, and says what does not follow.
		for _, m := range in.Mismatches(l, "") {
			e.Warn("lock-mismatch: %s; run 'mur pull' (or 'mur lock'), then commit murmur.lock", m)
		}
	}
	plan, err := sandbox.BuildPlan(sandbox.PlanInput{
		ProjectDir: p.Dir, Capsule: p.capsule, Lock: l, Home: p.home.Root, StateDir: p.home.State(),
		Artifact: artifact, Workdir: workdir, Timeout: timeout,
	})
	if err != nil {
		if errors.Is(err, errs.NotFound) {
			return fail(sandbox.StatusNotPulled, err)
		}
		return fail(sandbox.StatusRunnerFailed, err)
	}
	if explain {
		if e.g.json {
			return e.JSON(plan)
		}
		plan.Explain(e.stdout)
		return nil
	}
	// A warm start is mostly loading a compiled module: megabytes of short-lived allocations
	// that the collector would otherwise chase several times. mur leaves the collector off and
	// lets a memory limit turn it back on if a long run ever needs it; that is about a quarter
	// of a warm start. Guest memory is not on the Go heap (the sandbox maps it itself), so the
	// limit is the host's own budget, whatever the guest's cap.
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(hostHeapLimit)
	store, err := openCAS(p.home)
	if err != nil {
		return fail(sandbox.StatusRunnerFailed, err)
	}
	opt := p.runnerOptions(e.warning)
	opt.GuestWritable = plan.Writable()
	runner, err := sandbox.New(e.ctx, opt)
	if err != nil {
		return fail(sandbox.StatusRunnerFailed, err)
	}
	defer runner.Close(context.Background())
	wasm, _, err := sandbox.LoadPayload(e.ctx, store, digest.Digest(plan.Digest), runner.PayloadDir())
	if err != nil {
		if errors.Is(err, errs.NotFound) {
			return fail(sandbox.StatusNotPulled, errs.Wrap(err, errs.NotFound, "%s is pinned but its blob %s is not in the CAS; run 'mur pull %s'", plan.Artifact, plan.Digest, plan.Artifact))
		}
		if errors.Is(err, errs.Integrity) {
			return fail(sandbox.StatusRunnerFailed, errs.Wrap(err, errs.Integrity, "%s: the CAS blob %s failed verification and was quarantined, so nothing was run; run 'mur pull %s' to fetch it again", plan.Artifact, plan.Digest, plan.Artifact))
		}
		return fail(sandbox.StatusRunnerFailed, err)
	}
	stopped := errs.New(errs.Interrupted, "the run of %s was stopped by a signal", plan.Artifact)
	// A guest held in a host call (a read of the terminal) can't be stopped, so main's grace
	// period may end the run instead: it then says the same.
	setGraceMessage(stopped)
	status, err := runner.RunPlan(e.ctx, plan, wasm, guestArgs, sandbox.Stdio{
		Stdin: e.stdin, Stdout: raw(e.stdout), Stderr: raw(e.stderr), LookupEnv: os.LookupEnv,
	})
	if errors.Is(err, sandbox.ErrInterrupted) && e.ctx.Err() != nil {
		// mur's context ends only on SIGINT or SIGTERM.
		err = errs.Wrap(err, errs.Interrupted, "%s", stopped.Msg)
	}
	if status == 0 && err == nil {
		return nil
	}
	return fail(status, err)
}
