package pull

import (
	"context"

	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// stages reports whether a pull stages tools/: for this machine's platform, inside a project.
func (p *Puller) stages() bool {
	return !p.CASOnly && p.TargetPlatform() == ref.HostPlatform()
}

// LockWriter changes murmur.lock: fn is one group commit's change to the lock as read under its
// file lock, and the writer decides what of it is kept.
type LockWriter func(ctx context.Context, proj Project, fn func(*lock.Lock) error) error

// writeLock hands fn to p.Lock. Without one it is a check that changes nothing (--locked); outside
// a project it runs on a throwaway lock, so that the pin's checks still run and the blob is still
// committed only after them, but no murmur.lock is written.
func (p *Puller) writeLock(ctx context.Context, proj Project, fn func(*lock.Lock) error) error {
	switch {
	case p.CASOnly:
		return fn(&lock.Lock{Scopes: map[string]lock.ScopePin{}})
	case p.Lock == nil:
		return lock.Unchanged(ctx, proj.LockPath(), fn)
	}
	return p.Lock(ctx, proj, fn)
}

// localOnly is p with only its stores on disk (oci-layout: folders and packed files), no source
// and no mirror, for a pull with the network off; nil when p has no such store.
func (p *Puller) localOnly() *Puller {
	var local []store.Store
	for _, st := range p.Stores {
		if store.IsLocal(st) {
			local = append(local, st)
		}
	}
	if len(local) == 0 {
		return nil
	}
	c := *p
	c.Stores, c.Source, c.Mirror = local, nil, Mirror{}
	return &c
}
