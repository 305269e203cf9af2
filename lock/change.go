package lock

import (
	"maps"
	"reflect"
)

// A Change is one artifact's change to a lock: its entry and its scope's owner pin, as they were
// before, so that the change can be told apart and undone without a copy of the whole lock. A
// pull that pins hundreds of artifacts tries each against the lock it holds in memory; a copy of
// the lock per try made that quadratic.
type Change struct {
	l           *Lock
	name, scope string
	entry       Entry
	had, hadPin bool
	pin         ScopePin
	undone      bool
}

// Try runs fn on l, which must change nothing but name's entry and scope's owner pin; when fn
// fails, both are put back as they were and its error is returned.
func (l *Lock) Try(name, scope string, fn func(*Lock) error) (*Change, error) {
	c := &Change{l: l, name: name, scope: scope}
	if e := l.Find(name); e != nil {
		c.entry, c.had = e.clone(), true
	}
	c.pin, c.hadPin = l.Pin(scope)
	if err := fn(l); err != nil {
		c.Undo()
		return nil, err
	}
	return c, nil
}

// Changed reports whether the change left the entry or the owner pin other than it found them.
func (c *Change) Changed() bool {
	e := c.l.Find(c.name)
	if (e != nil) != c.had || e != nil && !reflect.DeepEqual(*e, c.entry) {
		return true
	}
	pin, hasPin := c.l.Pin(c.scope)
	return hasPin != c.hadPin || pin != c.pin
}

// Undo puts the entry and the owner pin back as Try found them. Changes to one lock are undone
// in the reverse of the order they were made.
func (c *Change) Undo() {
	if c.undone {
		return
	}
	c.undone = true
	switch e := c.l.Find(c.name); {
	case c.had && e != nil:
		*e = c.entry.clone()
	case c.had:
		c.l.insert(c.entry.clone())
	case e != nil:
		c.l.Remove(c.name)
	}
	if c.hadPin {
		c.l.Scopes[c.scope] = c.pin
	} else {
		delete(c.l.Scopes, c.scope)
	}
}

// Part is a lock of l's entry for name and owner pin for scope alone, copied: what a change to
// that artifact sees, to try it without touching l (which other readers may share).
func (l *Lock) Part(name, scope string) *Lock {
	p := &Lock{Scopes: map[string]ScopePin{}}
	if e := l.Find(name); e != nil {
		p.Artifacts = []Entry{e.clone()}
	}
	if pin, ok := l.Pin(scope); ok {
		p.Scopes[scope] = pin
	}
	return p
}

// clone is a deep copy of e (Clone's, for one entry).
func (e Entry) clone() Entry {
	e.SHA256.Platforms = maps.Clone(e.SHA256.Platforms)
	if e.Provenance != nil {
		p := *e.Provenance
		e.Provenance = &p
	}
	return e
}
