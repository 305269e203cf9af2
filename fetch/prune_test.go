package fetch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// pinned is a project whose murmur.yaml is fullYAML and whose lock pins acme/grep and acme/notes
// at 1.0.0, each with a provenance record.
func pinned(t *testing.T) (Project, string) {
	t.Helper()
	dir := t.TempDir()
	yaml := filepath.Join(dir, "murmur.yaml")
	if err := os.WriteFile(yaml, []byte(fullYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	proj := Project{Dir: dir}
	err := lock.Update(context.Background(), proj.LockPath(), func(l *lock.Lock) error {
		*l = *pins(t, "acme/grep+@1.0.0:"+hexA, "acme/notes+@1.0.0:"+hexB)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return proj, yaml
}

// lockNames lists what proj's lock pins, each with "+" when it kept its provenance record.
func lockNames(t *testing.T, proj Project) string {
	t.Helper()
	l, err := lock.Read(proj.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range l.Artifacts {
		if e.Provenance != nil {
			e.Name += "+"
		}
		out = append(out, e.Name)
	}
	return strings.Join(out, " ")
}

// A prune follows only from a murmur.yaml read clean, stable and settled that still declares
// what the command started from; otherwise it drops nothing, says why in one line, and the
// transition succeeds.
func TestPruneDeclinesOnATornRead(t *testing.T) {
	started := capsule(t, fullYAML)
	future := time.Now().Add(time.Hour)
	tests := []struct {
		name      string
		settle    time.Duration
		before    func(t *testing.T, yaml string) // an editor, before the transition reads
		torn      func(t *testing.T, yaml string, try int)
		started   *manifest.Capsule
		undeclare []ref.Name
		reads     int // how many tries of a read there were, 0 for any
		want      string
		removed   string
		declined  string // in the warning; "" when the prune must not decline
		token     errs.Token
	}{
		{
			name:   "an editor's save cut short, left alone since: it drops what the command started from",
			settle: time.Millisecond, started: started,
			before: func(t *testing.T, yaml string) { save(t, yaml, halfYAML) },
			want:   "acme/grep+ acme/notes+", declined: "no longer declares acme/notes, as it did when this command started",
		},
		{
			name:   "a save moments old is waited for, and the editor finishes it",
			settle: time.Millisecond,
			before: func(t *testing.T, yaml string) { save(t, yaml, halfYAML); os.Chtimes(yaml, future, future) },
			torn: func() func(t *testing.T, yaml string, try int) {
				calls := 0
				return func(t *testing.T, yaml string, try int) {
					if calls++; calls == 2 { // the read after the wait
						save(t, yaml, fullYAML)
					}
				}
			}(),
			want: "acme/grep+ acme/notes+",
		},
		{
			name:   "a save between the stat and the read is read again, whole",
			settle: time.Nanosecond,
			torn: func(t *testing.T, yaml string, try int) {
				if try < 2 {
					save(t, yaml, []string{halfYAML, fullYAML}[try]) // the editor's truncate, then its write
				}
			},
			reads: 3, want: "acme/grep+ acme/notes+",
		},
		{
			name:   "a file saved over and over: nothing is pruned",
			settle: time.Millisecond,
			torn: func(t *testing.T, yaml string, try int) {
				save(t, yaml, []string{halfYAML, fullYAML}[try%2])
			},
			reads: (settleRounds + 1) * stableTries, want: "acme/grep+ acme/notes+", declined: "(it changed while mur read it)",
		},
		{
			name:   "a save that stays moments old: nothing is pruned",
			settle: time.Millisecond,
			before: func(t *testing.T, yaml string) { save(t, yaml, halfYAML); os.Chtimes(yaml, future, future) },
			reads:  settleRounds + 1, want: "acme/grep+ acme/notes+", declined: "(it was written moments ago, and may be mid-save)",
		},
		{
			name:   "a half that does not parse, moments old: every pin is kept",
			settle: time.Millisecond,
			before: func(t *testing.T, yaml string) {
				save(t, yaml, "name: p\nartifacts: [\n")
				os.Chtimes(yaml, future, future)
			},
			want: "acme/grep+ acme/notes+", declined: "every pin was kept",
		},
		{
			name:   "a half that does not parse, left alone: the error it is",
			settle: time.Nanosecond,
			before: func(t *testing.T, yaml string) { save(t, yaml, "name: p\nartifacts: [\n") },
			token:  errs.InvalidManifest,
		},
		{
			name:   "a clean, settled murmur.yaml the command started from drops a pin and its record",
			settle: time.Nanosecond, started: capsule(t, halfYAML),
			before: func(t *testing.T, yaml string) { save(t, yaml, halfYAML) },
			want:   "acme/grep+", removed: "acme/notes",
		},
		{
			name:   "mur rm drops its own pin after a save cut short, and keeps the others",
			settle: time.Millisecond, started: started, undeclare: []ref.Name{{Scope: "acme", Name: "grep"}},
			before: func(t *testing.T, yaml string) { save(t, yaml, halfYAML) },
			want:   "acme/notes+", removed: "acme/grep", declined: "no longer declares acme/notes",
		},
		{
			name:   "mur rm drops its own pin on a torn read, and keeps the others",
			settle: time.Millisecond, started: started, undeclare: []ref.Name{{Scope: "acme", Name: "grep"}},
			torn: func() func(t *testing.T, yaml string, try int) {
				calls := 0
				return func(t *testing.T, yaml string, try int) {
					if calls++; calls > 1 { // mur rm's own edit read it whole; then an editor saves
						save(t, yaml, []string{"name: p\n", halfYAML}[try%2])
					}
				}
			}(),
			want: "acme/notes+", removed: "acme/grep", declined: "(it changed while mur read it)",
		},
		{
			name: "what mur rm wrote itself is settled: the stale pin goes at once",
			// Waiting for its own write would take settleRounds times as long, and decline.
			settle: 5 * time.Second, started: capsule(t, halfYAML), undeclare: []ref.Name{{Scope: "acme", Name: "grep"}},
			before: func(t *testing.T, yaml string) {
				save(t, yaml, halfYAML)
				os.Chtimes(yaml, time.Now().Add(-2*time.Hour), time.Now().Add(-2*time.Hour))
			},
			reads: 2, removed: "acme/grep acme/notes",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proj, yaml := pinned(t)
			SetSettle(t, tt.settle)
			if tt.before != nil {
				tt.before(t, yaml)
			}
			reads := 0
			SetReadSeams(t, func(p string, try int) {
				reads++
				if tt.torn != nil {
					tt.torn(t, p, try)
				}
			}, nil)
			tr, err := writeLock(t.Context(), proj, yaml, Transition{Prune: true, Started: tt.started, Undeclare: tt.undeclare})
			SetReadSeams(t, nil, nil)
			if tt.token != "" {
				if errs.TokenOf(err) != tt.token {
					t.Fatalf("err = %v, want %s", err, tt.token)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := lockNames(t, proj); got != tt.want {
				t.Errorf("the lock pins %q, want %q", got, tt.want)
			}
			if got := strings.Join(tr.Removed, " "); got != tt.removed {
				t.Errorf("removed %q, want %q", got, tt.removed)
			}
			if tt.declined == "" && tr.Declined != "" || !strings.Contains(tr.Declined, tt.declined) || strings.Contains(tr.Declined, "\n") {
				t.Errorf("declined %q, want one line with %q", tr.Declined, tt.declined)
			}
			if tt.reads != 0 && reads != tt.reads {
				t.Errorf("murmur.yaml was read %d times, want %d", reads, tt.reads)
			}
		})
	}
}

// The prune reads murmur.yaml holding the lock's file lock: a `mur add` another process runs
// between a read outside the lock and the lock would otherwise be pruned by a read that
// predates it.
func TestPruneReadsMurmurYAMLHoldingTheLock(t *testing.T) {
	dir := t.TempDir()
	proj := Project{Dir: dir}
	yaml := filepath.Join(dir, "murmur.yaml")
	if err := os.WriteFile(yaml, []byte("name: p\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	SetSettle(t, time.Nanosecond) // what this test is about is not the settle window
	ctx := t.Context()
	add := Transition{Pin: upsert("acme/grep", "1.0.0", hexA, false), Declare: map[string]bool{"acme/grep": true}}
	added, outside := false, 0
	SetReadSeams(t, nil, func(string) {
		if added {
			return
		}
		f, err := os.OpenFile(lock.GuardPath(proj.LockPath()), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Error(err)
			return
		}
		err = lockedfile.TryLock(f)
		f.Close()
		if lockedfile.Busy(err) {
			return // the reader holds the lock: no other command comes between
		}
		// Nobody holds it: another command's mur add runs now, after this read.
		outside++
		added = true
		if _, err := writeLock(ctx, proj, yaml, add); err != nil {
			t.Error(err)
		}
	})
	if _, err := writeLock(ctx, proj, yaml, Transition{Prune: true}); err != nil {
		t.Fatal(err)
	}
	if !added {
		added = true
		if _, err := writeLock(ctx, proj, yaml, add); err != nil {
			t.Fatal(err)
		}
	}
	if got := lockNames(t, proj); got != "acme/grep" || outside != 0 {
		t.Fatalf("the lock pins %q after a mur add, which murmur.yaml declares; %d reads outside the lock", got, outside)
	}
}
