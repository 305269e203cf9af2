package pull

import (
	"context"
	"os"
	"path/filepath"
	"sync"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/safefile"
	"github.com/murmur-nexus/mur/lock"
)

// murmur.lock is written once per pull. Each group commit (batch.go) checks its artifacts' pins
// against the lock as the pull holds it in memory (read once, and again only when another process
// wrote it since, with the pins of the pull's earlier commits), renames the blobs that pass into
// the CAS, and notes their pins in the pull's ledger.
// When the pull ends, or at once when it is interrupted, the ledger is flushed: one transition
// under the lock's file lock (the LockWriter) re-reads murmur.lock and murmur.yaml there and
// applies every noted pin in one pass, so that a concurrent writer loses nothing and a pin that
// no longer fits (another process pinned another version meanwhile) fails alone. Until then the
// pull's lease keeps the committed blobs from gc. After a kill -9 between a commit and the
// flush the blobs stay in the CAS, unpinned: the lease dies with the process, and the next pull
// resolves to blobs the CAS holds and pins them without a download (or 'mur cache gc' removes
// them once they are older than --older-than).

// pinChange is one artifact's pin: all a committed artifact keeps until the flush.
type pinChange struct {
	name              ref.Name
	version, platform string
	hex               string
	target            string // the platform the pull is for
	update            bool
	owner             *lock.ScopePin   // the scope's owner pin, from a source pull
	provenance        *lock.Provenance // the verified bundle to record
}

// apply pins c in l.
func (c *pinChange) apply(l *lock.Lock) error {
	name := c.name.String()
	if c.owner != nil {
		// Another process may have pinned the scope since this pull read the lock.
		if cur, ok := l.Pin(c.name.Scope); ok {
			if err := cur.CheckOwner(c.name.Scope, c.owner.Source, c.owner.OwnerID); err != nil {
				return err
			}
		} else if err := l.SetPin(c.name.Scope, *c.owner); err != nil {
			return err
		}
	}
	plat := c.platform
	if e := l.Find(name); e != nil && len(e.SHA256.Platforms) > 0 && plat == ref.PlatformAny && c.target != ref.PlatformAny {
		// The entry already pins per platform (a mixed fleet): a store's "any" payload is
		// what this platform runs, so it is pinned under this platform's own key.
		plat = c.target
	}
	if err := l.Upsert(name, c.version, plat, c.hex, lock.OriginOperator, c.update); err != nil {
		return err
	}
	if c.provenance != nil {
		return l.SetProvenance(name, *c.provenance)
	}
	return nil
}

// try applies c to l, or leaves l as it was and says why not.
func (c *pinChange) try(l *lock.Lock) (*lock.Change, error) {
	return l.Try(c.name.String(), c.name.Scope, c.apply)
}

// pinOf is the change to murmur.lock that pins what res pulled.
func (cm *committer) pinOf(req Request, res *Result, got *fetched, hex string) *pinChange {
	c := &pinChange{name: req.Name, version: res.Version, platform: res.Platform, hex: hex, target: cm.target, update: req.Update, owner: got.newPin}
	// A --locked pull changes nothing: what it verified satisfies the pin either way.
	if got.verified != nil && cm.lock != nil {
		e := got.verified.lockEntry()
		c.provenance = &e
	}
	return c
}

// ledger is what a pull's commits pinned and murmur.lock does not say yet.
type ledger struct {
	// held is the lock as the pull's commits left it, read from murmur.lock as stamp was; only
	// the committer touches these.
	held    *lock.Lock
	heldErr error
	stamp   string

	mu      sync.Mutex
	pending []*pinChange
	owes    bool             // pending is counted in owed
	failed  map[string]error // pins a flush could not write, by artifact name

	flushing sync.Mutex // one flush at a time
}

func (led *ledger) note(c *pinChange) {
	led.mu.Lock()
	led.pending = append(led.pending, c)
	if !led.owes {
		led.owes = true
		owed.add()
	}
	led.mu.Unlock()
}

// owed counts the ledgers of this process that noted pins murmur.lock does not have yet.
var owed debts

type debts struct {
	mu   sync.Mutex
	n    int
	paid chan struct{} // closed when n comes back to 0
}

func (d *debts) add() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == 0 {
		d.paid = make(chan struct{})
	}
	d.n++
}

func (d *debts) done() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n--; d.n == 0 {
		close(d.paid)
	}
}

// WaitForPins waits until every pull of this process has written into murmur.lock what its
// commits pinned (a pull interrupted by Ctrl-C writes it at once), or until ctx ends; it reports
// whether they all had. A command that exits after Ctrl-C without waiting for its wind-down
// waits for this, so that what finished stays pinned.
func WaitForPins(ctx context.Context) bool {
	owed.mu.Lock()
	if owed.n == 0 {
		owed.mu.Unlock()
		return true
	}
	paid := owed.paid
	owed.mu.Unlock()
	select {
	case <-paid:
		return true
	case <-ctx.Done():
		return false
	}
}

