package fetch_test

import (
	"context"
	"testing"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// resolveHook is a fake source that runs midResolve once it has answered a Resolve: the moment
// between `mur lock` reading murmur.lock and writing it.
type resolveHook struct {
	*pulltest.FakeSource
	midResolve func()
}

func (s *resolveHook) Resolve(ctx context.Context, name ref.Name, version, platform string, pin *lock.ScopePin) (store.Sourced, error) {
	out, err := s.FakeSource.Resolve(ctx, name, version, platform, pin)
	if s.midResolve != nil {
		s.midResolve()
	}
	return out, err
}

// Another process pins the scope while `mur lock` resolves: the owner the source answered with
// is checked against that pin, under the lock, and another owner is refused with nothing written;
// the same owner pins as if nobody had raced.
func TestLockRechecksTheOwnerPinnedMeanwhile(t *testing.T) {
	for _, tt := range []struct {
		name   string
		theirs lock.ScopePin
		token  errs.Token
	}{
		{"another owner", lock.ScopePin{Source: "github:acme/murmur-artifacts", OwnerID: 2, RepoID: 43}, errs.OwnerChanged},
		{"the same owner", lock.ScopePin{Source: "github:acme/murmur-artifacts", OwnerID: 1, RepoID: 42}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			in := intentOf(t, w, "name: app\nartifacts:\n  - name: acme/grep\n    version: 1.2.0\n")
			src := &resolveHook{FakeSource: &pulltest.FakeSource{Source: "github:acme/murmur-artifacts", Owner: 1, Version: "1.2.0", Zip: githubtest.PackArtifact("grep", "1.2.0")}}
			src.midResolve = func() {
				err := lock.Update(context.Background(), w.Proj.LockPath(), func(l *lock.Lock) error { return l.SetPin("acme", tt.theirs) })
				if err != nil {
					t.Error(err)
				}
			}
			p := w.puller()
			p.Pipeline().Source = src
			_, err := p.LockProject(context.Background(), w.Proj, in, declaredReqs(in), fetch.LockOptions{})
			l := w.ReadLock()
			pin, _ := l.Pin("acme")
			if tt.token != "" {
				errtest.WantToken(t, err, tt.token, "acme", "1", "2")
				if pin != tt.theirs || l.Find("acme/grep") != nil {
					t.Fatalf("lock after the refusal: pin %+v, entries %+v", pin, l.Artifacts)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pin != tt.theirs || l.Find("acme/grep") == nil || l.Find("acme/grep").ResolvedVersion != "1.2.0" {
				t.Fatalf("lock: pin %+v, entries %+v", pin, l.Artifacts)
			}
		})
	}
}
