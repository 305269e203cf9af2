// Package verify is `mur verify`: it holds murmur.lock against the CAS, the staged tools/ and the
// compiled cache, re-checks the provenance bundles the lock records (provenance.go), and with a
// Repairer restores what it can. Like restic's checker it reads and reports; what murmur.yaml
// says of the lock reaches it from the caller, as Mismatches.
package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// Compiler is the part of the sandbox runner that verify needs.
type Compiler interface {
	// CheckCache lists the damaged entries of the compiled cache, removing them when repair.
	CheckCache(repair bool) ([]string, error)
	// Precompile compiles wasm into the cache. wasm is mapped from a file (stage.ReadBlob) and
	// unmapped once Precompile returns: it must not keep it.
	Precompile(ctx context.Context, wasm []byte) error
}

// Input is what one verification looks at.
type Input struct {
	Project   pull.Project
	Lock      *lock.Lock
	CAS       *cas.Store
	Platform  string                    // "" means the host's; "all" checks every pinned platform's blob
	SourceFor func(scope string) string // the configured source of a scope, for pin checks
	Runner    Compiler                  // nil skips the compiled cache
	Repair    Repairer                  // nil reports only
	// Verifier re-checks the provenance bundles the lock records, offline, under Policy's
	// trust and signer rules (nil Policy: the embedded roots).
	Verifier provenance.Verifier
	Policy   func(scope string) config.ProvenancePolicy
	// Mismatches are murmur.yaml's differences with the lock, found by the caller, which knows
	// murmur.yaml: problems of kind ProblemLockMismatch.
	Mismatches []Problem
}

// Repairer brings back what a verification found missing or damaged: the pull pipeline, as the
// project verbs hand it down, set to the platform being verified.
type Repairer interface {
	Pull(ctx context.Context, proj pull.Project, reqs []pull.Request) ([]pull.Result, error)
	// RepairHint says why a repair's pull failed and, when no store or source could serve it,
	// what to do about that.
	RepairHint(r pull.Result) string
}

// ProblemLockMismatch is the kind of a problem that murmur.lock does not follow murmur.yaml.
const ProblemLockMismatch = "lock-mismatch"

// Problem is one thing that is wrong.
type Problem struct {
	Kind     string `json:"kind"` // blob, tools, compiled, pin, provenance or lock-mismatch
	Subject  string `json:"subject"`
	Problem  string `json:"problem"`
	Repaired bool   `json:"repaired"`
}

// Report is the outcome of a verification.
type Report struct {
	Blobs    int `json:"blobs"`
	Tools    int `json:"tools"`
	Compiled int `json:"compiled"`
	// Bundles is how many provenance bundles murmur.lock records were checked again, whether
	// they verified (Provenance) or not (a problem of kind provenance).
	Bundles  int       `json:"bundles"`
	Problems []Problem `json:"problems"`
	// Provenance lists the pins whose recorded bundle verified again, with what it proves.
	Provenance []VerifiedProvenance `json:"provenance,omitempty"`
}

// Err is the error of a verification that found problems still standing, nil when there are
// none: after a repair it says that the lines above tell why, not to run the repair again.
func (r *Report) Err(repaired bool) error {
	n := r.Unrepaired()
	mismatches := 0
	for _, p := range r.Problems {
		if p.Kind == ProblemLockMismatch {
			mismatches++
		}
	}
	switch {
	case n == 0:
		return nil
	case mismatches == n:
		// Nothing a repair fetches fixes these: the lock must follow murmur.yaml first.
		return errs.New(errs.LockMismatch, "murmur.lock does not follow murmur.yaml (%d %s above); run 'mur lock', then commit murmur.lock", n, map[bool]string{true: "difference", false: "differences"}[n == 1])
	case repaired:
		return errs.New(errs.Integrity, "%d of %d problems could not be repaired; each line above says why", n, len(r.Problems))
	case n == 1:
		return errs.New(errs.Integrity, "1 problem found; run 'mur verify --repair' to fetch and restore what can be restored")
	}
	return errs.New(errs.Integrity, "%d problems found; run 'mur verify --repair' to fetch and restore what can be restored", n)
}

