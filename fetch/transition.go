package fetch

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// The one transition of murmur.lock. Every command that changes the lock (pull, add, rm, lock,
// lock --bump, pull --update, warm, verify --repair) describes what it resolved as a Transition
// and hands it to writeLock, which takes the project's file lock, reads the lock, re-reads
// murmur.yaml under that same lock, and asks next what the two files become. next alone decides
// what is kept, moved, added and pruned, and it holds the lock's promises:
//   - a pin murmur.yaml declares is never dropped;
//   - nothing is pruned from a murmur.yaml that did not parse cleanly;
//   - nothing is pruned after a read of murmur.yaml that may be torn (prune.go): one that
//     changed under it or was saved moments ago, or one that no longer declares what the
//     command started from. A pin leaves only when its entry was removed by the command (mur
//     rm) or is missing from a murmur.yaml read clean and settled; a declined prune keeps
//     every pin and says so;
//   - a pin that recorded provenance moves only to a version whose provenance verified (the
//     new pin records it), or when the command names it in Forget; an unmoved pin keeps its
//     record;
//   - a pin and the murmur.yaml entry a command declares for it are written under one file
//     lock, murmur.yaml first, so a concurrent prune never sees the one without the other.
// The Go command keeps go.sum's upkeep in modload, above the downloader; the pipeline
// (fetch/pull) learns of the lock only through the writer it is handed (lockWriter).

// Transition is what one command asks of murmur.lock.
type Transition struct {
	// Pin applies what the command resolved to the lock as read under its file lock: the
	// pipeline's group commit, or mur lock's pins. nil pins nothing.
	Pin func(*lock.Lock) error
	// Declare names the artifacts this command declares in murmur.yaml, at the version Pin left
	// them at: mur add, a pull of a REF murmur.yaml lacks, --update of an exact entry.
	Declare map[string]bool
	// Prune drops the pins that murmur.yaml, as re-read under the file lock, does not declare.
	Prune bool
	// Forget names pins whose recorded provenance the user chose to drop with their move.
	Forget map[string]bool
	// Undeclare removes these artifacts from murmur.yaml first (mur rm); with Prune, their pins
	// go with them.
	Undeclare []ref.Name
	// Started is murmur.yaml as the command read it when it started (nil: not read). A prune
	// that would drop a pin it declares is declined (prune.go).
	Started *manifest.Capsule
}

// Transitioned is what a transition changed besides the pins it was handed.
type Transitioned struct {
	Removed []string // pins pruned, in name order
	Wrote   bool     // murmur.lock was written
	// Declined says, in one line, why a prune dropped nothing (prune.go); "" when it did not
	// decline.
	Declined string
}

// next is the rule: the lock to write, the entries to declare in murmur.yaml and what the prune
// did, given the lock and murmur.yaml as read under the file lock (read.capsule is nil for a
// project without murmur.yaml).
func next(old *lock.Lock, read intentRead, t Transition) (*lock.Lock, []declared, pruned, error) {
	l := old.Clone()
	intent := read.capsule
	if t.Pin != nil {
		if err := t.Pin(l); err != nil {
			return nil, nil, pruned{}, err
		}
	}
	declares := read.declares
	// Declarations follow the pins they were asked for.
	var decl []declared
	for name := range t.Declare {
		e := l.Find(name)
		if e == nil {
			continue
		}
		n, err := ref.ParseName(name)
		if err != nil {
			return nil, nil, pruned{}, err
		}
		if before := old.Find(name); t.Pin != nil && before != nil && sameBytes(before, e) {
			continue // not this pin's commit: the command's last transition declares it
		}
		if intent != nil {
			if a, _ := intent.Find(name); a != nil && a.Version == e.ResolvedVersion {
				continue
			}
		}
		decl = append(decl, declared{n, e.ResolvedVersion})
	}
	sort.Slice(decl, func(i, j int) bool { return decl[i].name.String() < decl[j].name.String() })
	declaredNow := map[string]bool{}
	for _, d := range decl {
		declaredNow[d.name.String()] = true
	}
	// A pin murmur.yaml declares is never dropped.
	for _, e := range old.Artifacts {
		if l.Find(e.Name) == nil && (declares(e.Name) || declaredNow[e.Name]) {
			return nil, nil, pruned{}, errs.New(errs.Internal, "refusing to drop the pin of %s, which murmur.yaml declares; murmur.lock was not changed. This is a bug in mur, please report it", e.Name)
		}
	}
	pr, err := prune(l, read, t, declaredNow)
	if err != nil {
		return nil, nil, pruned{}, err
	}
	// A pin that recorded provenance keeps it, or moves only with what the new version proved.
	for _, was := range old.Artifacts {
		if was.Provenance == nil {
			continue
		}
		e := l.Find(was.Name)
		switch {
		case e == nil, e.Provenance != nil:
		case sameBytes(&was, e):
			rec := *was.Provenance
			e.Provenance = &rec
		case !t.Forget[was.Name]:
			return nil, nil, pruned{}, errs.New(errs.ProvenanceMissing, "%s: murmur.lock recorded a verified bundle for %s (%s, %s), and %s has none that verified; a pin that recorded provenance moves only to a version whose provenance verifies, so murmur.lock was not changed. Ask the publisher to sign %s, or keep %s",
				was.Name, was.ResolvedVersion, was.Provenance.Kind, was.Provenance.Signer, e.ResolvedVersion, e.ResolvedVersion, was.ResolvedVersion)
		}
	}
	return l, decl, pr, nil
}

