package fetch_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/lock"
)

// An editor saving murmur.yaml truncates it and writes it again, in place; a read between the
// two sees half of it. No pull or lock may prune what the half leaves out.

const (
	signedYAML = "name: p\nartifacts:\n  - name: acme/grep\n    version: 1.0.0\n  - name: acme/signed\n    version: 1.0.0\n"
	cutYAML    = "name: p\nartifacts:\n  - name: acme/grep\n    version: 1.0.0\n" // the save, cut short
)

// saveInPlace writes data over path as an editor that truncates and writes does, in two writes:
// data[:cut], then gap, then the rest.
func saveInPlace(t testing.TB, path, data string, cut int, gap func()) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	if _, err := f.WriteString(data[:cut]); err != nil {
		t.Error(err)
	}
	if gap != nil {
		gap()
	}
	if _, err := f.WriteString(data[cut:]); err != nil {
		t.Error(err)
	}
}

// editedOnResolve is a store that, as it is asked for metadata the first time, has an editor
// start saving murmur.yaml and stall halfway.
type editedOnResolve struct {
	store.Store
	once sync.Once
	edit func()
}

func (s *editedOnResolve) Resolve(ctx context.Context, n ref.Name, version, platform string) (store.Descriptor, error) {
	s.once.Do(s.edit)
	return s.Store.Resolve(ctx, n, version, platform)
}

// signedProject is a project declaring acme/grep, which its layout serves, and acme/signed, which
// its lock pins with a provenance record.
func signedProject(t *testing.T) (*world, fetch.Intent, store.Store) {
	w := newWorld(t)
	layout := pulltest.LayoutStore(t)
	pulltest.Push(t, layout, grep, "1.0.0", "any", pulltest.Pack(t, "grep", "1.0.0", 41))
	err := lock.Update(t.Context(), w.Proj.LockPath(), func(l *lock.Lock) error {
		if err := l.Upsert("acme/signed", "1.0.0", "any", strings.Repeat("c", 64), "", false); err != nil {
			return err
		}
		return l.SetProvenance("acme/signed", lock.Provenance{Kind: lock.ProvenanceKey, Bundle: "sha256:" + strings.Repeat("d", 64), Signer: "a768"})
	})
	if err != nil {
		t.Fatal(err)
	}
	return w, intentOf(t, w, signedYAML), layout
}

// wantSignedKept checks that acme/signed is still pinned with its provenance record.
func wantSignedKept(t *testing.T, w *world) {
	t.Helper()
	e := w.ReadLock().Find("acme/signed")
	if e == nil || e.Provenance == nil {
		t.Fatalf("acme/signed lost its pin or its provenance record:\n%s", w.ReadLock().Marshal())
	}
}

// A pull that finds murmur.yaml half saved under the lock prunes nothing, says so in one line
// and succeeds; once the save is done, the next pull has nothing to say.
func TestPullPrunesNothingFromAHalfSavedMurmurYAML(t *testing.T) {
	w, in, layout := signedProject(t)
	st := &editedOnResolve{Store: layout, edit: func() { saveInPlace(t, in.Path, cutYAML, 0, nil) }}
	p := w.puller(st)
	var warned []string
	p.Pipeline().Report.Warn = func(msg string) { warned = append(warned, msg) }
	rep, err := p.PullProject(t.Context(), w.Proj, in, []pull.Request{pulltest.Req(grep, "1.0.0")}, fetch.SyncOptions{Args: true})
	if err != nil {
		t.Fatal(err)
	}
	wantSignedKept(t, w)
	if len(rep.Removed) != 0 || len(warned) != 1 || !strings.Contains(warned[0], "acme/signed") || strings.Contains(warned[0], "\n") {
		t.Fatalf("removed %v; warned %q, want one line naming acme/signed", rep.Removed, warned)
	}
	if _, err := os.Stat(filepath.Join(w.Proj.ToolsDir(), "acme", "grep")); err != nil {
		t.Fatalf("acme/grep's tools/ folder: %v", err)
	}

	saveInPlace(t, in.Path, signedYAML, 0, nil) // the editor is done
	warned = nil
	rep, err = p.PullProject(t.Context(), w.Proj, intentOf(t, w, signedYAML), []pull.Request{pulltest.Req(grep, "1.0.0")}, fetch.SyncOptions{Args: true})
	if err != nil || len(rep.Removed) != 0 || len(warned) != 0 {
		t.Fatalf("%v; removed %v; warned %q", err, rep.Removed, warned)
	}
	wantSignedKept(t, w)
}

// mur lock the same: its report lists no removal that did not happen.
func TestLockPrunesNothingFromAHalfSavedMurmurYAML(t *testing.T) {
	w, in, layout := signedProject(t)
	st := &editedOnResolve{Store: layout, edit: func() { saveInPlace(t, in.Path, cutYAML, 0, nil) }}
	rep, err := w.puller(st).LockProject(t.Context(), w.Proj, in, declaredReqs(in), fetch.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantSignedKept(t, w)
	for _, c := range rep.Changes {
		if c.Action == fetch.LockRemoved {
			t.Errorf("the report says %s was removed", c.Name)
		}
	}
	if len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "acme/signed") {
		t.Fatalf("warnings %q, want one naming acme/signed", rep.Warnings)
	}
}

// An editor saves murmur.yaml over and over, truncating it and writing it again in two writes,
// while pulls and locks that started from it whole run: none of them loses a pin, however the
// reads fall. (A start read torn too is the settle window's to catch: prune_test.go.)
func TestAnEditorSavingInALoopCostsNoPin(t *testing.T) {
	fetch.SetSettle(t, 5*time.Millisecond) // short waits: the guarantee here does not rest on it
	w := newWorld(t)
	layout := pulltest.LayoutStore(t)
	full, cut := "name: p\nartifacts:\n", 0
	for i, name := range []string{"grep", "notes", "sed"} {
		pulltest.Push(t, layout, ref.Name{Scope: "acme", Name: name}, "1.0.0", "any", pulltest.Pack(t, name, "1.0.0", uint64(60+i)))
		full += "  - name: acme/" + name + "\n    version: 1.0.0\n"
		if i == 0 {
			cut = len(full) // the first write of a save ends here: a murmur.yaml that parses
		}
	}
	in := intentOf(t, w, full)
	p := w.puller(layout)
	if _, err := p.PullProject(t.Context(), w.Proj, in, declaredReqs(in), fetch.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// The pauses, within a save and between saves, pace the load so that reads fall
			// in all three states (empty, half, whole); no assertion waits on them.
			saveInPlace(t, in.Path, full, cut, func() { time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond) })
			time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		}
	}()
	defer func() { close(stop); <-done }()
	ctx, cancel := context.WithTimeout(t.Context(), slowdown.Scale(2*time.Minute))
	defer cancel()
	declined := 0
	p.Pipeline().Report.Warn = func(string) { declined++ }
	for i := range 40 {
		var err error
		if i%2 == 0 {
			_, err = p.PullProject(ctx, w.Proj, in, declaredReqs(in), fetch.SyncOptions{})
		} else {
			var rep *fetch.LockReport
			rep, err = p.LockProject(ctx, w.Proj, in, declaredReqs(in), fetch.LockOptions{})
			declined += len(rep.Warnings)
		}
		if ctx.Err() != nil {
			t.Fatalf("run %d: still running at the test's deadline: %v", i, err)
		}
		l := w.ReadLock()
		if len(l.Artifacts) != 3 {
			t.Fatalf("run %d (%v) lost a pin: the lock pins\n%s", i, err, l.Marshal())
		}
	}
	t.Logf("%d of 40 prunes declined", declined)
}