// Unrepaired counts the problems still standing.
func (r *Report) Unrepaired() int {
	n := 0
	for _, p := range r.Problems {
		if !p.Repaired {
			n++
		}
	}
	return n
}

// RepairedCount counts the problems that were fixed.
func (r *Report) RepairedCount() int { return len(r.Problems) - r.Unrepaired() }

type pinnedBlob struct {
	entry    *lock.Entry
	name     ref.Name
	platform string
	digest   digest.Digest
	refetch  bool // pinned for the platform the repairer pulls
}

// Run checks murmur.lock against the CAS, tools/ and the compiled cache, the provenance the
// lock records and, with an Intent, murmur.yaml. It returns an error only when it could not
// look; what it found is in the report.
func Run(ctx context.Context, in Input) (*Report, error) {
	rep := &Report{Problems: []Problem{}}
	rep.Problems = append(rep.Problems, in.Mismatches...)
	blobs, err := pinnedBlobs(in.Lock, in.Platform)
	if err != nil {
		return nil, err
	}
	rep.Blobs = len(blobs)

	// Re-hash every pinned blob and read its zip directory, one per core. When the pins checked
	// are this machine's, a blob that checks out has its tools/ checked by the same worker, while
	// the process is busy anyway, instead of in a second pass after the last blob.
	bad := make([]error, len(blobs))
	host := make([]hostCheck, len(blobs))
	parallel(len(blobs), func(i int) {
		var a *artifact.Archive
		if a, bad[i] = checkBlob(ctx, in.CAS, blobs[i].digest); bad[i] == nil {
			// The pull's own check of what a blob is taken for: a lock edited to call a blob
			// another version is refused here as by a pull.
			if err := pull.PackedAs(a, blobs[i].name, blobs[i].entry.ResolvedVersion); err != nil {
				bad[i] = mislabeled{err}
			}
		}
		if bad[i] == nil && in.Platform == "" {
			host[i] = hostCheck{done: true, present: true, component: a.Component,
				staged: stage.CheckStaged(in.Project.Tools(), blobs[i].name, blobs[i].digest)}
		}
	})
	var refetch []pull.Request
	var refetched []int // indexes into rep.Problems, parallel to refetch
	for i, b := range blobs {
		if bad[i] == nil {
			continue
		}
		msg := errs.Message(bad[i])
		canRefetch := b.refetch
		var ml mislabeled
		switch {
		case errors.As(bad[i], &ml):
			// No store can make these bytes another version: the lock is what is wrong.
			msg = pull.MislabeledPin(b.name, b.entry.ResolvedVersion, b.digest, ml.err)
			canRefetch = false
		case errors.Is(bad[i], errs.NotFound):
			msg = fmt.Sprintf("%s@%s (%s) is pinned but not in the CAS; run 'mur pull' or 'mur verify --repair'", b.name, b.entry.ResolvedVersion, b.digest)
		case errors.Is(bad[i], errs.InvalidArtifact):
			// The pinned bytes themselves are wrong: fetching them again gives the same.
			msg = fmt.Sprintf("%s@%s (%s) hashes right but is not a valid artifact: %s; no store can repair what the lock pins, so pin another build with 'mur pull --update %s@%s'",
				b.name, b.entry.ResolvedVersion, b.digest, errs.Message(bad[i]), b.name, b.entry.ResolvedVersion)
			canRefetch = false
		case !errors.Is(bad[i], errs.Integrity) && in.Repair != nil && b.refetch:
			// A blob that can't be read (a damaged sector, a mode changed by hand) is moved
			// aside, so that the repair fetches it again instead of finding it present.
			if _, qerr := in.CAS.Quarantine(b.digest); qerr != nil && !errors.Is(qerr, errs.NotFound) {
				msg += "; it could not be moved aside for the repair: " + errs.Message(qerr)
				canRefetch = false
			}
		}
		rep.Problems = append(rep.Problems, Problem{Kind: "blob", Subject: b.name.String() + " " + b.digest.String(), Problem: msg})
		if canRefetch {
			refetch = append(refetch, pull.Request{Asked: "verify --repair", Name: b.name, Version: b.entry.ResolvedVersion})
			refetched = append(refetched, len(rep.Problems)-1)
		}
	}
	if in.Repair != nil && len(refetch) > 0 {
		results, _ := in.Repair.Pull(ctx, in.Project, refetch)
		for j, r := range results {
			p := &rep.Problems[refetched[j]]
			d := digest.Digest(strings.TrimPrefix(p.Subject, r.Name+" "))
			if r.Error != "" {
				p.Problem += "; not repaired: " + in.Repair.RepairHint(r)
				continue
			}
			// Repaired only once the blob checks out again.
			if _, err := checkBlob(ctx, in.CAS, d); err != nil {
				p.Problem += "; the repair fetched it, but it still does not check out: " + errs.Message(err)
				continue
			}
			p.Repaired = true
		}
	}

	if in.Runner != nil {
		damaged, err := in.Runner.CheckCache(in.Repair != nil)
		if err != nil {
			rep.Problems = append(rep.Problems, Problem{Kind: "compiled", Subject: "compiled cache", Problem: errs.Message(err)})
		}
		// A removed entry is repaired only if a second look no longer finds it.
		var still []string
		if in.Repair != nil && len(damaged) > 0 {
			still, _ = in.Runner.CheckCache(false)
		}
		for _, d := range damaged {
			repaired := in.Repair != nil && !slices.ContainsFunc(still, func(s string) bool { return strings.HasPrefix(d, s) })
			rep.Problems = append(rep.Problems, Problem{Kind: "compiled", Subject: d,
				Problem: "damaged compiled entry; 'mur verify --repair' removes it and the next run compiles again", Repaired: repaired})
		}
	}

	// Staged tools and compiled forms hold what this machine runs, whatever platform's pins
	// were checked above (a repair for another platform may even have staged its build).
	hostBlobs := blobs
	if in.Platform != "" {
		if hostBlobs, err = pinnedBlobs(in.Lock, ""); err != nil {
			return nil, err
		}
		host = make([]hostCheck, len(hostBlobs))
	}
	// What the first pass did not check: another platform's pins, and blobs that failed (which a
	// repair may have fetched and staged again since).
	parallel(len(hostBlobs), func(i int) {
		if host[i].done {
			return
		}
		if host[i].present = in.CAS.Has(hostBlobs[i].digest); host[i].present {
			host[i].staged = stage.CheckStaged(in.Project.Tools(), hostBlobs[i].name, hostBlobs[i].digest)
		}
	})
	for i, b := range hostBlobs {
		if !host[i].present {
			continue
		}
		rep.Tools++
		if err := host[i].staged; err != nil {
			p := Problem{Kind: "tools", Subject: stage.StagedDir(in.Project.Tools(), b.name), Problem: errs.Message(err)}
			// Never through a symlink: removing it would remove whatever it points at.
			if in.Repair != nil && stage.CheckDirs(in.Project.Tools(), b.name) == nil {
				os.RemoveAll(stage.StagedDir(in.Project.Tools(), b.name))
				if _, err := stage.Stage(in.Project.Tools(), in.CAS, b.name, b.digest); err == nil {
					p.Repaired = stage.CheckStaged(in.Project.Tools(), b.name, b.digest) == nil
				}
			}
			rep.Problems = append(rep.Problems, p)
		}
		if in.Runner == nil {
			continue
		}
		if host[i].done && in.Repair == nil {
			// The first pass read the zip's directory already; verify reads no payload.
			if !host[i].component {
				rep.Compiled++
			}
			continue
		}
		a, wasm, release, err := stage.ReadBlob(ctx, in.CAS, b.digest, in.Repair != nil)
		if err == nil && !a.Component {
			rep.Compiled++
			if wasm != nil {
				// Compiling from a warm cache is a cheap load; from a cold one it restores the entry.
				in.Runner.Precompile(ctx, wasm)
			}
		}
		release()
	}
	verifyProvenance(ctx, in, rep)
	// Owner pins that can be checked without the network: the pin must still name the source
	// the configuration would ask.
	if in.SourceFor != nil {
		scopes := make([]string, 0, len(in.Lock.Scopes))
		for s := range in.Lock.Scopes {
			scopes = append(scopes, s)
		}
		sort.Strings(scopes)
		for _, s := range scopes {
			pin := in.Lock.Scopes[s]
			// The pull's own check: a verify that flagged what a pull accepts would be noise.
			if err := pin.CheckOwner(s, in.SourceFor(s), 0); err != nil {
				rep.Problems = append(rep.Problems, Problem{Kind: "pin", Subject: s, Problem: errs.Message(err)})
			}
		}
	}
	return rep, nil
}

