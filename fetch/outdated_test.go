package fetch_test

import (
	"context"
	"errors"
	"testing"

	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
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
	p.Source = githubSource(fake)
	w.mustPull(p, req(grep, "1.2.0"))
	if pin, ok := w.readLock().Pin("acme"); !ok || pin.OwnerID != 1234567 {
		t.Fatalf("owner pin after the pull: %+v", pin)
	}
	in := intentOf(t, w, "name: app\nartifacts:\n  - name: acme/grep\n    version: 1.2.0\n")

	// Before the transfer: 1.3.0 is an update.
	rows, err := p.Outdated(context.Background(), w.proj, in, declaredReqs(in))
	if err != nil || len(rows) != 1 || rows[0].Latest != "1.3.0" || !rows[0].Behind {
		t.Fatalf("outdated: %+v, %v", rows, err)
	}

	fake.SetOwnerID("acme", "murmur-artifacts", 666)
	p.Source = githubSource(fake) // a later run: nothing remembered of the owner but its pin
	rows, err = p.Outdated(context.Background(), w.proj, in, declaredReqs(in))
	errtest.WantToken(t, err, errs.OwnerChanged, "acme", "1234567", "666")
	if len(rows) != 1 || rows[0].Latest != "" || rows[0].Behind || !errors.Is(rows[0].Err, errs.OwnerChanged) || rows[0].Move() != "" {
		t.Fatalf("a transferred repository's row: %+v", rows)
	}
}
