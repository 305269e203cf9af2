package cas

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/lockedfile"
)

// ingestAged ingests a blob of size bytes and sets its last use to at.
func ingestAged(t *testing.T, s *Store, seed uint64, size int64, at time.Time) digest.Digest {
	t.Helper()
	d, err := s.Ingest(ctx, newPattern(seed, size), size, "")
	if err != nil {
		t.Fatal(err)
	}
	os.Chtimes(s.Path(d), at, at)
	os.Chtimes(filepath.Join(s.Root(), "uses", d.Encoded()), at, at)
	return d
}

func removedDigests(rep GCReport) []digest.Digest {
	var out []digest.Digest
	for _, b := range rep.Blobs {
		out = append(out, b.Digest)
	}
	return out
}

func TestGCKeepsLeasedDigests(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	old := time.Now().Add(-time.Hour)
	leased := ingestAged(t, s, 1, 100, old)
	other := ingestAged(t, s, 2, 100, old)
	l, err := s.NewLease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A digest not in the store yet may be leased too: it is what a pull is about to bring in.
	if err := l.Add(ctx, leased); err != nil {
		t.Fatal(err)
	}
	if err := l.Add(ctx, digest.FromString("coming")); err != nil {
		t.Fatal(err)
	}
	rep, err := s.GC(ctx, GCOptions{OlderThan: 0})
	if err != nil {
		t.Fatal(err)
	}
	if got := removedDigests(rep); !reflect.DeepEqual(got, []digest.Digest{other}) || rep.Leases != 1 || rep.Pinned != 1 {
		t.Fatalf("GC with a lease removed %v (report %+v), want only %s", got, rep, other)
	}
	if !s.Has(leased) {
		t.Fatal("GC removed a leased blob")
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("a second Release: %v", err)
	}
	if err := l.Add(ctx, leased); err == nil {
		t.Fatal("Add after Release succeeded")
	}
	rep, err = s.GC(ctx, GCOptions{OlderThan: 0})
	if err != nil || !reflect.DeepEqual(removedDigests(rep), []digest.Digest{leased}) || rep.Leases != 0 {
		t.Fatalf("GC after the release = %+v, %v", rep, err)
	}
	if names := dirNames(t, filepath.Join(s.Root(), "leases")); len(names) != 0 {
		t.Fatalf("leases/ holds %v after the release", names)
	}
}

