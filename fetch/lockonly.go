package fetch

import (
	"context"
	"slices"
	"strings"

	"github.com/murmur-nexus/mur/fetch/pull"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// `mur lock` pins from metadata alone: a store's manifest (its layer descriptor names the digest
// and size) or a source's index (its sha256). No payload is downloaded and no tools/ is staged;
// the next pull checks the bytes against the pin as every pull does. This is what an update bot
// runs after it edits murmur.yaml.

// LockOptions say what `mur lock` may move.
type LockOptions struct {
	// Args is true when the requests name artifacts; a whole lock (false) also drops the pins
	// no entry declares.
	Args bool
	// Bump moves latest entries to the newest version; without it they stay at their pin. With
	// named requests it moves exact entries too, in murmur.yaml as well as the lock.
	Bump bool
	// DryRun resolves and reports, and writes nothing.
	DryRun bool
}

// LockChange is what `mur lock` did, or would do, to one artifact.
type LockChange struct {
	Name     string `json:"name"`
	Action   string `json:"action"` // pinned, moved, kept or removed
	From     string `json:"from"`   // the version pinned before; "" when there was none
	To       string `json:"to"`     // the version pinned now; "" when removed
	Platform string `json:"platform"`
	Digest   string `json:"digest"`
	Origin   string `json:"origin"` // the store or source that answered; "" when nothing was asked
}

// The actions of a LockChange.
const (
	LockPinned  = "pinned"
	LockMoved   = "moved"
	LockKept    = "kept"
	LockRemoved = "removed"
)

// LockReport is what `mur lock` did.
type LockReport struct {
	Changes []LockChange `json:"changes"`
	DryRun  bool         `json:"dry_run"`
	// Declared are the exact entries --bump NAME moved in murmur.yaml too (name@version), as a
	// pull's SyncReport.Declared says them.
	Declared []string `json:"declared"`
	// Warnings are what the provenance checks said without failing (no-provenance).
	Warnings []string `json:"warnings"`
}

// Changed reports whether the lock was (or, with DryRun, would be) changed.
func (r *LockReport) Changed() bool {
	for _, c := range r.Changes {
		if c.Action != LockKept {
			return true
		}
	}
	return false
}

// LockProject resolves reqs (every declared artifact, or the ones named) from metadata and pins
// them in murmur.lock, following murmur.yaml as a pull does.
func (p *Puller) LockProject(ctx context.Context, proj pull.Project, in Intent, reqs []pull.Request, opt LockOptions) (*LockReport, error) {
	rep := &LockReport{Changes: []LockChange{}, Declared: []string{}, DryRun: opt.DryRun}
	if err := in.Strict(); err != nil {
		return rep, err
	}
	l, err := lock.Read(proj.LockPath())
	if err != nil {
		return rep, err
	}
	type pin struct {
		req    pull.Request
		desc   fstore.Descriptor
		newPin *lock.ScopePin
		prov   *lock.Provenance
		update bool
	}
	var pins []pin
	declare := map[string]bool{} // exact entries --bump NAME moves in murmur.yaml too
	for _, r := range reqs {
		a, _ := in.Capsule.Find(r.Name.String())
		if a == nil {
			return rep, errs.New(errs.Usage, "%s does not declare %s; 'mur lock' pins what murmur.yaml declares: run 'mur add %s' to declare it", in.Path, r.Name, r.Name)
		}
		e := l.Find(r.Name.String())
		target := a.Version
		if target == ref.Latest && e != nil && !opt.Bump {
			target = e.ResolvedVersion // latest is held at its pin until --bump
		}
		// --bump NAME moves a named exact entry to the newest release, in murmur.yaml and the
		// lock, as `mur pull --update NAME` does; a whole --bump moves latest entries only.
		bumpExact := opt.Bump && opt.Args && a.Version != ref.Latest
		if bumpExact {
			target = ref.Latest
		}
		if e != nil && e.ResolvedVersion == target {
			if hex, plat, ok := e.Digest(p.pl.TargetPlatform()); ok {
				rep.Changes = append(rep.Changes, LockChange{Name: e.Name, Action: LockKept, From: target, To: target, Platform: plat, Digest: "sha256:" + hex})
				continue
			}
		}
		var owner *lock.ScopePin
		if op, ok := l.Pin(r.Name.Scope); ok {
			owner = &op
		}
		// The new version's provenance is checked from metadata as a pull checks it: a pin
		// that recorded provenance moves only with a bundle that verified (transition.go).
		m, err := p.pl.PinFromMeta(ctx, r, target, owner, e)
		if err != nil {
			return rep, err
		}
		desc, newPin := m.Desc, m.NewPin
		rep.Warnings = append(rep.Warnings, m.Warnings...)
		if bumpExact {
			if !ref.Newer(desc.Version, a.Version) {
				c := LockChange{Name: r.Name.String(), Action: LockKept, From: a.Version, To: a.Version, Origin: desc.Origin}
				if e != nil {
					if hex, plat, ok := e.Digest(p.pl.TargetPlatform()); ok {
						c.Platform, c.Digest = plat, "sha256:"+hex
					}
				}
				rep.Changes = append(rep.Changes, c)
				continue
			}
			declare[r.Name.String()] = true
		}
		if desc.Platform == "" {
			desc.Platform = ref.PlatformAny
		}
		c := LockChange{Name: r.Name.String(), Action: LockPinned, To: desc.Version, Platform: desc.Platform, Digest: desc.Digest.String(), Origin: desc.Origin}
		if e != nil {
			c.From = e.ResolvedVersion
			if e.ResolvedVersion != desc.Version {
				c.Action = LockMoved
			}
		}
		if e != nil && e.ResolvedVersion == desc.Version {
			if hex, _, ok := e.Digest(p.pl.TargetPlatform()); ok && "sha256:"+hex == c.Digest {
				c.Action = LockKept
			}
		}
		rep.Changes = append(rep.Changes, c)
		if declare[r.Name.String()] {
			rep.Declared = append(rep.Declared, r.Name.String()+"@"+desc.Version)
		}
		pins = append(pins, pin{req: r, desc: desc, newPin: newPin, prov: m.Provenance, update: e != nil && e.ResolvedVersion != desc.Version})
	}
	keep := map[string]bool{}
	for _, w := range in.Wants() {
		keep[w.Name] = true
	}
	apply := func(l *lock.Lock) error {
		for _, pn := range pins {
			name := pn.req.Name.String()
			if pn.newPin != nil {
				if cur, ok := l.Pin(pn.req.Name.Scope); ok {
					if err := cur.CheckOwner(pn.req.Name.Scope, pn.newPin.Source, pn.newPin.OwnerID); err != nil {
						return err
					}
				} else if err := l.SetPin(pn.req.Name.Scope, *pn.newPin); err != nil {
					return err
				}
			}
			plat := pn.desc.Platform
			if e := l.Find(name); e != nil && len(e.SHA256.Platforms) > 0 && plat == ref.PlatformAny && p.pl.TargetPlatform() != ref.PlatformAny {
				plat = p.pl.TargetPlatform() // as a pull pins a store's "any" payload in a per-platform entry
			}
			if err := l.Upsert(name, pn.desc.Version, plat, pn.desc.Digest.Encoded(), lock.OriginOperator, pn.update); err != nil {
				return err
			}
			if pn.prov != nil {
				if err := l.SetProvenance(name, *pn.prov); err != nil {
					return err
				}
			}
		}
		return nil
	}
	t := Transition{Pin: apply, Prune: !opt.Args, Declare: declare, Started: in.Capsule}
	if !opt.Args {
		for _, e := range l.Artifacts {
			if !keep[e.Name] {
				rep.Changes = append(rep.Changes, LockChange{Name: e.Name, Action: LockRemoved, From: e.ResolvedVersion})
			}
		}
	}
	if opt.DryRun {
		// Applied to the copy read above, so that a conflict is reported as the real run would.
		_, _, _, err := next(l, intentRead{capsule: in.Capsule, clean: true}, t)
		return rep, err
	}
	tr, err := writeLock(ctx, proj, in.Path, t)
	if tr.Declined != "" {
		rep.Warnings = append(rep.Warnings, tr.Declined)
	}
	// What murmur.yaml said under the file lock decides, not what it said when mur lock began.
	rep.Changes = slices.DeleteFunc(rep.Changes, func(c LockChange) bool {
		return c.Action == LockRemoved && !slices.Contains(tr.Removed, c.Name)
	})
	return rep, err
}

// String is the line `mur lock` prints for a change.
func (c LockChange) String() string {
	switch c.Action {
	case LockRemoved:
		return c.Name + ": removed (murmur.yaml no longer declares it; was " + c.From + ")"
	case LockMoved:
		return c.Name + ": " + c.From + " → " + c.To + " " + c.Digest + " " + c.Platform
	case LockKept:
		return c.Name + ": " + c.To + " (kept)"
	}
	return strings.TrimSpace(c.Name + ": " + c.To + " " + c.Digest + " " + c.Platform + " (pinned)")
}

// ForgetScope drops scope's owner pin from murmur.lock (mur lock forget-scope), so that the next
// source pull of the scope pins its current owner; it returns the pin dropped, nil when there was
// none.
func ForgetScope(ctx context.Context, proj Project, scope string) (*lock.ScopePin, error) {
	var removed *lock.ScopePin
	_, err := writeLock(ctx, proj, "", Transition{Pin: func(l *lock.Lock) error {
		if pin, ok := l.Pin(scope); ok {
			removed = &pin
			l.ForgetScope(scope)
		}
		return nil
	}})
	return removed, err
}
