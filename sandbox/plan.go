// A Plan is a capsule's grants turned into exactly what `mur run` opens: the mounts, the state
// stores, the environment and the limits. BuildPlan is pure, so that `mur run --explain-scope`
// prints what a launch would open without creating anything; RunPlan creates the folders and runs.
package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
	"github.com/murmur-nexus/mur/state"
)

// DefaultMemoryMiB caps guest memory when the capsule sets no limit.
const DefaultMemoryMiB = 512

// Plan is everything a launch opens.
type Plan struct {
	Artifact  string         `json:"artifact"`
	Version   string         `json:"version"`
	Platform  string         `json:"platform"`
	Digest    string         `json:"digest"`
	Workdir   string         `json:"workdir"`
	Preopens  []Mount        `json:"preopens"`
	States    []state.Report `json:"state_stores"`
	EnvNames  []string       `json:"env"`
	MemoryMiB int            `json:"memory_mib"`
	TimeoutS  float64        `json:"timeout_s"`
	Argv0     string         `json:"argv0"`

	timeout  time.Duration
	stateDir string
}

// Timeout is the wall-time limit; zero means none.
func (p *Plan) Timeout() time.Duration { return p.timeout }

// PlanInput is what BuildPlan needs.
type PlanInput struct {
	ProjectDir string
	Capsule    *manifest.Capsule // nil when the project has no murmur.yaml: no grants beyond the workdir
	Lock       *lock.Lock
	Home       string        // the Murmur home, kept out of the guest's reach
	StateDir   string        // the parent of every state store ($MURMUR_HOME/state)
	Artifact   string        // as typed: scoped, or bare when unambiguous
	Workdir    string        // --workdir; "" means workdir/ beside murmur.yaml
	Timeout    time.Duration // --timeout; 0 means the capsule's limit
	Platform   string        // "" means the host's
}

// BuildPlan resolves the plan without touching the file system.
func BuildPlan(in PlanInput) (*Plan, error) {
	platform := in.Platform
	if platform == "" {
		platform = ref.HostPlatform()
	}
	name, caps, err := resolveArtifact(in)
	if err != nil {
		return nil, err
	}
	e := in.Lock.Find(name.String())
	if e == nil {
		return nil, errs.New(errs.NotFound, "%s is not pulled (murmur.lock has no entry for it); run 'mur pull %s' first", name, name)
	}
	hex, pinnedPlatform, ok := e.Digest(platform)
	if !ok {
		return nil, errs.New(errs.NotFound, "%s@%s is pinned in murmur.lock, but not for platform %s or any; run 'mur pull %s@%s' on this machine", name, e.ResolvedVersion, platform, name, e.ResolvedVersion)
	}
	p := &Plan{Artifact: name.String(), Version: e.ResolvedVersion, Platform: pinnedPlatform, Digest: "sha256:" + hex, Argv0: name.Name, stateDir: in.StateDir}

	// A relative project folder would be compared lexically against an absolute root, and the
	// reach check below would then never match.
	projectDir, err := filepath.Abs(in.ProjectDir)
	if err != nil {
		return nil, errs.Wrap(err, errs.Usage, "project folder %q: %v", in.ProjectDir, err)
	}
	wd := in.Workdir
	if wd == "" {
		wd = filepath.Join(projectDir, "workdir")
	}
	wd, err = filepath.Abs(wd)
	if err != nil {
		return nil, errs.Wrap(err, errs.Usage, "workdir %q: %v", in.Workdir, err)
	}
	p.Workdir = wd
	scope := caps.Filesystem.Scope
	if scope == "" {
		scope = "."
	}
	root := filepath.Join(wd, filepath.FromSlash(scope))
	if err := checkReach(root, projectDir, in.Home); err != nil {
		return nil, err
	}
	p.Preopens = append(p.Preopens, Mount{GuestPath: "/", HostPath: root})
	ro := append([]string(nil), caps.Filesystem.ReadOnly...)
	sort.Strings(ro)
	for _, sub := range ro {
		host := filepath.Join(wd, filepath.FromSlash(sub))
		if atomicfile.Within(root, host) {
			// The scope is the subtree or lies inside it (an artifact may narrow the scope into
			// a read-only folder): the whole root is read-only.
			p.Preopens[0].ReadOnly = true
			continue
		}
		rel, err := filepath.Rel(root, host)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			// A read-only subtree outside the scope is out of reach anyway.
			continue
		}
		guest := "/" + filepath.ToSlash(rel)
		p.Preopens = append(p.Preopens, Mount{GuestPath: guest, HostPath: host, ReadOnly: true})
	}
	if caps.State != nil {
		store := caps.State.Store
		if store == "" && in.Capsule != nil {
			store = in.Capsule.StoreName()
		}
		reports, err := state.Reports(in.StateDir, []state.Grant{{Artifact: name.String(), Store: store}})
		if err != nil {
			return nil, err
		}
		p.States = reports
		for _, r := range reports {
			p.Preopens = append(p.Preopens, Mount{GuestPath: state.PreopenName, HostPath: r.HostPath})
		}
	}
	p.EnvNames = append([]string(nil), caps.Env.Allow...)
	sort.Strings(p.EnvNames)
	p.MemoryMiB = caps.Limits.MemoryMiB
	if p.MemoryMiB <= 0 {
		p.MemoryMiB = DefaultMemoryMiB
	}
	p.timeout = time.Duration(caps.Limits.TimeoutS) * time.Second
	if in.Timeout > 0 {
		p.timeout = in.Timeout
	}
	p.TimeoutS = p.timeout.Seconds()
	return p, nil
}

