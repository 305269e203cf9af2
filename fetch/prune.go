package fetch

import (
	"errors"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/lock"
)

// The prune: the pins murmur.yaml no longer declares leave murmur.lock, with their provenance
// records and tools/ folders. A prune must never follow from a murmur.yaml an editor was halfway
// through saving (intent_read.go), so a pin leaves only when
//   - the command itself removed its entry (mur rm: Transition.Undeclare); or
//   - murmur.yaml, read under the file lock, was read clean (every key known), stable (nothing
//     changed while it was read) and settled (left alone for the settle window; a read that
//     is not waits for it, a few times), and it still declares every pin the command started
//     from (Transition.Started) that the prune would drop: a declaration that vanished while
//     the command ran may be a save in progress.
// Otherwise the prune declines: it drops nothing, the rest of the transition stands, and the
// command says so in one line and succeeds; the next command prunes once murmur.yaml is saved.

// intentRead is murmur.yaml as read under the lock's file lock.
type intentRead struct {
	capsule *manifest.Capsule // nil: no murmur.yaml, or one too torn to parse
	clean   bool              // no keys mur can't read
	// torn says why no prune may follow this read, "" when one may; wait is how long until
	// reading again may find the file settled.
	torn string
	wait time.Duration
}

func (r intentRead) declares(name string) bool {
	if r.capsule == nil {
		return false
	}
	a, _ := r.capsule.Find(name)
	return a != nil
}

// pruned is what a transition's prune did.
type pruned struct {
	removed  []string // pins dropped, in name order
	declined string   // why it dropped nothing; "" when it did not decline
	wait     bool     // declined on a torn read, which a later read may find settled
}

// rereadIntent reads murmur.yaml under the lock's file lock; no path, or no file, is a project
// without one. A torn read that does not parse is no error: only a prune asks more of it. ours
// is murmur.yaml as this transition wrote it (nil: not written), which is settled as long as
// nobody changed it since.
func rereadIntent(path string, ours fs.FileInfo) (intentRead, error) {
	if path == "" {
		return intentRead{clean: true}, nil
	}
	r, err := readStable(path)
	if errors.Is(err, fs.ErrNotExist) {
		return intentRead{clean: true}, nil
	}
	if err != nil {
		return intentRead{}, err
	}
	read := intentRead{wait: r.settledIn(time.Now())}
	if ours != nil && r.stable && sameFile(ours, r.info) {
		read.wait = 0
	}
	switch {
	case !r.stable:
		read.torn, read.wait = "it changed while mur read it", settle()
	case read.wait > 0:
		read.torn = "it was written moments ago, and may be mid-save"
	}
	c, err := manifest.Parse(r.data, path)
	if err != nil && read.torn == "" {
		return intentRead{}, err
	}
	if err == nil {
		read.capsule, read.clean = c, len(c.Warnings) == 0 && len(c.GrantWarnings) == 0
	}
	return read, nil
}

// settledNext reads murmur.yaml under the file lock and asks next what the files become. A prune
// declined on a torn read waits for murmur.yaml to settle and reads it again, up to settleRounds
// times: an editor's save takes moments, and a command run right after an edit should prune.
func settledNext(l *lock.Lock, path string, t Transition, ours fs.FileInfo) (*lock.Lock, []declared, pruned, error) {
	for round := 0; ; round++ {
		read, err := rereadIntent(path, ours)
		if err != nil {
			return nil, nil, pruned{}, err
		}
		nl, decl, pr, err := next(l, read, t)
		if err != nil || !pr.wait || round == settleRounds {
			return nl, decl, pr, err
		}
		time.Sleep(read.wait)
	}
}

// prune drops from l the pins murmur.yaml (read) does not declare, unless the read can't be
// trusted to say so (see above). declaredNow are the pins this transition declares.
func prune(l *lock.Lock, read intentRead, t Transition, declaredNow map[string]bool) (pruned, error) {
	var pr pruned
	if !t.Prune || read.capsule == nil && read.torn == "" {
		return pr, nil
	}
	if read.torn == "" && !read.clean {
		return pr, errs.New(errs.InvalidManifest, "%s has keys mur can't read, so it may not say what it meant to declare; nothing was pruned and murmur.lock was not changed. Fix the keys it names, then run the command again", read.capsule.Path)
	}
	own := map[string]bool{}
	for _, n := range t.Undeclare {
		own[n.String()] = true
	}
	var others []string
	for _, e := range append([]lock.Entry(nil), l.Artifacts...) {
		switch {
		case read.declares(e.Name) || declaredNow[e.Name]:
		case own[e.Name]:
			l.Remove(e.Name) // the command removed its entry: no torn read can make that a save
			pr.removed = append(pr.removed, e.Name)
		default:
			others = append(others, e.Name)
		}
	}
	if len(others) == 0 {
		sort.Strings(pr.removed)
		return pr, nil
	}
	if why := declines(read, t, others); why != "" {
		pr.declined, pr.wait = why, read.torn != ""
		sort.Strings(pr.removed)
		return pr, nil
	}
	for _, name := range others {
		l.Remove(name)
		pr.removed = append(pr.removed, name)
	}
	sort.Strings(pr.removed)
	return pr, nil
}

// declines says, in one line, why the prune of others must not follow read; "" when it may.
func declines(read intentRead, t Transition, others []string) string {
	kept := "the pins it no longer declares were kept: " + strings.Join(others, ", ") + "; run the command again once it is saved to drop them"
	if read.torn != "" {
		if read.capsule == nil {
			kept = "every pin was kept; run the command again once it is saved to drop the ones it no longer declares" // a read that did not parse tells nothing
		}
		return "murmur.yaml was being written as mur read it (" + read.torn + "), so " + kept
	}
	var vanished []string
	for _, name := range others {
		if t.Started != nil {
			if a, _ := t.Started.Find(name); a != nil {
				vanished = append(vanished, name)
			}
		}
	}
	if len(vanished) == 0 {
		return ""
	}
	return "murmur.yaml no longer declares " + strings.Join(vanished, ", ") + ", as it did when this command started, and may be mid-save, so " + kept
}