// failure is why the flush could not pin name, or nil.
func (led *ledger) failure(name string) error {
	led.mu.Lock()
	defer led.mu.Unlock()
	return led.failed[name]
}

// heldLock is the lock the pull's commits check their pins against: murmur.lock as read, with
// the pins the pull noted and has not written. It is read again only when another process wrote
// it since (its stamp changed), so that a pin it made meanwhile is checked before a blob commits,
// and otherwise once per pull. A pull outside a project has none.
func (cm *committer) heldLock(led *ledger) (*lock.Lock, error) {
	if cm.casOnly {
		return nil, nil
	}
	stamp := "absent"
	if fi, err := os.Stat(cm.proj.LockPath()); err == nil {
		stamp = safefile.Stamp(fi)
	}
	if led.held != nil && stamp != "" && stamp == led.stamp {
		return led.held, nil
	}
	l, err := lock.Read(cm.proj.LockPath())
	led.held, led.heldErr, led.stamp = l, err, stamp
	if err != nil {
		return nil, err
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	for _, c := range led.pending {
		_, _ = c.try(l) // one that no longer fits fails in the flush, which says so
	}
	return l, nil
}

// tryPin checks c against held and keeps it there. Outside a project the pin is checked against
// an empty lock and kept nowhere. Under --locked (no LockWriter) a pin that would change the
// lock is not kept, and mismatch says so: its blob passed the pin's checks, so it may still
// commit, as a cache entry for the pull that follows 'mur lock'.
func (cm *committer) tryPin(held *lock.Lock, c *pinChange) (ch *lock.Change, mismatch, err error) {
	if cm.casOnly {
		_, err := c.try(&lock.Lock{Scopes: map[string]lock.ScopePin{}})
		return nil, nil, err
	}
	if ch, err = c.try(held); err != nil {
		return nil, nil, err
	}
	if cm.lock == nil && ch.Changed() {
		ch.Undo()
		return nil, lock.WouldChange(cm.proj.LockPath()), nil
	}
	return ch, nil, nil
}

// flush writes what the ledger noted into murmur.lock, through the pull's LockWriter. It is
// safe to call at any time and again: each call writes what was noted since the last, if
// anything was. ctx's cancellation does not stop it: an interrupted pull still pins what it
// committed.
func (cm *committer) flush(ctx context.Context, led *ledger) {
	led.flushing.Lock()
	defer led.flushing.Unlock()
	led.mu.Lock()
	pins := led.pending
	led.pending = nil
	led.mu.Unlock()
	if len(pins) == 0 || cm.casOnly || cm.lock == nil {
		return
	}
	failed := map[string]error{}
	err := cm.lock(context.WithoutCancel(ctx), cm.proj, func(l *lock.Lock) error {
		clear(failed)
		for _, c := range pins {
			if _, err := c.try(l); err != nil {
				failed[c.name.String()] = err
			}
		}
		return nil
	})
	if err != nil {
		for _, c := range pins {
			failed[c.name.String()] = err
		}
	} else {
		// Registered again after the write, as before it (commit.go), before the lease ends.
		lockPath, _ := filepath.Abs(cm.proj.LockPath())
		_ = cm.registerRoot(context.WithoutCancel(ctx), lockPath)
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	if led.owes && len(led.pending) == 0 {
		led.owes = false
		owed.done()
	}
	for name, err := range failed {
		if led.failed == nil {
			led.failed = map[string]error{}
		}
		led.failed[name] = errs.Wrap(err, errs.TokenOf(err), "%s is in the cache, but murmur.lock could not pin it: %s", name, errs.Message(err))
	}
}

// pinOnInterrupt writes what the pull's commits pinned into murmur.lock as soon as ctx is
// cancelled, so that Ctrl-C loses nothing that committed, however long the rest takes to wind
// down. The func it returns writes what they pinned since, once every request is over.
func (cm *committer) pinOnInterrupt(ctx context.Context) (end func()) {
	over, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-ctx.Done():
			cm.flush(ctx, cm.run.pins)
		case <-over:
		}
	}()
	return func() {
		close(over)
		<-watched
		cm.flush(ctx, cm.run.pins)
	}
}

// pinFailures fails the requests whose pins the flush could not write: their blobs are in the
// CAS, but murmur.lock does not name them.
func (cm *committer) pinFailures(results []Result, errList []error) {
	for i := range results {
		if errList[i] != nil {
			continue
		}
		if err := cm.run.pins.failure(results[i].Name); err != nil {
			results[i].Error, results[i].Err, errList[i] = err.Error(), err, err
			cm.report.emit(Event{Name: results[i].Name, Phase: PhaseFailed})
		}
	}
}
