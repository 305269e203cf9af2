package pull

import (
	"context"
	"sync"
	"time"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
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
func (cm *committer) readLock() (*lock.Lock, error) {
	if cm.run == nil {
		return lock.Read(cm.proj.LockPath())
	}
	o := &cm.run.once
	o.lockOnce.Do(func() { o.lock, o.lockErr = lock.Read(cm.proj.LockPath()) })
	return o.lock, o.lockErr
}

func (cm *committer) readPin(ctx context.Context, req Request) (pinned, error) {
	if cm.casOnly {
		return pinned{}, nil
	}
	l, err := cm.readLock()
	if err != nil {
		return pinned{}, err
	}
	var pin pinned
	if op, ok := l.Pin(req.Name.Scope); ok {
		pin.owner = &op
	}
	e := l.Find(req.Name.String())
	if e == nil {
		return pin, nil
	}
	pin.provenance, pin.provenanceOf = e.Provenance, e.ResolvedVersion
	if req.Update {
		// An update re-resolves, also at the pinned version: the lock-conflict for a moved tag
		// tells the user to run exactly that, so the old digest must not be enforced here.
		return pin, nil
	}
	if req.Version != ref.Latest && req.Version != e.ResolvedVersion {
		return pin, errs.New(errs.LockConflict,
			"murmur.lock pins %s at %s, and %s was asked for; to move the pin run 'mur pull --update %s@%s'",
			req.Name, e.ResolvedVersion, req.Version, req.Name, req.Version)
	}
	pin.version = e.ResolvedVersion
	if hex, plat, ok := e.Digest(cm.target); ok {
		d, err := ref.DigestFromHex(hex)
		if err != nil {
			return pin, errs.Wrap(err, errs.InvalidLock, "murmur.lock pins %s with %q, which is not a sha256 hex digest; fix or remove the entry", req.Name, hex)
		}
		pin.digest, pin.platform = d, plat
	}
	return pin, nil
}

// rootRefresh is how recently a pull must have registered its lock as a GC root to skip doing it
// again: gc keeps a root for cas.RootGrace after its last registration even while the lock is
// missing, so one registration covers every write of the lock within that time.
const rootRefresh = cas.RootGrace / 10

// registerRoot registers lockPath as a GC root, unless this pull did within rootRefresh.
func (cm *committer) registerRoot(ctx context.Context, lockPath string) error {
	if cm.run == nil {
		return cm.cas.RegisterRoot(ctx, lockPath)
	}
	o := &cm.run.once
	o.rootMu.Lock()
	defer o.rootMu.Unlock()
	if !o.registered.IsZero() && time.Since(o.registered) < rootRefresh {
		return nil
	}
	start := time.Now()
	if err := cm.cas.RegisterRoot(ctx, lockPath); err != nil {
		return err
	}
	o.registered = start
	return nil
}

// pinHolds reports whether c, a request's change to murmur.lock, would leave its entry and its
// scope's owner pin as the pull found them: a warm pull of pinned artifacts then has nothing to
// commit, and takes no file lock for it. It tries c on a copy of those two alone, not of the
// lock, which every request of the pull reads.
func (cm *committer) pinHolds(c *pinChange) bool {
	l, err := cm.readLock()
	if err != nil || l == nil || l.Find(c.name.String()) == nil {
		return false
	}
	ch, err := c.try(l.Part(c.name.String(), c.name.Scope))
	return err == nil && !ch.Changed()
}
