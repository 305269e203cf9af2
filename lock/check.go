package lock

import (
	"fmt"
	"sort"
	"strings"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// Want is what murmur.yaml asks for one artifact: an exact version, or ref.Latest.
type Want struct {
	Name    string // scope/name
	Version string
}

// Allows reports whether a pin at version satisfies w: an exact version only itself, latest any
// version (a latest entry is held at its pin until --update or --bump moves it).
func (w Want) Allows(version string) bool {
	return w.Version == ref.Latest || w.Version == version
}

// The three ways murmur.lock can disagree with murmur.yaml.
const (
	NotPinned    = "not-pinned"    // declared, but not pinned for the platform
	WrongVersion = "wrong-version" // pinned at a version the entry does not allow
	Undeclared   = "undeclared"    // pinned, but no entry declares it
)

// Mismatch is one difference between murmur.yaml and murmur.lock.
type Mismatch struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Requested string `json:"requested"` // murmur.yaml's version; empty for Undeclared
	Locked    string `json:"locked"`    // the pinned version; empty for NotPinned
	Platform  string `json:"platform"`
}

// String is the line a person reads: the name, then Detail.
func (m Mismatch) String() string { return m.Name + ": " + m.Detail() }

// Detail says what differs, without the name.
func (m Mismatch) Detail() string {
	switch m.Kind {
	case NotPinned:
		if m.Locked != "" {
			return fmt.Sprintf("murmur.yaml declares it (%s), but murmur.lock pins %s only for other platforms than %s", m.Requested, m.Locked, m.Platform)
		}
		return fmt.Sprintf("murmur.yaml declares it (%s), but murmur.lock does not pin it for %s", m.Requested, m.Platform)
	case WrongVersion:
		return fmt.Sprintf("murmur.yaml asks for %s, but murmur.lock pins %s", m.Requested, m.Locked)
	}
	return fmt.Sprintf("murmur.lock pins %s, but murmur.yaml no longer declares it", m.Locked)
}

// Check lists how l disagrees with wants for platform, in name order. A platform of "all" asks
// only that some platform is pinned.
func (l *Lock) Check(wants []Want, platform string) []Mismatch {
	var out []Mismatch
	declared := map[string]bool{}
	for _, w := range wants {
		declared[w.Name] = true
		e := l.Find(w.Name)
		switch {
		case e == nil:
			out = append(out, Mismatch{Kind: NotPinned, Name: w.Name, Requested: w.Version, Platform: platform})
		case !w.Allows(e.ResolvedVersion):
			out = append(out, Mismatch{Kind: WrongVersion, Name: w.Name, Requested: w.Version, Locked: e.ResolvedVersion})
		case !e.pinsFor(platform):
			out = append(out, Mismatch{Kind: NotPinned, Name: w.Name, Requested: w.Version, Locked: e.ResolvedVersion, Platform: platform})
		}
	}
	for _, e := range l.Artifacts {
		if !declared[e.Name] {
			out = append(out, Mismatch{Kind: Undeclared, Name: e.Name, Locked: e.ResolvedVersion})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (e *Entry) pinsFor(platform string) bool {
	if platform == "all" {
		return e.SHA256.Any != "" || len(e.SHA256.Platforms) > 0
	}
	_, _, ok := e.Digest(platform)
	return ok
}

// WouldChange is the lock-mismatch error of a --locked command that would change the lock at
// path.
func WouldChange(path string) error {
	return errs.New(errs.LockMismatch, "%s would change (a pin or an owner pin it lacks), and --locked writes nothing\nrun 'mur lock' to pin what murmur.yaml declares, then commit murmur.lock", path)
}

// MismatchError is the lock-mismatch error for ms, one line per difference, and the fix on the
// last line; nil when ms is empty.
func MismatchError(ms []Mismatch) error {
	if len(ms) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "murmur.lock does not follow murmur.yaml (%d %s):", len(ms), plural(len(ms), "difference", "differences"))
	for _, m := range ms {
		b.WriteString("\n  " + m.String())
	}
	b.WriteString("\nrun 'mur lock' to pin what murmur.yaml declares, then commit murmur.lock")
	return errs.New(errs.LockMismatch, "%s", b.String())
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Remove drops name's entry and reports whether there was one. Scope pins stay: an owner pin
// outlives the artifacts that recorded it.
func (l *Lock) Remove(name string) bool {
	i, ok := l.index(name)
	if !ok {
		return false
	}
	l.Artifacts = append(l.Artifacts[:i], l.Artifacts[i+1:]...)
	return true
}
