package pull

import (
	"context"
	"sync"
	"time"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/lock"
)

// What every request of a pull would otherwise do for itself, done once per pull: a warm pull of a
// project is these steps and little else, so each one repeated per artifact was most of its time.

// pullOnce is a pull's shared reading of murmur.lock and registration of it as a GC root.
type pullOnce struct {
	lockOnce sync.Once
	lock     *lock.Lock
	lockErr  error

	rootMu     sync.Mutex
	registered time.Time // when this pull last registered the lock as a GC root
}

// readLock is murmur.lock as the pull found it: every request starts by reading its pin, all at
// once, so one reading serves them all. The lock is only read here; each commit reads it again
// under its file lock and checks what it changes.
func (p *Puller) readLock(proj Project) (*lock.Lock, error) {
	if p.run == nil {
		return lock.Read(proj.LockPath())
	}
	o := &p.run.once
	o.lockOnce.Do(func() { o.lock, o.lockErr = lock.Read(proj.LockPath()) })
	return o.lock, o.lockErr
}

// rootRefresh is how recently a pull must have registered its lock as a GC root to skip doing it
// again: gc keeps a root for cas.RootGrace after its last registration even while the lock is
// missing, so one registration covers every write of the lock within that time.
const rootRefresh = cas.RootGrace / 10

// registerRoot registers lockPath as a GC root, unless this pull did within rootRefresh.
func (p *Puller) registerRoot(ctx context.Context, lockPath string) error {
	if p.run == nil {
		return p.CAS.RegisterRoot(ctx, lockPath)
	}
	o := &p.run.once
	o.rootMu.Lock()
	defer o.rootMu.Unlock()
	if !o.registered.IsZero() && time.Since(o.registered) < rootRefresh {
		return nil
	}
	start := time.Now()
	if err := p.CAS.RegisterRoot(ctx, lockPath); err != nil {
		return err
	}
	o.registered = start
	return nil
}

// pinHolds reports whether c, a request's change to murmur.lock, would leave its entry and its
// scope's owner pin as the pull found them: a warm pull of pinned artifacts then has nothing to
// commit, and takes no file lock for it. It tries c on a copy of those two alone, not of the
// lock, which every request of the pull reads.
func (p *Puller) pinHolds(proj Project, c *pinChange) bool {
	l, err := p.readLock(proj)
	if err != nil || l == nil || l.Find(c.name.String()) == nil {
		return false
	}
	ch, err := c.try(l.Part(c.name.String(), c.name.Scope))
	return err == nil && !ch.Changed()
}
