package pull

import (
	"context"
	"reflect"
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

// pinHolds reports whether apply, a request's change to murmur.lock, would leave its entry as the
// pull found it: a warm pull of pinned artifacts then has nothing to commit, and takes no file
// lock and no fresh reading of the lock for it.
func (p *Puller) pinHolds(proj Project, name string, apply func(*lock.Lock) error) bool {
	l, err := p.readLock(proj)
	if err != nil || l == nil {
		return false
	}
	before := l.Find(name)
	if before == nil {
		return false
	}
	c := l.Clone()
	if apply(c) != nil {
		return false
	}
	after := c.Find(name)
	return after != nil && reflect.DeepEqual(*before, *after) && reflect.DeepEqual(l.Scopes, c.Scopes)
}