// checkBlob re-hashes the blob d and reads its zip directory, in one pass over its bytes: a blob
// can hash to its name and still not be an artifact mur can install (a planted file, a damaged
// directory). Its entries are not decompressed: every path that admits a packed artifact into
// the CAS (pull, cache import, repair) checked their sizes and CRC-32 first, and equal SHA-256
// means equal bytes, so a second inflate would find nothing and costs a fifth of verify's CPU.
// A hash mismatch quarantines the blob and wins over anything else found in it.
func checkBlob(ctx context.Context, store *cas.Store, d digest.Digest) (*artifact.Archive, error) {
	var a *artifact.Archive
	err := store.VerifyRead(ctx, d, func(blob cas.ReaderAt, _ io.Reader) error {
		var err error
		a, err = artifact.Read(blob, blob.Size())
		return err
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// mislabeled is a pinned blob whose packed murmur.yaml is not the version the lock pins it as
// (pull.PackedAs).
type mislabeled struct{ err error }

func (m mislabeled) Error() string { return m.err.Error() }

// hostCheck is what verify found of a blob this machine runs: whether the CAS holds it, what
// CheckStaged said of its tools/, and whether its payload is a component (not compiled).
type hostCheck struct {
	done      bool // checked in the first pass
	present   bool
	staged    error
	component bool
}

func pinnedBlobs(l *lock.Lock, platform string) ([]pinnedBlob, error) {
	want := platform
	if want == "" {
		want = ref.HostPlatform()
	}
	var out []pinnedBlob
	for i := range l.Artifacts {
		e := &l.Artifacts[i]
		n, err := ref.ParseName(e.Name)
		if err != nil {
			return nil, err
		}
		add := func(plat, hex string, refetch bool) error {
			d, err := ref.DigestFromHex(hex)
			if err != nil {
				return err
			}
			out = append(out, pinnedBlob{entry: e, name: n, platform: plat, digest: d, refetch: refetch})
			return nil
		}
		if platform == "all" {
			// The repairer pulls for this machine's platform only.
			hostHex, _, hostOK := e.Digest(ref.HostPlatform())
			if e.SHA256.Any != "" {
				if err := add(ref.PlatformAny, e.SHA256.Any, hostOK && hostHex == e.SHA256.Any); err != nil {
					return nil, err
				}
			}
			plats := make([]string, 0, len(e.SHA256.Platforms))
			for p := range e.SHA256.Platforms {
				plats = append(plats, p)
			}
			sort.Strings(plats)
			for _, p := range plats {
				if err := add(p, e.SHA256.Platforms[p], p == ref.HostPlatform()); err != nil {
					return nil, err
				}
			}
			continue
		}
		// The repairer pulls for the platform asked, so every pin checked here is its to
		if hex, plat, ok := e.Digest(want); ok {
			if err := add(plat, hex, true); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// parallel calls fn for 0..n-1, one goroutine per core.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < min(n, runtime.NumCPU()); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
}
