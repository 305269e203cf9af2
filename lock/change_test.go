package lock

import (
	"bytes"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

func changeBase(t *testing.T) *Lock {
	t.Helper()
	l := &Lock{Scopes: map[string]ScopePin{}}
	must(t, l.Upsert("acme/grep", "1.0.0", "linux-x86_64", hex64('a'), "", false))
	must(t, l.Upsert("acme/sed", "1.0.0", "any", hex64('b'), "", false))
	must(t, l.SetPin("acme", ScopePin{Source: "github:acme/murmur-artifacts", OwnerID: 1, RepoID: 2}))
	must(t, l.SetProvenance("acme/grep", Provenance{Kind: ProvenanceKey, Bundle: "sha256:" + hex64('d'), Signer: "release key"}))
	return l
}

// Changes to one lock, undone in reverse, leave it as it was, byte for byte: an entry replaced,
// a platform added, an entry and an owner pin added, the owner pin moved.
func TestChangesUndoInReverse(t *testing.T) {
	l := changeBase(t)
	before := l.Marshal()
	var changes []*Change
	try := func(name, scope string, fn func(*Lock) error) {
		t.Helper()
		c, err := l.Try(name, scope, fn)
		must(t, err)
		if !c.Changed() {
			t.Fatalf("a change of %s says it changed nothing", name)
		}
		changes = append(changes, c)
	}
	try("acme/grep", "acme", func(l *Lock) error {
		return l.Upsert("acme/grep", "1.0.0", "darwin-aarch64", hex64('c'), "", false)
	})
	try("acme/grep", "acme", func(l *Lock) error {
		return l.Upsert("acme/grep", "2.0.0", "any", hex64('e'), "", true)
	})
	try("beta/cat", "beta", func(l *Lock) error {
		if err := l.SetPin("beta", ScopePin{Source: "github:beta/murmur-artifacts", OwnerID: 3, RepoID: 4}); err != nil {
			return err
		}
		return l.Upsert("beta/cat", "1.0.0", "any", hex64('f'), "", false)
	})
	try("acme/sed", "acme", func(l *Lock) error {
		return l.SetPin("acme", ScopePin{Source: "github:acme/other", OwnerID: 5, RepoID: 6})
	})
	if bytes.Equal(l.Marshal(), before) {
		t.Fatal("the changes changed nothing")
	}
	for i := len(changes) - 1; i >= 0; i-- {
		changes[i].Undo()
	}
	if got := l.Marshal(); !bytes.Equal(got, before) {
		t.Fatalf("after undoing every change:\n%s\nwant:\n%s", got, before)
	}
	// The entry put back is a copy: changing the lock again leaves nothing of it shared.
	l.Find("acme/grep").SHA256.Platforms["linux-x86_64"] = hex64('9')
	changes[0].Undo() // undone already: a no-op
	if l.Find("acme/grep").SHA256.Platforms["linux-x86_64"] != hex64('9') {
		t.Fatal("a second Undo changed the lock again")
	}
}

// A change that fails leaves the entry and the owner pin as they were, though it changed both
// before failing; a change that pins what is pinned already says it changed nothing.
func TestTryPutsBackAFailure(t *testing.T) {
	l := changeBase(t)
	before := l.Marshal()
	_, err := l.Try("acme/grep", "acme", func(l *Lock) error {
		must(t, l.SetPin("acme", ScopePin{Source: "github:acme/other", OwnerID: 9, RepoID: 9}))
		must(t, l.Upsert("acme/grep", "1.0.0", "darwin-aarch64", hex64('c'), "", false))
		return l.Upsert("acme/grep", "3.0.0", "any", hex64('e'), "", false)
	})
	errtest.WantToken(t, err, errs.LockConflict, "acme/grep")
	if got := l.Marshal(); !bytes.Equal(got, before) {
		t.Fatalf("a failed change left:\n%s\nwant:\n%s", got, before)
	}
	_, err = l.Try("beta/new", "beta", func(l *Lock) error {
		must(t, l.Upsert("beta/new", "1.0.0", "any", hex64('c'), "", false))
		return errs.New(errs.Internal, "refused")
	})
	errtest.WantToken(t, err, errs.Internal)
	if l.Find("beta/new") != nil {
		t.Fatal("a failed change kept the entry it added")
	}
	c, err := l.Try("acme/sed", "acme", func(l *Lock) error {
		return l.Upsert("acme/sed", "1.0.0", "any", hex64('b'), "", false)
	})
	must(t, err)
	if c.Changed() {
		t.Fatal("pinning what is pinned says it changed the lock")
	}
}

// A part is a copy of one entry and one owner pin: a change tried on it leaves the lock alone.
func TestPartIsACopy(t *testing.T) {
	l := changeBase(t)
	before := l.Marshal()
	p := l.Part("acme/grep", "acme")
	if len(p.Artifacts) != 1 || p.Find("acme/grep") == nil || len(p.Scopes) != 1 {
		t.Fatalf("part %+v; want acme/grep and the acme owner pin alone", p)
	}
	c, err := p.Try("acme/grep", "acme", func(l *Lock) error {
		if err := l.SetPin("acme", ScopePin{Source: "github:acme/other", OwnerID: 5, RepoID: 6}); err != nil {
			return err
		}
		l.Find("acme/grep").Provenance.Signer = "someone else"
		return l.Upsert("acme/grep", "1.0.0", "darwin-aarch64", hex64('c'), "", false)
	})
	must(t, err)
	if !c.Changed() {
		t.Fatal("the change of the part says it changed nothing")
	}
	if got := l.Marshal(); !bytes.Equal(got, before) {
		t.Fatalf("a change of the part changed the lock:\n%s", got)
	}
	if p := l.Part("acme/none", "none"); len(p.Artifacts) != 0 || len(p.Scopes) != 0 {
		t.Fatalf("part of what the lock lacks: %+v", p)
	}
}
