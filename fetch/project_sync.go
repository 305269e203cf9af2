package fetch

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/suggest"
	"github.com/murmur-nexus/mur/lock"
)

// murmur.yaml is the intent and murmur.lock follows it (SPEC section 6):
//   - a pin stays while it satisfies its entry: the exact version, or any version for latest
//     (held until --update or mur lock --bump);
//   - an entry whose version changed is re-resolved by the next pull, which reports the move;
//   - a pin no entry declares is dropped by the next pull, with its tools/ folder;
//   - a pull of an artifact murmur.yaml does not declare declares it (as `mur add` does), with
//     the exact version it resolved to, and says so;
//   - --update of an entry with an exact version moves murmur.yaml's version along with the pin;
//   - --locked changes neither file, and fails with lock-mismatch: when they disagree.

// Intent is a project's murmur.yaml, as read.
type Intent struct {
	Path    string // murmur.yaml
	Capsule *manifest.Capsule
}

// Wants is what the capsule declares, for lock.Check.
func (in Intent) Wants() []lock.Want {
	var out []lock.Want
	for _, a := range in.Capsule.Artifacts {
		out = append(out, lock.Want{Name: a.Name.String(), Version: a.Version})
	}
	return out
}

// SyncOptions say how a pull inside a project may change murmur.yaml and murmur.lock.
type SyncOptions struct {
	// Args is true when the requests name artifacts (mur pull REF, mur add), false when they are
	// every declared artifact (mur pull).
	Args bool
	// Add declares what the requests name (mur add): an entry murmur.yaml has moves to the
	// version asked for, as with --update.
	Add bool
	// Locked refuses any difference between the two files and writes neither.
	Locked bool
}

// Move is a pin that moved because murmur.yaml asked for another version.
type Move struct {
	Name string `json:"name"`
	From string `json:"from"`
	To   string `json:"to"`
}

// SyncReport is what a pull inside a project did besides pulling.
type SyncReport struct {
	Results []pull.Result `json:"results"`
	// Moved are pins that moved to the version murmur.yaml asks for.
	Moved []Move `json:"moved"`
	// Declared are the entries the pull wrote into murmur.yaml (name@version), new or moved.
	Declared []string `json:"declared"`
	// Removed are the pins dropped because no entry declares them any more.
	Removed []string `json:"removed"`
}

