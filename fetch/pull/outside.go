package pull

import (
	"context"

	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// stages reports whether a pull stages tools/: for this machine's platform, inside a project.
func (p *Puller) stages() bool {
	return !p.CASOnly && p.TargetPlatform() == ref.HostPlatform()
}

// lockUpdate is how a pull changes murmur.lock: lock.Update; lock.Unchanged under --locked; and
// outside a project a throwaway lock, so that the pin's checks still run and the blob is still
// committed only after them, but no murmur.lock is written.
func (p *Puller) lockUpdate() func(context.Context, string, func(*lock.Lock) error) error {
	switch {
	case p.CASOnly:
		return func(_ context.Context, _ string, fn func(*lock.Lock) error) error {
			return fn(&lock.Lock{Scopes: map[string]lock.ScopePin{}})
		}
	case p.Locked:
		return lock.Unchanged
	}
	return lock.Update
}