// sameBytes reports whether two entries pin the same version to the same hashes.
func sameBytes(a, b *lock.Entry) bool {
	if a.ResolvedVersion != b.ResolvedVersion || a.SHA256.Any != b.SHA256.Any || len(a.SHA256.Platforms) != len(b.SHA256.Platforms) {
		return false
	}
	for p, h := range a.SHA256.Platforms {
		if b.SHA256.Platforms[p] != h {
			return false
		}
	}
	return true
}

// writeLock applies t to the project's murmur.lock and murmur.yaml under the lock's file lock:
// the one writer of murmur.lock. murmur.yaml is re-read there, strictly, so that what it declares
// is what another command may have just written; its declarations are written before the lock.
func writeLock(ctx context.Context, proj Project, manifestPath string, t Transition) (Transitioned, error) {
	var out Transitioned
	wrote, err := lock.UpdateFile(ctx, proj.LockPath(), func(l *lock.Lock) error {
		ours, err := undeclareIn(manifestPath, t.Undeclare)
		if err != nil {
			return err
		}
		nl, decl, pr, err := settledNext(l, manifestPath, t, ours)
		if err != nil {
			return err
		}
		if len(decl) > 0 {
			if err := declareIn(manifestPath, decl); err != nil {
				return err
			}
		}
		*l = *nl
		out.Removed, out.Declined = pr.removed, pr.declined
		return nil
	})
	out.Wrote = wrote
	if err != nil {
		return out, err
	}
	for _, name := range out.Removed {
		if n, err := ref.ParseName(name); err == nil {
			if err := unstage(proj, n); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// undeclareIn removes names from murmur.yaml (mur rm), and returns its stat as written; nil when
// there are none.
func undeclareIn(path string, names []ref.Name) (fs.FileInfo, error) {
	if len(names) == 0 {
		return nil, nil
	}
	return editIn(path, func(data []byte) ([]byte, error) {
		var err error
		for _, n := range names {
			if data, err = manifest.RemoveArtifact(data, path, n); err != nil {
				return nil, err
			}
		}
		return data, nil
	})
}

// declareIn writes each artifact's version into murmur.yaml, editing its text in place.
func declareIn(path string, ds []declared) error {
	_, err := editIn(path, func(data []byte) ([]byte, error) {
		var err error
		for _, d := range ds {
			if data, err = manifest.SetArtifact(data, path, d.name, d.version); err != nil {
				return nil, err
			}
		}
		return data, nil
	})
	return err
}

// editIn changes murmur.yaml atomically, keeping its permissions, and returns its stat as
// written. The caller holds the lock's file lock, so that two mur processes editing one project
// lose nothing.
func editIn(path string, edit func([]byte) ([]byte, error)) (fs.FileInfo, error) {
	r, err := readStable(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Wrap(err, errs.NotFound, "%s is gone; murmur.lock was not changed", path)
	}
	if err != nil {
		return nil, err
	}
	if !r.stable {
		// Editing a half-saved file would write the half back over what the editor saves.
		return nil, unstable(path)
	}
	data, err := edit(r.data)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(path, data, r.info.Mode().Perm()); err != nil {
		return nil, errs.Wrap(err, errs.IO, "can't write %s: %v; check that its folder is writable", path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, statError(path, err)
	}
	return fi, nil
}

// Strict refuses a murmur.yaml with keys mur can't read, for a command that writes murmur.lock or
// tools/: a mistyped key (artifact: for artifacts:, verison: for version:) would otherwise make
// it prune every pin, or pin latest.
func (in Intent) Strict() error {
	if in.Capsule == nil {
		return nil
	}
	w := append(append([]string(nil), in.Capsule.Warnings...), in.Capsule.GrantWarnings...)
	if len(w) == 0 {
		return nil
	}
	for i := range w {
		w[i] = strings.Replace(w[i], " ignored", "", 1)
	}
	return errs.New(errs.InvalidManifest, "%s; mur changed nothing, since a key it can't read may be a mistyped declaration: fix it, then run the command again", strings.Join(w, "; "))
}

// lockWriter is how the pipeline changes murmur.lock for p's command: through writeLock, which
// declares what declare names; under --locked, nothing (the pipeline then only checks).
func (p *Puller) lockWriter(manifestPath string, declare map[string]bool) pull.LockWriter {
	if p.locked {
		return nil // the pipeline checks, and writes nothing
	}
	return func(ctx context.Context, proj Project, fn func(*lock.Lock) error) error {
		tr, err := writeLock(ctx, proj, manifestPath, Transition{Pin: fn, Declare: declare})
		p.wrote(tr)
		return err
	}
}

// wrote counts a write of murmur.lock, for the tests that hold a pull to a few.
func (p *Puller) wrote(tr Transitioned) {
	if tr.Wrote && p.lockWrites != nil {
		p.lockWrites.Add(1)
	}
}
