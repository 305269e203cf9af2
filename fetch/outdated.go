package fetch

import (
	"context"

	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// Outdated is one declared artifact of `mur outdated`.
type Outdated struct {
	Name      string `json:"name"`
	Requested string `json:"requested"` // murmur.yaml's version: exact, or latest
	Locked    string `json:"locked"`    // the pinned version; "" when not pinned
	Latest    string `json:"latest"`    // the newest release the store or source lists; "" when unknown
	Source    string `json:"source"`    // the store or source that answered
	Behind    bool   `json:"behind"`    // Latest is newer than Locked, or nothing is pinned
	Err       error  `json:"-"`
}

// Outdated asks, from metadata alone, the newest release of every declared artifact (reqs), and
// sets it beside what murmur.yaml requests and murmur.lock pins. A place that fails fails its
// row only; the error is the first such failure.
func (p *Puller) Outdated(ctx context.Context, proj pull.Project, in Intent, reqs []pull.Request) ([]Outdated, error) {
	l, err := lock.Read(proj.LockPath())
	if err != nil {
		return nil, err
	}
	rows := make([]Outdated, 0, len(reqs))
	var first error
	for _, r := range reqs {
		row := Outdated{Name: r.Name.String(), Requested: r.Version}
		if a, _ := in.Capsule.Find(r.Name.String()); a != nil {
			row.Requested = a.Version
		}
		var owner *lock.ScopePin
		if op, ok := l.Pin(r.Name.Scope); ok {
			owner = &op
		}
		if e := l.Find(row.Name); e != nil {
			row.Locked = e.ResolvedVersion
		}
		desc, _, err := p.pl.ResolveMeta(ctx, r, ref.Latest, owner)
		if err != nil {
			row.Err = err
			if first == nil {
				first = errs.Wrap(err, errs.TokenOf(err), "%s: %s", row.Name, errs.Message(err))
			}
		} else {
			row.Latest, row.Source = desc.Version, desc.Origin
			row.Behind = row.Locked == "" || ref.Newer(row.Latest, row.Locked)
		}
		rows = append(rows, row)
	}
	return rows, first
}

// Move is the command that moves a behind row to its newest release, in murmur.yaml when the
// entry is exact and in murmur.lock; "" when the row is not behind.
func (o Outdated) Move() string {
	if !o.Behind {
		return ""
	}
	return "mur lock --bump " + o.Name
}
