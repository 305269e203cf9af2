// Package launch turns a capsule's grants into exactly what `mur run` opens: the preopens,
// the state stores, the environment and the limits. Build is pure, so that
// `mur run --explain-scope` prints what a launch would open without creating anything; Prepare
// creates the folders; Load reads the payload from the CAS and verifies it.
package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/home"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
	"github.com/murmur-nexus/mur/state"
)

// Defaults for limits the capsule leaves unset.
const (
	DefaultMemoryMiB = 512
)

// Preopen is one folder the guest sees.
type Preopen struct {
	Guest    string `json:"guest"`
	Host     string `json:"host"`
	ReadOnly bool   `json:"read_only"`
}

// Plan is everything a launch opens.
type Plan struct {
	Artifact  string         `json:"artifact"`
	Version   string         `json:"version"`
	Platform  string         `json:"platform"`
	Digest    string         `json:"digest"`
	Workdir   string         `json:"workdir"`
	Preopens  []Preopen      `json:"preopens"`
	States    []state.Report `json:"state_stores"`
	EnvNames  []string       `json:"env"`
	MemoryMiB int            `json:"memory_mib"`
	TimeoutS  float64        `json:"timeout_s"`
	Argv0     string         `json:"argv0"`

	timeout time.Duration
}

// Timeout is the wall-time limit; zero means none.
func (p *Plan) Timeout() time.Duration { return p.timeout }

// Input is what Build needs.
type Input struct {
	ProjectDir string
	Capsule    *manifest.Capsule // nil when the project has no murmur.yaml: no grants beyond the workdir
	Lock       *lock.Lock
	Home       home.Home
	Artifact   string        // as typed: scoped, or bare when unambiguous
	Workdir    string        // --workdir; "" means workdir/ beside murmur.yaml
	Timeout    time.Duration // --timeout; 0 means the capsule's limit
	Platform   string        // "" means the host's
}

// Build resolves the plan without touching the file system.
func Build(in Input) (*Plan, error) {
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
	p.Preopens = append(p.Preopens, Preopen{Guest: "/", Host: root})
	ro := append([]string(nil), caps.Filesystem.ReadOnly...)
	sort.Strings(ro)
	for _, sub := range ro {
		host := filepath.Join(wd, filepath.FromSlash(sub))
		if within(root, host) {
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
		p.Preopens = append(p.Preopens, Preopen{Guest: guest, Host: host, ReadOnly: true})
	}
	if caps.State != nil {
		store := caps.State.Store
		if store == "" && in.Capsule != nil {
			store = in.Capsule.StoreName()
		}
		reports, err := state.Reports(in.Home.State(), []state.Grant{{Artifact: name.String(), Store: store}})
		if err != nil {
			return nil, err
		}
		p.States = reports
		for _, r := range reports {
			p.Preopens = append(p.Preopens, Preopen{Guest: state.PreopenName, Host: r.HostPath})
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

func resolveArtifact(in Input) (ref.Name, manifest.Capabilities, error) {
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
func checkReach(root, projectDir string, h home.Home) error {
	protected := []string{
		filepath.Join(projectDir, "murmur.yaml"),
		filepath.Join(projectDir, lock.FileName),
		filepath.Join(projectDir, ".murmur"),
		filepath.Join(projectDir, "tools"),
		h.Root,
	}
	r := realPath(root)
	for _, p := range protected {
		rp := realPath(p)
		if within(rp, r) || within(r, rp) {
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

// within reports whether p is base or lies below it.
func within(p, base string) bool {
	rel, err := filepath.Rel(base, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// Prepare creates the workdir's mount roots and the state stores.
func (p *Plan) Prepare(h home.Home) error {
	for _, o := range p.Preopens {
		if o.Guest == state.PreopenName {
			continue
		}
		if err := os.MkdirAll(o.Host, 0o755); err != nil {
			return errs.Wrap(err, errs.IO, "can't create %s: %v", o.Host, err)
		}
	}
	for _, s := range p.States {
		if _, err := state.Ensure(h.State(), s.Store); err != nil {
			return err
		}
	}
	return nil
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

// Load reads the pinned payload from the CAS and verifies the whole blob before anything is
// compiled: never the copy staged in tools/. A damaged blob is quarantined by the CAS.
//
// payloadDir, when not "", keeps decompressed payloads by blob digest. A kept payload is used
// only when its size and CRC-32 match what the verified zip records for it; otherwise it is
// inflated again and kept anew. The folder is the compiled cache's, trusted as that is.
func Load(store *cas.Store, d digest.Digest, payloadDir string) ([]byte, *artifact.Archive, error) {
	// One read and one hash of the whole blob: the blob is small next to what it compiles to,
	// and a single read is several times faster here than streaming through a hashing reader.
	blob, err := mapFile(store.Path(d))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, errs.Wrap(err, errs.NotFound, "blob %s is not in the CAS; pull the artifact that holds it", d)
		}
		return nil, nil, errs.Wrap(err, errs.IO, "can't read blob %s: %v", d, err)
	}
	if got := digest.FromBytes(blob); got != d {
		// Let the CAS look again and quarantine what it finds damaged, with its own error.
		if err := store.Verify(context.Background(), d); err != nil {
			return nil, nil, err
		}
		return nil, nil, errs.New(errs.Integrity, "blob %s changed while it was read (read as %s); run again", d, got)
	}
	a, err := artifact.Read(bytes.NewReader(blob), int64(len(blob)))
	if err != nil {
		return nil, nil, err
	}
	store.Touch(d)
	kept := ""
	if payloadDir != "" && !a.Component {
		kept = filepath.Join(payloadDir, d.Encoded()+".wasm")
		if b, err := mapFile(kept); err == nil && int64(len(b)) == a.PayloadSize && crc32.ChecksumIEEE(b) == a.PayloadCRC32() {
			return b, a, nil
		}
	}
	wasm, err := a.ReadPayload()
	if err != nil {
		return nil, nil, err
	}
	if kept != "" && home.EnsurePrivateDir(payloadDir) == nil {
		// Best effort: a payload that can't be kept is inflated again next time.
		_ = atomicfile.WriteFile(kept, wasm, 0o600)
	}
	return wasm, a, nil
}

// PrunePayloads removes the kept payloads whose blob the CAS no longer holds, and returns
// their paths; with dryRun it only lists them.
func PrunePayloads(payloadDir string, has func(digest.Digest) bool, dryRun bool) ([]string, error) {
	ents, err := os.ReadDir(payloadDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, errs.Wrap(err, errs.IO, "can't list %s: %v", payloadDir, err)
	}
	var gone []string
	for _, e := range ents {
		hex, ok := strings.CutSuffix(e.Name(), ".wasm")
		d, err := ref.DigestFromHex(hex)
		if ok && err == nil && has(d) {
			continue
		}
		p := filepath.Join(payloadDir, e.Name())
		if !dryRun {
			if err := os.RemoveAll(p); err != nil {
				return gone, errs.Wrap(err, errs.IO, "can't remove %s: %v", p, err)
			}
		}
		gone = append(gone, p)
	}
	return gone, nil
}

// mapFile maps a file read-only, with its pages faulted in by one call: on a virtual machine
// copying megabytes into fresh heap memory costs a page fault per 4 KiB, which is most of a warm
// start's loading. The mapping lives as long as the process, which for `mur run` is one run.
func mapFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() == 0 {
		return []byte{}, nil
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_POPULATE)
	if err != nil {
		return os.ReadFile(path)
	}
	return b, nil
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
		fmt.Fprintf(w, "  %-10s -> %s (%s)\n", o.Guest, o.Host, mode)
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