// PullProject pulls reqs inside a project, keeping murmur.yaml and murmur.lock in agreement.
func (p *Puller) PullProject(ctx context.Context, proj pull.Project, in Intent, reqs []pull.Request, opt SyncOptions) (*SyncReport, error) {
	rep := &SyncReport{}
	if !opt.Locked {
		if err := in.Strict(); err != nil {
			return rep, err
		}
	}
	l, err := lock.Read(proj.LockPath())
	if err != nil {
		return rep, err
	}
	wants := in.Wants()
	if opt.Locked {
		if err := lockedCheck(l, wants, reqs, in, p.pl.TargetPlatform()); err != nil {
			return rep, err
		}
	}
	var declareAt []int             // requests whose result murmur.yaml must name
	addMoved := map[string]string{} // mur add of another version: name → murmur.yaml's version
	for i := range reqs {
		r := &reqs[i]
		a, _ := in.Capsule.Find(r.Name.String())
		if opt.Add && a != nil && r.Version != a.Version {
			r.Update = true
			addMoved[r.Name.String()] = a.Version
		}
		if e := l.Find(r.Name.String()); a == nil && e != nil && r.Version != ref.Latest && r.Version != e.ResolvedVersion {
			r.Update = true // a pin no entry declares is stale: the next pull would drop it anyway
		}
		switch {
		case a == nil || opt.Add && r.Version != a.Version:
			declareAt = append(declareAt, i)
		case opt.Args && a.Version != ref.Latest && r.Version != a.Version && !r.Update:
			if r.Version != ref.Latest {
				return rep, errs.New(errs.Usage, "%s declares %s at %s, and %s was asked for; to move both murmur.yaml and murmur.lock run 'mur pull --update %s@%s', or edit murmur.yaml and run 'mur pull'",
					in.Path, r.Name, a.Version, r.Version, r.Name, r.Version)
			}
			r.Version = a.Version // `mur pull acme/grep` pulls what murmur.yaml asks for
		case r.Update && a.Version != ref.Latest:
			declareAt = append(declareAt, i)
		}
		if a != nil && !r.Update && r.Version == a.Version && a.Version != ref.Latest {
			if e := l.Find(r.Name.String()); e != nil && e.ResolvedVersion != a.Version {
				// murmur.yaml changed: the user's edit is the intent, so the pin moves.
				r.Update = true
				rep.Moved = append(rep.Moved, Move{Name: r.Name.String(), From: e.ResolvedVersion, To: a.Version})
			}
		}
	}
	declare := map[string]bool{}
	for _, i := range declareAt {
		declare[reqs[i].Name.String()] = true
	}
	results, err := p.pull(ctx, proj, reqs, in.Path, declare)
	rep.Results = results
	for i, r := range results {
		if from, ok := addMoved[reqs[i].Name.String()]; ok && r.Error == "" && r.Version != from {
			rep.Moved = append(rep.Moved, Move{Name: r.Name, From: from, To: r.Version})
		}
	}
	for i, m := range rep.Moved {
		for _, r := range results {
			if r.Name == m.Name && r.Error != "" {
				rep.Moved[i].To = "" // not moved after all
			}
		}
	}
	rep.Moved = compactMoves(rep.Moved)
	if opt.Locked || ctx.Err() != nil {
		// An interrupted pull winds down at once: what it pinned stays, and the next pull
		// declares and prunes.
		return rep, err
	}
	// What the pull pinned was declared with its pin; this last transition declares the pins a
	// warm pull found in place, and prunes what murmur.yaml, read under the lock, no longer
	// declares.
	done := map[string]bool{}
	for _, i := range declareAt {
		if results[i].Error == "" && results[i].Version != "" {
			done[reqs[i].Name.String()] = true
		}
	}
	// After a failure nothing is pruned: the next pull, which succeeds, does it.
	tr, terr := writeLock(ctx, proj, in.Path, Transition{Declare: done, Prune: err == nil, Started: in.Capsule})
	p.wrote(tr)
	if tr.Declined != "" {
		p.pl.Warnf("%s", tr.Declined)
	}
	rep.Removed = tr.Removed
	if rep.Removed == nil {
		rep.Removed = []string{}
	}
	for _, i := range declareAt {
		if done[reqs[i].Name.String()] {
			rep.Declared = append(rep.Declared, reqs[i].Name.String()+"@"+results[i].Version)
		}
	}
	if terr != nil {
		return rep, errors.Join(err, terr)
	}
	return rep, err
}

func compactMoves(ms []Move) []Move {
	out := []Move{}
	for _, m := range ms {
		if m.To != "" {
			out = append(out, m)
		}
	}
	return out
}

// lockedCheck refuses, before anything is fetched, a locked pull that would have to change
// murmur.yaml or murmur.lock.
func lockedCheck(l *lock.Lock, wants []lock.Want, reqs []pull.Request, in Intent, platform string) error {
	for _, r := range reqs {
		if r.Update {
			return errs.New(errs.Usage, "--locked and --update contradict each other: --update moves pins, --locked refuses to; drop one")
		}
		if a, _ := in.Capsule.Find(r.Name.String()); a == nil {
			return errs.New(errs.LockMismatch, "%s is not declared in %s, and --locked does not edit murmur.yaml\nrun 'mur add %s' without --locked, then commit murmur.yaml and murmur.lock", r.Name, in.Path, r.Name)
		}
	}
	return lock.MismatchError(l.Check(wants, platform))
}