func resolveArtifact(in PlanInput) (ref.Name, manifest.Capabilities, error) {
	if in.Capsule != nil {
		a, err := in.Capsule.Find(in.Artifact)
		if err == nil {
			return a.Name, in.Capsule.Effective(a), nil
		}
		if !strings.Contains(in.Artifact, "/") {
			return ref.Name{}, manifest.Capabilities{}, err
		}
	}
	n, err := ref.ParseName(in.Artifact)
	if err != nil {
		return ref.Name{}, manifest.Capabilities{}, err
	}
	// Not declared: the workdir only, with nothing else granted.
	return n, manifest.Capabilities{Filesystem: manifest.Filesystem{Scope: "."}}, nil
}

// checkReach refuses a mount root from which the guest could reach the project's own files or
// the Murmur home, or that lies inside them.
func checkReach(root, projectDir, home string) error {
	protected := []string{
		filepath.Join(projectDir, "murmur.yaml"),
		filepath.Join(projectDir, lock.FileName),
		filepath.Join(projectDir, ".murmur"),
		filepath.Join(projectDir, "tools"),
		home,
	}
	r := realPath(root)
	for _, p := range protected {
		rp := realPath(p)
		if atomicfile.Within(rp, r) || atomicfile.Within(r, rp) {
			return errs.New(errs.Denied, "the guest's root %s would put %s within its reach; choose a workdir outside the project's own files and the Murmur home (the default is workdir/ beside murmur.yaml)", root, p)
		}
	}
	return nil
}

// realPath resolves symlinks in the longest existing prefix of p, so that a workdir reached
// through a link is judged by where it really is.
func realPath(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest)
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// prepare creates the workdir's mount roots and the state stores.
func (p *Plan) prepare() error {
	for _, o := range p.Preopens {
		if o.GuestPath == state.PreopenName {
			continue
		}
		if err := os.MkdirAll(o.HostPath, 0o755); err != nil {
			return errs.Wrap(err, errs.IO, "can't create %s: %v", o.HostPath, err)
		}
	}
	for _, s := range p.States {
		if _, err := state.Ensure(p.stateDir, s.Store); err != nil {
			return err
		}
	}
	return nil
}

// Writable lists the host folders the guest can write, which no cache may live in.
func (p *Plan) Writable() []string {
	var out []string
	for _, m := range p.Preopens {
		if !m.ReadOnly {
			out = append(out, m.HostPath)
		}
	}
	return out
}

// Stdio is what a launched guest inherits besides its mounts.
type Stdio struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// LookupEnv reads the host's environment; only the names the plan allows are passed on.
	LookupEnv func(string) (string, bool)
}

// RunPlan creates the plan's folders and state stores, then runs wasm (the plan's payload, from
// LoadPayload) with args after argv[0]. It returns the exit status of `mur run`: the guest's own
// code, or one of the Status values with an error that names the artifact.
func (r *Runner) RunPlan(ctx context.Context, p *Plan, wasm []byte, args []string, stdio Stdio) (int, error) {
	if err := p.prepare(); err != nil {
		return StatusRunnerFailed, err
	}
	lookup := stdio.LookupEnv
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	code, err := r.Run(ctx, wasm, Config{
		Args: append([]string{p.Argv0}, args...), Env: p.Env(lookup), Mounts: p.Preopens,
		Stdin: stdio.Stdin, Stdout: stdio.Stdout, Stderr: stdio.Stderr,
		MemoryMiB: p.MemoryMiB, Timeout: p.timeout,
	})
	status := ExitStatus(code, err)
	if err != nil && errs.TokenOf(err) == errs.Internal {
		err = errs.Wrap(err, errs.Internal, "%s: %v", p.Artifact, err)
	}
	return status, err
}

// Env is the guest's environment: the allowed names that are set on the host, plus PWD=/.
func (p *Plan) Env(lookup func(string) (string, bool)) []string {
	var env []string
	for _, n := range p.EnvNames {
		if v, ok := lookup(n); ok {
			env = append(env, n+"="+v)
		}
	}
	return append(env, "PWD=/")
}

// Explain writes the plan as text.
func (p *Plan) Explain(w io.Writer) {
	fmt.Fprintf(w, "artifact:  %s@%s (%s)\n", p.Artifact, p.Version, p.Platform)
	fmt.Fprintf(w, "digest:    %s\n", p.Digest)
	fmt.Fprintf(w, "workdir:   %s\n", p.Workdir)
	fmt.Fprintln(w, "preopens:")
	for _, o := range p.Preopens {
		mode := "read-write"
		if o.ReadOnly {
			mode = "read-only"
		}
		fmt.Fprintf(w, "  %-10s -> %s (%s)\n", o.GuestPath, o.HostPath, mode)
	}
	fmt.Fprintln(w, "state stores:")
	if len(p.States) == 0 {
		fmt.Fprintln(w, "  (none granted)")
	}
	for _, s := range p.States {
		fmt.Fprintf(w, "  %s: %s -> %s\n", s.Artifact, s.Store, s.HostPath)
	}
	if len(p.EnvNames) == 0 {
		fmt.Fprintln(w, "env:       PWD=/ only")
	} else {
		fmt.Fprintf(w, "env:       %s, PWD=/\n", strings.Join(p.EnvNames, ", "))
	}
	t := "none"
	if p.timeout > 0 {
		t = p.timeout.String()
	}
	fmt.Fprintf(w, "limits:    memory %d MiB, timeout %s\n", p.MemoryMiB, t)
}
