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

// LockWriter changes murmur.lock: fn is a pull's change to the lock as read under its file lock
// (every pin its commits made, applied once, when it ends: ledger.go), and the writer decides
// what of it is kept. A Puller without one (--locked) writes nothing, and a pin that would change
// the lock fails with lock-mismatch.
type LockWriter func(ctx context.Context, proj Project, fn func(*lock.Lock) error) error

// localOnly is rv with only its stores on disk (oci-layout: folders and packed files) and no
// source, for a pull with the network off; nil when rv has no such store.
func (rv *resolver) localOnly() *resolver {
	var local []store.Store
	for _, st := range rv.stores {
		if store.IsLocal(st) {
			local = append(local, st)
		}
	}
	if len(local) == 0 {
		return nil
	}
	c := *rv
	c.stores, c.source = local, nil
	return &c
}
