package fetch_test

import (
	"context"
	"os"
	"testing"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// A pull with --locked changes neither file: each way murmur.lock would have to change is
// refused with lock-mismatch (or usage, for flags that contradict it), with the difference
// named, and murmur.lock, murmur.yaml and tools/ are left byte for byte as they were. Every case
// is served by a source that would answer, so that what refuses is --locked and not a failure.
func TestLockedPullRefusals(t *testing.T) {
	zip := githubtest.PackArtifact("grep", "1.2.0")
	owner := lock.ScopePin{Source: "github:acme/murmur-artifacts", OwnerID: 1, RepoID: 42}
	grep12 := pulltest.Pin{Name: "acme/grep", Version: "1.2.0", Platform: "any", Blob: zip}
	const declares12 = "name: app\nartifacts:\n  - name: acme/grep\n    version: 1.2.0\n"
	for _, tt := range []struct {
		name      string
		yaml      string
		pins      []pulltest.Pin
		ownerPin  bool
		reqs      func(in fetch.Intent) []pull.Request
		token     errs.Token
		says      []string
		notCalled bool   // refused before the source is asked
		fetched   bool   // the pinned blob was fetched before the refusal, and stays in the CAS
		serve     string // the artifact the source serves at 1.0.0, when not acme/grep@1.2.0
	}{
		{name: "a pin that would move", yaml: declares12, ownerPin: true,
			pins:  []pulltest.Pin{{Name: "acme/grep", Version: "1.1.0", Platform: "any", Blob: githubtest.PackArtifact("grep", "1.1.0")}},
			token: errs.LockMismatch, says: []string{"does not follow murmur.yaml", "acme/grep: murmur.yaml asks for 1.2.0, but murmur.lock pins 1.1.0", "run 'mur lock'"}, notCalled: true},
		{name: "a new pin", yaml: declares12, ownerPin: true,
			token: errs.LockMismatch, says: []string{"does not follow murmur.yaml", "acme/grep: murmur.yaml declares it (1.2.0), but murmur.lock does not pin it for linux-x86_64"}, notCalled: true},
		{name: "an undeclared pin", yaml: declares12, ownerPin: true,
			pins:  []pulltest.Pin{grep12, {Name: "acme/sed", Version: "1.0.0", Platform: "any", Blob: githubtest.PackArtifact("sed", "1.0.0")}},
			token: errs.LockMismatch, says: []string{"does not follow murmur.yaml", "acme/sed: murmur.lock pins 1.0.0, but murmur.yaml no longer declares it"}, notCalled: true},
		{name: "an undeclared request", yaml: declares12, ownerPin: true, pins: []pulltest.Pin{grep12},
			reqs: func(fetch.Intent) []pull.Request {
				return []pull.Request{pulltest.Req(ref.Name{Scope: "acme", Name: "sed"}, "1.0.0")}
			},
			serve: "sed",
			token: errs.LockMismatch, says: []string{"acme/sed is not declared in", "--locked does not edit murmur.yaml", "mur add acme/sed"}, notCalled: true},
		{name: "an update", yaml: declares12, ownerPin: true, pins: []pulltest.Pin{grep12},
			reqs: func(in fetch.Intent) []pull.Request {
				r := declaredReqs(in)
				r[0].Update = true
				return r
			},
			token: errs.Usage, says: []string{"--locked and --update contradict each other"}, notCalled: true},
		{name: "a lock that would change", yaml: declares12, pins: []pulltest.Pin{grep12}, fetched: true, // the scope's owner is not pinned
			token: errs.LockMismatch, says: []string{"would change (a pin or an owner pin it lacks)", "--locked writes nothing"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			in := intentOf(t, w, tt.yaml)
			w.PinAll(tt.pins)
			if tt.ownerPin {
				if err := lock.Update(context.Background(), w.Proj.LockPath(), func(l *lock.Lock) error { return l.SetPin("acme", owner) }); err != nil {
					t.Fatal(err)
				}
			}
			manifestBefore, err := os.ReadFile(in.Path)
			if err != nil {
				t.Fatal(err)
			}
			before := w.State()
			src := &pulltest.FakeSource{Source: owner.Source, Owner: owner.OwnerID, Version: "1.2.0", Zip: zip}
			if tt.serve != "" {
				src.Version, src.Zip = "1.0.0", githubtest.PackArtifact(tt.serve, "1.0.0")
			}
			p := w.commandPuller(fetch.PullerOptions{Locked: true}, src) // as mur pull --locked
			reqs := declaredReqs(in)
			if tt.reqs != nil {
				reqs = tt.reqs(in)
			}
			_, err = p.PullProject(context.Background(), w.Proj, in, reqs, fetch.SyncOptions{Args: tt.reqs != nil, Locked: true})
			errtest.WantToken(t, err, tt.token, tt.says...)
			if tt.fetched {
				// The blob is the one murmur.lock pins, checked against that pin: a cache entry
				// for the pull that follows 'mur lock', not a change to the project.
				before.Blobs = grep12.Digest().Encoded()
			}
			w.AssertUnchanged(before)
			if after, _ := os.ReadFile(in.Path); string(after) != string(manifestBefore) {
				t.Fatalf("murmur.yaml changed:\n%s", after)
			}
			if n := src.Calls.Load(); tt.notCalled && n != 0 {
				t.Fatalf("the source was asked %d times", n)
			}
		})
	}
}