// A digest added while a GC is past reading the leases must wait for that GC, so that the caller
// never finds a blob present that the GC is about to remove.
func TestLeaseAddWaitsForRunningGC(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	d := ingestAged(t, s, 3, 100, time.Now().Add(-time.Hour))
	l, err := s.NewLease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	type outcome struct {
		present bool
		err     error
	}
	added := make(chan outcome, 1)
	returnedEarly := false
	_, err = s.GC(ctx, GCOptions{OlderThan: 0, Pinned: func(ctx context.Context) (map[digest.Digest]bool, error) {
		// GC has read the leases: this Add comes too late for it to see.
		go func() {
			err := l.Add(context.Background(), d)
			added <- outcome{s.Has(d), err}
		}()
		select {
		case o := <-added:
			returnedEarly = true
			added <- o
		case <-time.After(300 * time.Millisecond):
		}
		return nil, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	o := <-added
	if returnedEarly || o.err != nil || o.present {
		t.Fatalf("Add returned while GC ran (%v), err %v, and then found the blob present (%v): a caller would pin a blob GC removes", returnedEarly, o.err, o.present)
	}
}

func TestLeaseOfKilledProcessEnds(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	d := ingestAged(t, s, 4, 100, time.Now().Add(-time.Hour))
	cmd := helperCmd(t, "lease", s.Root(), "MUR_CAS_TEST_DIGEST="+d.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "leased\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper said %q, %v", line, err)
	}
	rep, err := s.GC(ctx, GCOptions{OlderThan: 0})
	if err != nil || len(rep.Blobs) != 0 || rep.Leases != 1 {
		t.Fatalf("GC while the helper holds its lease = %+v, %v", rep, err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	// The kernel released the flock with the process: its lease keeps nothing now.
	rep, err = s.GC(ctx, GCOptions{OlderThan: 0})
	if err != nil || !reflect.DeepEqual(removedDigests(rep), []digest.Digest{d}) || rep.Leases != 0 {
		t.Fatalf("GC after the kill = %+v, %v", rep, err)
	}
	if names := dirNames(t, filepath.Join(s.Root(), "leases")); len(names) != 0 {
		t.Fatalf("leases/ holds %v after the killed process's lease was judged", names)
	}
}

func TestGCPinnedIsReadUnderTheLock(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	d := ingestAged(t, s, 5, 100, time.Now().Add(-time.Hour))
	calls := 0
	rep, err := s.GC(ctx, GCOptions{OlderThan: 0, Pinned: func(ctx context.Context) (map[digest.Digest]bool, error) {
		calls++
		// A commit, which shares the GC lock, can't run while Pinned reads.
		tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if unlock, err := lockedfile.RLock(tctx, s.gcLock()); err == nil {
			unlock()
			t.Error("Pinned ran without GC's exclusive lock")
		}
		return map[digest.Digest]bool{d: true}, nil
	}})
	if err != nil || calls != 1 || len(rep.Blobs) != 0 || !s.Has(d) {
		t.Fatalf("GC = %+v, %v (Pinned called %d times)", rep, err, calls)
	}
	boom := errs.New(errs.InvalidLock, "a lock GC can't read")
	if _, err := s.GC(ctx, GCOptions{OlderThan: 0, Pinned: func(context.Context) (map[digest.Digest]bool, error) { return nil, boom }}); !errors.Is(err, errs.InvalidLock) {
		t.Fatalf("GC whose pins can't be read = %v, want the error and nothing removed", err)
	}
	if !s.Has(d) {
		t.Fatal("GC removed a blob although it could not read what is pinned")
	}
}

func TestGCMaxSize(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	now := time.Now()
	at := func(h int) time.Time { return now.Add(-time.Duration(h) * time.Hour) }
	oldest := ingestAged(t, s, 10, 1000, at(50))
	pinned := ingestAged(t, s, 11, 1000, at(40)) // old, but pinned
	older := ingestAged(t, s, 12, 1000, at(30))
	recent := ingestAged(t, s, 13, 1000, at(2))
	newest := ingestAged(t, s, 14, 1000, at(1))
	var evicted []string
	opt := GCOptions{
		Keep: map[digest.Digest]bool{pinned: true}, OlderThan: -1, MaxSize: 2500, DryRun: true, Now: now,
		Evict: func(ctx context.Context, d digest.Digest, dryRun bool) []string {
			if !s.Has(d) {
				t.Errorf("Evict(%s) called after the blob went", d)
			}
			evicted = append(evicted, d.Encoded()[:8]+map[bool]string{true: " dry", false: ""}[dryRun])
			return []string{"derived/" + d.Encoded()}
		},
	}
	dry, err := s.GC(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	want := []digest.Digest{oldest, older, recent}
	if got := removedDigests(dry); !reflect.DeepEqual(got, want) {
		t.Fatalf("a dry run to 2500 bytes would remove %v, want the three least recently used unpinned blobs %v", got, want)
	}
	for _, b := range dry.Blobs {
		if b.Rule != RuleMaxSize || !strings.Contains(b.Reason, "least recently used") || !strings.Contains(b.Reason, "max-size") {
			t.Errorf("blob %s: rule %q, reason %q", b.Digest, b.Rule, b.Reason)
		}
	}
	if len(dry.Derived) != 3 || dry.Kept != 2 || dry.Size != 2000 || dry.OverMaxSize || dry.Freed != 3000 {
		t.Fatalf("dry run report %+v", dry)
	}
	for _, d := range want {
		if !s.Has(d) {
			t.Fatal("the dry run removed a blob")
		}
	}
	opt.DryRun = false
	rep, err := s.GC(ctx, opt)
	if err != nil || !reflect.DeepEqual(removedDigests(rep), want) {
		t.Fatalf("GC to 2500 bytes = %v, %v; want what the dry run said, %v", removedDigests(rep), err, want)
	}
	if !s.Has(pinned) || !s.Has(newest) || s.Has(oldest) || s.Has(older) || s.Has(recent) {
		t.Fatal("GC to a size removed the wrong blobs")
	}
	if len(evicted) != 6 || !strings.HasSuffix(evicted[0], " dry") || strings.HasSuffix(evicted[3], " dry") {
		t.Fatalf("Evict calls %v", evicted)
	}

	// Pinned blobs alone over the cap: GC removes what it may and says the cap is not met.
	rep, err = s.GC(ctx, GCOptions{Keep: map[digest.Digest]bool{pinned: true}, OlderThan: -1, MaxSize: 500})
	if err != nil || !reflect.DeepEqual(removedDigests(rep), []digest.Digest{newest}) || !rep.OverMaxSize || rep.Size != 1000 {
		t.Fatalf("GC below the pinned size = %+v, %v", rep, err)
	}
	if !s.Has(pinned) {
		t.Fatal("GC removed a pinned blob to meet a size")
	}
}

func TestGCAgeThenSize(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	now := time.Now()
	ancient := ingestAged(t, s, 20, 100, now.Add(-90*24*time.Hour))
	a := ingestAged(t, s, 21, 1000, now.Add(-3*time.Hour))
	b := ingestAged(t, s, 22, 1000, now.Add(-2*time.Hour))
	rep, err := s.GC(ctx, GCOptions{OlderThan: 30 * 24 * time.Hour, MaxSize: 1500, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if got := removedDigests(rep); !reflect.DeepEqual(got, []digest.Digest{ancient, a}) || rep.Blobs[0].Rule != RuleOlderThan || rep.Blobs[1].Rule != RuleMaxSize {
		t.Fatalf("GC removed %+v", rep.Blobs)
	}
	if !s.Has(b) {
		t.Fatal("GC removed the most recently used blob")
	}
	if !strings.Contains(rep.Blobs[0].Reason, "older-than") {
		t.Fatalf("reason %q", rep.Blobs[0].Reason)
	}
}

func TestRoots(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	dir := t.TempDir()
	lockA, lockB := filepath.Join(dir, "a", "murmur.lock"), filepath.Join(dir, "b", "murmur.lock")
	for _, p := range []string{lockA, lockB} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("lock_version: 3\n"), 0o644)
		if err := s.RegisterRoot(ctx, p); err != nil {
			t.Fatal(err)
		}
		if err := s.RegisterRoot(ctx, p); err != nil {
			t.Fatalf("registering twice: %v", err)
		}
	}
	if err := s.RegisterRoot(ctx, "relative/murmur.lock"); err == nil {
		t.Fatal("a relative root was registered")
	}
	later := time.Now().Add(RootGrace + time.Minute)
	rep, err := s.Roots(ctx, later, false)
	if err != nil || !reflect.DeepEqual(rep.Live, []string{lockA, lockB}) || len(rep.Pruned) != 0 {
		t.Fatalf("Roots = %+v, %v", rep, err)
	}
	os.RemoveAll(filepath.Dir(lockB))
	// Within the grace the root stays: it may be registered for a lock about to be written.
	if rep, err := s.Roots(ctx, time.Now(), false); err != nil || len(rep.Live) != 2 || len(rep.Pruned) != 0 {
		t.Fatalf("Roots within the grace = %+v, %v", rep, err)
	}
	rep, err = s.Roots(ctx, later, true)
	if err != nil || !reflect.DeepEqual(rep.Live, []string{lockA}) || !reflect.DeepEqual(rep.Pruned, []string{lockB}) {
		t.Fatalf("Roots (dry run) after the project went = %+v, %v", rep, err)
	}
	if n := len(dirNames(t, filepath.Join(s.Root(), "roots"))); n != 2 {
		t.Fatalf("a dry run removed a root: %d left", n)
	}
	rep, err = s.Roots(ctx, later, false)
	if err != nil || !reflect.DeepEqual(rep.Pruned, []string{lockB}) {
		t.Fatalf("Roots = %+v, %v", rep, err)
	}
	if n := len(dirNames(t, filepath.Join(s.Root(), "roots"))); n != 1 {
		t.Fatalf("the root of the removed project stayed: %d roots", n)
	}
	// A root written by hand under another name pins nothing and goes.
	os.WriteFile(filepath.Join(s.Root(), "roots", "bogus"), []byte(lockA+"\n"), 0o600)
	if rep, err := s.Roots(ctx, later, false); err != nil || !reflect.DeepEqual(rep.Live, []string{lockA}) {
		t.Fatalf("Roots with a forged entry = %+v, %v", rep, err)
	}
	// The project comes back: registering again restores its root.
	os.MkdirAll(filepath.Dir(lockB), 0o755)
	os.WriteFile(lockB, []byte("lock_version: 3\n"), 0o644)
	s.RegisterRoot(ctx, lockB)
	if rep, err := s.Roots(ctx, later, false); err != nil || len(rep.Live) != 2 {
		t.Fatalf("Roots after re-registering = %+v, %v", rep, err)
	}
}

func TestCommitSyncsRenamesThenSyncsFolder(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	var steps []string
	final := ""
	present := func() string {
		if _, err := os.Stat(final); err == nil {
			return "present"
		}
		return "absent"
	}
	s.durability = atomicfile.Durability{
		Sync: func(f *os.File) error {
			steps = append(steps, "sync "+filepath.Dir(f.Name())+" blob "+present())
			return f.Sync()
		},
		Rename: func(oldpath, newpath string) error {
			steps = append(steps, "rename "+filepath.Dir(oldpath)+" -> "+newpath)
			return os.Rename(oldpath, newpath)
		},
		SyncDir: func(dir string) error {
			steps = append(steps, "syncdir "+dir+" blob "+present())
			return atomicfile.SyncDir(dir)
		},
	}
	content := "durable"
	final = s.Path(digest.FromString(content))
	if _, err := s.Ingest(ctx, strings.NewReader(content), -1, ""); err != nil {
		t.Fatal(err)
	}
	ingest := filepath.Join(s.Root(), "ingest")
	want := []string{
		"sync " + ingest + " blob absent",
		"rename " + ingest + " -> " + final,
		"syncdir " + filepath.Dir(final) + " blob present",
	}
	if !reflect.DeepEqual(steps, want) {
		t.Fatalf("Commit took the steps\n  %s\nwant\n  %s", strings.Join(steps, "\n  "), strings.Join(want, "\n  "))
	}
	// A failed fsync leaves no blob and no temporary file.
	s.durability.Sync = func(*os.File) error { return errors.New("injected fsync failure") }
	if _, err := s.Ingest(ctx, strings.NewReader("not durable"), -1, ""); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("Ingest with a failing fsync = %v", err)
	}
	if s.Has(digest.FromString("not durable")) || len(dirNames(t, ingest)) != 0 {
		t.Fatal("a failed fsync left a blob or a temporary file")
	}
}

// GC says why each blob it kept stayed: a lock pins it, only a pull in flight holds it, or it
// was used more recently than OlderThan.
func TestGCSaysWhyItKept(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	old := time.Now().Add(-time.Hour)
	leasedOnly := ingestAged(t, s, 1, 100, old)
	leasedAndLocked := ingestAged(t, s, 2, 100, old)
	locked := ingestAged(t, s, 3, 100, old)
	recent := ingestAged(t, s, 4, 100, time.Now())
	gone := ingestAged(t, s, 5, 100, old)
	l, err := s.NewLease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	for _, d := range []digest.Digest{leasedOnly, leasedAndLocked} {
		if err := l.Add(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	pins := func(context.Context) (map[digest.Digest]bool, error) {
		return map[digest.Digest]bool{leasedAndLocked: true, locked: true}, nil
	}
	rep, err := s.GC(ctx, GCOptions{OlderThan: 30 * time.Minute, Pinned: pins})
	if err != nil {
		t.Fatal(err)
	}
	if got := removedDigests(rep); !reflect.DeepEqual(got, []digest.Digest{gone}) {
		t.Fatalf("removed %v, want only %s", got, gone)
	}
	if rep.Kept != 4 || rep.Pinned != 3 || rep.InUse != 1 || rep.Recent != 1 {
		t.Fatalf("kept %d (pinned %d, in use %d, recent %d), want 4 (3, 1, 1)", rep.Kept, rep.Pinned, rep.InUse, rep.Recent)
	}
	if !s.Has(recent) || !s.Has(leasedOnly) {
		t.Fatal("GC removed a blob it reported kept")
	}
}

func TestFormatAge(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{720 * time.Hour: "30d", 24 * time.Hour: "1d", 90 * time.Minute: "1h30m0s", 0: "0s", 36 * time.Hour: "36h0m0s"} {
		if got := FormatAge(d); got != want {
			t.Errorf("FormatAge(%s) = %q, want %q", d, got, want)
		}
	}
}
