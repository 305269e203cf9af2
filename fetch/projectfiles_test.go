package fetch_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/lock"
)

// A registered project whose murmur.lock became a symlink to /dev/zero (a clone of a hostile
// repository, pulled into once) does not stop every gc on the machine: it pins nothing, and gc
// says so.
func TestGCSurvivesARegisteredLockThatIsDevZero(t *testing.T) {
	w := newWorld(t)
	st := pulltest.LayoutStore(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 231)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	w.mustPull(w.puller(st), pulltest.Req(grep, "1.0.0"))
	stray := w.Ingest(pulltest.Pack(t, "stray", "1.0.0", 232))
	must(t, os.Remove(w.Proj.LockPath()))
	must(t, os.Symlink("/dev/zero", w.Proj.LockPath()))

	done := make(chan struct{})
	var rep fetch.GCReport
	var err error
	go func() { defer close(done); rep, err = fetch.GC(bg, fetch.GCInput{CAS: w.CAS, OlderThan: 0}) }()
	select {
	case <-done:
	case <-time.After(slowdown.Scale(60 * time.Second)):
		t.Fatal("gc is still reading a lock that is /dev/zero")
	}
	if err != nil {
		t.Fatalf("gc failed on a registered lock that is a symlink: %v", err)
	}
	if w.CAS.Has(stray) {
		t.Fatal("gc kept an unpinned blob")
	}
	if len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], w.Proj.LockPath()) || !strings.Contains(rep.Warnings[0], "symlink") {
		t.Fatalf("gc's warnings: %q", rep.Warnings)
	}
}

// The current project's lock as a symlink still stops gc: that is the lock the user is working
// on, and gc must not guess what it pins.
func TestGCRefusesTheCurrentProjectsLinkedLock(t *testing.T) {
	w := newWorld(t)
	must(t, os.Symlink("/dev/zero", w.Proj.LockPath()))
	_, err := fetch.GC(bg, fetch.GCInput{CAS: w.CAS, Project: w.Proj.Dir, OlderThan: 0})
	errtest.WantToken(t, err, errs.Denied, w.Proj.LockPath())
}

// murmur.lock, murmur.yaml and .murmur/config.yaml committed as symlinks to a secret are
// refused with denied:, and the secret is never quoted.
func TestProjectFilesCommittedAsSymlinks(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "id_token")
	const secret = "ghp_THE_USERS_OWN_TOKEN"
	must(t, os.WriteFile(secretFile, []byte("name: "+secret+"\n"), 0o600))
	dir := t.TempDir()
	for _, f := range []string{"murmur.lock", "murmur.yaml", ".murmur/config.yaml"} {
		must(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755))
		must(t, os.Symlink(secretFile, filepath.Join(dir, f)))
	}
	_, lerr := lock.Read(filepath.Join(dir, "murmur.lock"))
	uerr := lock.Update(bg, filepath.Join(dir, "murmur.lock"), func(*lock.Lock) error { return nil })
	_, merr := manifest.Load(filepath.Join(dir, "murmur.yaml"))
	_, cerr := config.Load("", dir)
	for name, err := range map[string]error{"lock.Read": lerr, "lock.Update": uerr, "manifest.Load": merr, "config.Load": cerr} {
		errtest.WantToken(t, err, errs.Denied, "symlink")
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("%s quotes the secret the link leads to: %v", name, err)
		}
	}
	// A symlinked .murmur/ is refused as a whole.
	real := filepath.Join(t.TempDir(), ".murmur")
	must(t, os.MkdirAll(real, 0o755))
	must(t, os.WriteFile(filepath.Join(real, "config.yaml"), []byte("stores: []\n"), 0o644))
	linked := t.TempDir()
	must(t, os.Symlink(real, filepath.Join(linked, ".murmur")))
	_, cerr = config.Load("", linked)
	errtest.WantToken(t, cerr, errs.Denied, ".murmur", "symlink")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
