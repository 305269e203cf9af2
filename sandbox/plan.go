// A Plan is a capsule's grants turned into exactly what `mur run` opens: the guest's one root and
// what is routed inside it, the state store, the environment and the limits. BuildPlan creates
// nothing, so that `mur run --explain-scope` prints what a launch would open; RunPlan opens the
// folders once, checks what it opened, and runs the guest on those very folders.

package sandbox

import (
	"context"
	"errors"
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

// DefaultMemoryMiB caps guest memory when the capsule sets no limit: murmur.yaml's default.
const DefaultMemoryMiB = manifest.DefaultMemoryMiB

// DefaultStateMiB is the state store's quota when the capsule sets none: murmur.yaml's default.
const DefaultStateMiB = manifest.DefaultStateMiB

// Plan is everything a launch opens.
type Plan struct {
	Artifact string `json:"artifact"`
	Version  string `json:"version"`
	Platform string `json:"platform"`
	Digest   string `json:"digest"`
	Workdir  string `json:"workdir"`
	// Preopens is the guest's one preopen, "/": the workdir scope.
	Preopens []Mount `json:"preopens"`
	// Subtrees are the folders routed inside "/": the state store at /state, then the read-only
	// subtrees. Host paths here and above are real (resolved) paths; a part that does not exist
	// yet is shown as it will be created.
	Subtrees  []Mount        `json:"subtrees"`
	States    []state.Report `json:"state_stores"`
	EnvNames  []string       `json:"env"`
	MemoryMiB int            `json:"memory_mib"`
	// StateMiB is the state store's quota, enforced as the guest writes; 0 when no store is
	// granted.
	StateMiB int     `json:"state_mib"`
	TimeoutS float64 `json:"timeout_s"`
	Argv0    string  `json:"argv0"`

	timeout time.Duration
	layout  layout
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

// BuildPlan resolves the plan and checks it as a launch would, creating nothing: it opens the
// folders that exist to find out where they really are, and closes them again. RunPlan opens
// them once more and checks them again, on what it then holds.
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
	p := &Plan{Artifact: name.String(), Version: e.ResolvedVersion, Platform: pinnedPlatform, Digest: "sha256:" + hex, Argv0: name.Name}

	// A relative project folder would be compared lexically against an absolute root, and the
	// reach check would then never match.
	projectDir, err := filepath.Abs(in.ProjectDir)
	if err != nil {
		return nil, errs.Wrap(err, errs.Usage, "project folder %q: %v", in.ProjectDir, err)
	}
	l := layout{project: projectDir, home: in.Home, stateDir: in.StateDir, workdir: in.Workdir, defaultWorkdir: in.Workdir == ""}
	if l.defaultWorkdir {
		l.workdir = filepath.Join(projectDir, "workdir")
	}
	if l.workdir, err = filepath.Abs(l.workdir); err != nil {
		return nil, errs.Wrap(err, errs.Usage, "workdir %q: %v", in.Workdir, err)
	}
	l.scope = caps.Filesystem.Scope
	if l.scope == "" {
		l.scope = "."
	}
	l.readOnly = append([]string(nil), caps.Filesystem.ReadOnly...)
	sort.Strings(l.readOnly)
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
		l.store = store
	}
	p.layout = l

	o, err := l.resolve(false)
	if err != nil {
		return nil, err
	}
	o.close()
	p.Workdir = o.workdir
	p.Preopens = []Mount{{GuestPath: "/", HostPath: o.root, ReadOnly: o.rootReadOnly}}
	p.Subtrees = []Mount{}
	if o.store != "" {
		p.Subtrees = append(p.Subtrees, Mount{GuestPath: "/" + state.GuestDir, HostPath: o.store})
		for i := range p.States {
			p.States[i].HostPath = o.store
		}
	}
	if !o.rootReadOnly {
		p.Subtrees = append(p.Subtrees, o.subtrees...)
	}

	p.EnvNames = append([]string(nil), caps.Env.Allow...)
	sort.Strings(p.EnvNames)
	p.MemoryMiB = caps.Limits.MemoryMiB
	if p.MemoryMiB <= 0 {
		p.MemoryMiB = DefaultMemoryMiB
	}
	if len(p.States) > 0 {
		p.StateMiB = caps.Limits.StateMiB
		if p.StateMiB <= 0 {
			p.StateMiB = DefaultStateMiB
		}
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

// layout is what a plan mounts, as the capsule and the command line name it.
type layout struct {
	project        string // absolute
	home           string
	workdir        string // absolute: --workdir, or workdir/ in the project
	defaultWorkdir bool
	scope          string   // slash path below the workdir; "." is the workdir itself
	readOnly       []string // slash paths below the workdir, sorted
	stateDir       string
	store          string // "" when no state store is granted
}

// opened is a layout resolved: where each folder really is and, when resolve created them, the
// folders themselves, held open.
type opened struct {
	workdir, root string // real paths; a part that does not exist yet is appended as named
	rootReadOnly  bool
	subtrees      []Mount // read-only subtrees inside the root
	store         string  // the state store's real path; "" when none is granted

	rootDir  *os.File
	roDirs   []*os.File // every read-only folder that exists, for newTree to judge by identity
	storeDir *os.File
}

func (o *opened) close() {
	for _, f := range append([]*os.File{o.rootDir, o.storeDir}, o.roDirs...) {
		if f != nil {
			f.Close()
		}
	}
	o.rootDir, o.storeDir, o.roDirs = nil, nil, nil
}

// projectFolders are the folders mur keeps in a project; none may be a symlink.
var projectFolders = []string{"tools", ".murmur"}

// refuseSymlink refuses project/name when it is a symlink, naming its target.
func refuseSymlink(project, name string) error {
	p := filepath.Join(project, name)
	target, err := os.Readlink(p)
	if err != nil {
		return nil // not a symlink, or not there
	}
	return errs.New(errs.Denied, "%s is a symlink to %s, and mur never follows the project's own folders (tools/, .murmur/, workdir/) through a symlink, which a cloned repository could point anywhere; it ran nothing. Replace %s with a real folder (removing the symlink leaves its target untouched)", p, target, name)
}

// checkReach refuses a root from which the guest could reach the project's own files or the
// Murmur home, or that lies inside them. root and projectDir are real paths.
func checkReach(root, projectDir, home string) error {
	protected := []string{
		filepath.Join(projectDir, "murmur.yaml"),
		filepath.Join(projectDir, lock.FileName),
		filepath.Join(projectDir, ".murmur"),
		filepath.Join(projectDir, "tools"),
		home,
	}
	for _, p := range protected {
		rp := realPath(p)
		if atomicfile.Within(rp, root) || atomicfile.Within(root, rp) {
			return errs.New(errs.Denied, "the guest's root %s would put %s within its reach; choose a workdir outside the project's own files and the Murmur home (the default is workdir/ beside murmur.yaml)", root, p)
		}
	}
	return nil
}

// realPath resolves symlinks in the longest existing prefix of p, so that a path reached
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

// Writable lists the host folders the guest can write, which no cache may live in.
func (p *Plan) Writable() []string {
	var out []string
	for _, m := range append(append([]Mount(nil), p.Preopens...), p.Subtrees...) {
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

// RunPlan opens the plan's folders (creating the missing ones and the state store), checks what
// it opened, then runs wasm (the plan's payload, from LoadPayload) with args after argv[0] and
// those very folders mounted. It returns the exit status of `mur run`: the guest's own code, or
// one of the Status values with an error that names the artifact.
func (r *Runner) RunPlan(ctx context.Context, p *Plan, wasm []byte, args []string, stdio Stdio) (int, error) {
	if p.layout.store != "" {
		// Held for the whole run, so that 'mur state rm' can't remove the store under it.
		release, err := state.Hold(ctx, p.layout.stateDir, p.layout.store)
		if err != nil {
			return StatusRunnerFailed, err
		}
		defer release()
	}
	root, err := p.open()
	if err != nil {
		return StatusRunnerFailed, err
	}
	defer root.Close()
	lookup := stdio.LookupEnv
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	code, err := r.run(ctx, wasm, Config{
		Args: append([]string{p.Argv0}, args...), Env: p.Env(lookup),
		Stdin: stdio.Stdin, Stdout: stdio.Stdout, Stderr: stdio.Stderr,
		MemoryMiB: p.MemoryMiB, Timeout: p.timeout,
	}, root)
	status := ExitStatus(code, err)
	if errors.Is(err, ErrInterrupted) {
		err = errs.Wrap(err, errs.Interrupted, "the run of %s was canceled", p.Artifact)
	}
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
	mode := func(m Mount) string {
		switch {
		case m.GuestPath == "/"+state.GuestDir:
			return "read-write, the state store"
		case m.ReadOnly:
			return "read-only"
		}
		return "read-write"
	}
	for _, o := range p.Preopens {
		fmt.Fprintf(w, "  %-10s -> %s (%s)\n", o.GuestPath, o.HostPath, mode(o))
	}
	if len(p.Subtrees) > 0 {
		fmt.Fprintln(w, "  routed inside /, by whole path components:")
	}
	for _, o := range p.Subtrees {
		fmt.Fprintf(w, "    %-8s -> %s (%s)\n", o.GuestPath, o.HostPath, mode(o))
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
	fmt.Fprintf(w, "limits:    memory %d MiB, timeout %s", p.MemoryMiB, t)
	if p.StateMiB > 0 {
		fmt.Fprintf(w, ", state %d MiB", p.StateMiB)
	}
	fmt.Fprintln(w)
}
