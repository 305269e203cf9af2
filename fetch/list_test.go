package fetch_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"hash"
	"os"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
)

// mur outdated asks the source with the scope's owner pin: a repository that changed hands
// since the pin is owner-changed, and its newest release is not offered as an update.
func TestOutdatedHoldsTheOwnerPin(t *testing.T) {
	fake := githubtest.New(t)
	fake.AddRepo("acme", "murmur-artifacts", 1234567, 7654321)
	fake.Publish("acme", "murmur-artifacts", "acme",
		githubtest.Artifact{Name: "acme/grep", Version: "1.2.0", Release: "v1.2.0", Asset: "grep-1.2.0.mur.zip", Data: githubtest.PackArtifact("grep", "1.2.0")},
		githubtest.Artifact{Name: "acme/grep", Version: "1.3.0", Release: "v1.3.0", Asset: "grep-1.3.0.mur.zip", Data: githubtest.PackArtifact("grep", "1.3.0")})
	w := newWorld(t)
	p := w.puller()
	p.Pipeline().Source = pulltest.GitHubSource(fake)
	w.mustPull(p, pulltest.Req(grep, "1.2.0"))
	if pin, ok := w.ReadLock().Pin("acme"); !ok || pin.OwnerID != 1234567 {
		t.Fatalf("owner pin after the pull: %+v", pin)
	}
	in := intentOf(t, w, "name: app\nartifacts:\n  - name: acme/grep\n    version: 1.2.0\n")

	// Before the transfer: 1.3.0 is an update, and says how to move to it.
	rows, err := p.Outdated(context.Background(), w.Proj, in, declaredReqs(in))
	if err != nil || len(rows) != 1 || rows[0].Latest != "1.3.0" || rows[0].Locked != "1.2.0" || rows[0].Requested != "1.2.0" ||
		!rows[0].Behind || rows[0].Source != "github:acme/murmur-artifacts" || rows[0].Move() != "mur lock --bump acme/grep" {
		t.Fatalf("outdated: %+v, %v", rows, err)
	}
	// A declared entry nothing pins is behind whatever the newest is.
	in2 := intentOf(t, w, "name: app\nartifacts:\n  - name: acme/grep\n    version: latest\n")
	if err := os.Rename(w.Proj.LockPath(), w.Proj.LockPath()+".aside"); err != nil {
		t.Fatal(err)
	}
	rows, err = p.Outdated(context.Background(), w.Proj, in2, declaredReqs(in2))
	if err != nil || len(rows) != 1 || rows[0].Locked != "" || rows[0].Requested != "latest" || rows[0].Latest != "1.3.0" || !rows[0].Behind {
		t.Fatalf("outdated, unpinned: %+v, %v", rows, err)
	}
	if err := os.Rename(w.Proj.LockPath()+".aside", w.Proj.LockPath()); err != nil {
		t.Fatal(err)
	}
	// Pinned at the newest: not behind, nothing to move.
	w2 := newWorld(t)
	p2 := w2.puller()
	p2.Pipeline().Source = pulltest.GitHubSource(fake)
	w2.mustPull(p2, pulltest.Req(grep, "1.3.0"))
	in3 := intentOf(t, w2, "name: app\nartifacts:\n  - name: acme/grep\n    version: 1.3.0\n")
	if rows, err = p2.Outdated(context.Background(), w2.Proj, in3, declaredReqs(in3)); err != nil || rows[0].Behind || rows[0].Latest != "1.3.0" || rows[0].Move() != "" {
		t.Fatalf("outdated, pinned at the newest: %+v, %v", rows, err)
	}

	fake.SetOwnerID("acme", "murmur-artifacts", 666)
	p.Pipeline().Source = pulltest.GitHubSource(fake) // a later run: nothing remembered of the owner but its pin
	rows, err = p.Outdated(context.Background(), w.Proj, in, declaredReqs(in))
	errtest.WantToken(t, err, errs.OwnerChanged, "acme", "1234567", "666")
	if len(rows) != 1 || rows[0].Latest != "" || rows[0].Behind || !errors.Is(rows[0].Err, errs.OwnerChanged) || rows[0].Move() != "" {
		t.Fatalf("a transferred repository's row: %+v", rows)
	}
}

// keyedCompiled is a compiled cache that holds the modules whose keys it was given, and remembers
// blob keys as a pull would.
type keyedCompiled struct {
	held       map[string]bool
	remembered map[digest.Digest][]byte
}

func (f *keyedCompiled) ModuleKey() hash.Hash        { return sha256.New() }
func (f *keyedCompiled) HasCompiled(key []byte) bool { return f.held[string(key)] }
func (f *keyedCompiled) BlobKey(d digest.Digest) ([]byte, bool) {
	k, ok := f.remembered[d]
	return k, ok
}
func (f *keyedCompiled) RememberBlobKey(d digest.Digest, key []byte) { f.remembered[d] = key }

// mur ls tells compiled from the compiled cache itself: a remembered key that names another
// module's compiled entry does not make a blob read as compiled, and is put right.
func TestListComputesCompiledFromThePayload(t *testing.T) {
	w := newWorld(t)
	st := pulltest.LayoutStore(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 3)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	w.mustPull(w.puller(st), pulltest.Req(grep, "1.0.0"))
	other := sha256.Sum256([]byte("another module"))
	fc := &keyedCompiled{held: map[string]bool{string(other[:]): true}, remembered: map[digest.Digest][]byte{p.Digest(): other[:]}}
	in := fetch.LocalInput{CAS: w.CAS, Project: w.Proj, Lock: w.ReadLock(), Compiled: fc}
	got, err := fetch.List(context.Background(), in)
	if err != nil || len(got) != 1 {
		t.Fatalf("List = %+v, %v", got, err)
	}
	if got[0].Compiled {
		t.Fatalf("a wrong remembered key made %s read as compiled", ref.Name{Scope: "acme", Name: "grep"})
	}
	if string(fc.remembered[p.Digest()]) == string(other[:]) {
		t.Errorf("the wrong remembered key was kept")
	}
	// Once the payload's own module is compiled, it reads as compiled.
	fc.held[string(fc.remembered[p.Digest()])] = true
	if got, _ := fetch.List(context.Background(), in); !got[0].Compiled {
		t.Errorf("a compiled payload reads as not compiled")
	}
}