type declared struct {
	name    ref.Name
	version string
}

// Undeclare removes names from murmur.yaml (mur rm), then drops their pins and tools/ folders,
// and those of entries removed before. A name murmur.yaml does not declare is refused before
// anything changes. warn hears why a prune of the others declined (prune.go).
func Undeclare(ctx context.Context, proj pull.Project, in Intent, names []ref.Name, warn func(string)) ([]string, error) {
	keep := map[string]bool{}
	for _, w := range in.Wants() {
		keep[w.Name] = true
	}
	for _, n := range names {
		if !keep[n.String()] {
			var have []string
			for _, w := range in.Wants() {
				have = append(have, w.Name)
			}
			hint := "it declares nothing"
			if len(have) > 0 {
				hint = "it declares " + strings.Join(have, ", ")
			}
			if near, ok := nearestDeclared(n.String(), have); ok {
				hint += "; did you mean " + near + "?"
			}
			return nil, errs.New(errs.NotFound, "%s does not declare %s (%s); nothing was changed", in.Path, n, hint)
		}
		delete(keep, n.String())
	}
	if err := in.Strict(); err != nil {
		return nil, err
	}
	tr, err := writeLock(ctx, proj, in.Path, Transition{Undeclare: names, Prune: true, Started: in.Capsule})
	if tr.Declined != "" && warn != nil {
		warn(tr.Declined)
	}
	if tr.Removed == nil {
		tr.Removed = []string{}
	}
	return tr.Removed, err
}

// unstage removes tools/<scope>/<name>/ and its staging lock, and the scope's folder once it is
// empty. A symlink on the way is refused, as staging refuses it.
func unstage(proj pull.Project, name ref.Name) error {
	if err := stage.CheckDirs(proj.Tools(), name); err != nil {
		return err
	}
	return stage.Unstage(proj.Tools(), name)
}

// String is the line `mur pull` prints for a move.
func (m Move) String() string { return fmt.Sprintf("%s: %s → %s", m.Name, m.From, m.To) }

// DeclaredName is the artifact arg names among murmur.yaml's declarations: scope/name as written,
// or a bare name that exactly one declared artifact has (mur rm grep).
func (in Intent) DeclaredName(arg string) (ref.Name, error) {
	if strings.Contains(arg, "/") {
		return ref.ParseName(arg)
	}
	var have, match []string
	for _, w := range in.Wants() {
		have = append(have, w.Name)
		if _, name, _ := strings.Cut(w.Name, "/"); name == arg {
			match = append(match, w.Name)
		}
	}
	switch len(match) {
	case 1:
		return ref.ParseName(match[0])
	case 0:
		hint := "it declares nothing"
		if len(have) > 0 {
			hint = "it declares " + strings.Join(have, ", ")
		}
		if near, ok := nearestDeclared(arg, have); ok {
			hint += "; did you mean " + near + "?"
		}
		return ref.Name{}, errs.New(errs.NotFound, "%s declares no artifact named %s (%s); nothing was changed", in.Path, arg, hint)
	}
	return ref.Name{}, errs.New(errs.Usage, "%s declares %s; name the one to remove with its scope", in.Path, strings.Join(match, " and "))
}

// nearestDeclared is the declared artifact a mistyped name most likely meant: the nearest bare
// name, in the same scope when one was typed, so that acme/gerp finds acme/grep but acme/other
// does not find acme/notes.
func nearestDeclared(typed string, declared []string) (string, bool) {
	scope, name, scoped := strings.Cut(typed, "/")
	if !scoped {
		name, scope = typed, ""
	}
	var names []string
	full := map[string]string{}
	for _, d := range declared {
		s, n, _ := strings.Cut(d, "/")
		if scope != "" && s != scope {
			continue
		}
		names = append(names, n)
		full[n] = d
	}
	near, ok := suggest.Nearest(name, names)
	return full[near], ok
}
