package lock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/slowdown/deadline"
)

func TestUpdateWritesAndSkipsNoOps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)

	// A change that leaves a missing lock empty creates nothing.
	must(t, Update(ctx, path, func(l *Lock) error { l.ForgetScope("acme"); return nil }))
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty lock created: %v", err)
	}

	must(t, Update(ctx, path, func(l *Lock) error {
		return l.Upsert("acme/grep", "1.2.0", "any", h(1), "", false)
	}))
	data, err := os.ReadFile(path)
	must(t, err)
	l, err := Parse(data, path)
	must(t, err)
	if e := l.Find("acme/grep"); e == nil || e.SHA256.Any != h(1) {
		t.Fatalf("written lock: %s", data)
	}
	fi, err := os.Stat(path)
	must(t, err)
	if fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v", fi.Mode())
	}

	// The same pin again must not rewrite the file: a rename would give it a new inode.
	must(t, Update(ctx, path, func(l *Lock) error {
		return l.Upsert("acme/grep", "1.2.0", "any", h(1), "", false)
	}))
	fi2, err := os.Stat(path)
	must(t, err)
	if !os.SameFile(fi, fi2) {
		t.Fatal("unchanged lock was rewritten")
	}

	// A hand-written but equivalent lock is rewritten in canonical form, keeping its mode.
	must(t, os.Chmod(path, 0o600))
	hand := "lock_version: 3\nartifacts:\n- {name: acme/grep, resolved_version: 1.2.0, sha256: {any: \"" + h(1) + "\"}}\n"
	must(t, os.WriteFile(path, []byte(hand), 0o600))
	must(t, Update(ctx, path, func(l *Lock) error { return nil }))
	data, err = os.ReadFile(path)
	must(t, err)
	if !bytes.Equal(data, l.Marshal()) {
		t.Fatalf("not canonical:\n%s", data)
	}
	fi, err = os.Stat(path)
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode not kept: %v", fi.Mode())
	}
}

func TestUpdateErrorWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	must(t, Update(ctx, path, func(l *Lock) error {
		return l.Upsert("acme/grep", "1.2.0", "any", h(1), "", false)
	}))
	before, err := os.ReadFile(path)
	must(t, err)
	fi, err := os.Stat(path)
	must(t, err)

	// fn changes the lock, then fails: nothing of the change may reach the disk.
	boom := errs.New(errs.Integrity, "boom")
	err = Update(ctx, path, func(l *Lock) error {
		must(t, l.Upsert("acme/other", "1.0.0", "any", h(2), "", false))
		l.Artifacts = nil
		return boom
	})
	if err != boom {
		t.Fatalf("Update returned %v, want fn's error as is", err)
	}
	// A conflict from Upsert inside fn travels out with its token.
	err = Update(ctx, path, func(l *Lock) error {
		return l.Upsert("acme/grep", "1.3.0", "any", h(3), "", false)
	})
	if !errors.Is(err, errs.LockConflict) {
		t.Fatalf("got %v", err)
	}
	after, err := os.ReadFile(path)
	must(t, err)
	fi2, err := os.Stat(path)
	must(t, err)
	if !bytes.Equal(before, after) || !os.SameFile(fi, fi2) {
		t.Fatal("a failed Update wrote the lock")
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	must(t, err)
	for _, e := range entries {
		if e.Name() != FileName && e.Name() != filepath.Base(GuardPath(path)) {
			t.Errorf("leftover %s", e.Name())
		}
	}

	// fn's error on a missing lock creates nothing either.
	missing := filepath.Join(t.TempDir(), FileName)
	err = Update(ctx, missing, func(l *Lock) error {
		must(t, l.Upsert("acme/x", "1", "any", h(1), "", false))
		return boom
	})
	if err != boom {
		t.Fatal(err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("lock created by a failed Update")
	}
}

func TestUpdateRefusesBrokenLock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), FileName)
	must(t, os.WriteFile(path, []byte("lock_version: 2\n"), 0o644))
	called := false
	err := Update(context.Background(), path, func(l *Lock) error { called = true; return nil })
	if !errors.Is(err, errs.InvalidLock) || called {
		t.Fatalf("err %v, fn called %v", err, called)
	}
	data, _ := os.ReadFile(path)
	if string(data) != "lock_version: 2\n" {
		t.Fatal("broken lock overwritten")
	}
}

func TestUpdateHonoursContext(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), FileName)
	release := make(chan struct{})
	held := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Update(context.Background(), path, func(l *Lock) error {
			close(held)
			<-release
			return nil
		})
	}()
	deadline.Recv(t, held, "the first update taking the lock")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := Update(ctx, path, func(l *Lock) error { t.Error("fn ran without the lock"); return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	close(release)
	must(t, deadline.Recv(t, done, "the first update's end"))
}

func TestConcurrentGoroutinesLoseNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), FileName)
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := Update(context.Background(), path, func(l *Lock) error {
				return l.Upsert(fmt.Sprintf("acme/g%d", i), "1.0.0", "any", h(i+1), "", false)
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	deadline.Wait(t, &wg, "the updates")
	checkEntries(t, path, "acme/g%d", n)
}

// helperEnv switches the test binary into a lock writer, for the cross-process tests.
const helperEnv = "MUR_LOCK_TEST_HELPER"

// TestHelperProcess is not a test: it is the body of the subprocesses started below.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper process only")
	}
	path := os.Getenv("MUR_LOCK_PATH")
	id, _ := strconv.Atoi(os.Getenv("MUR_LOCK_ID"))
	ctx := context.Background()
	switch mode {
	case "upsert":
		// Each process pins several entries in separate updates, so updates interleave.
		for k := range 5 {
			err := Update(ctx, path, func(l *Lock) error {
				return l.Upsert(fmt.Sprintf("p%d/e%d", id, k), "1.0.0", "any", h(id*100+k+1), "", false)
			})
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
		}
	case "forever":
		for k := 0; ; k++ {
			err := Update(ctx, path, func(l *Lock) error {
				return l.Upsert(fmt.Sprintf("acme/f%d", k), "1.0.0", "any", h(k+1), "", false)
			})
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
		}
	}
	os.Exit(0)
}

func helper(t *testing.T, path, mode string, id int) *exec.Cmd {
	cmd := exec.CommandContext(deadline.Context(t), os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "MUR_LOCK_PATH="+path, "MUR_LOCK_ID="+strconv.Itoa(id))
	return cmd
}

func TestConcurrentProcessesLoseNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), FileName)
	const procs = 20
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	for i := range procs {
		cmds[i] = helper(t, path, "upsert", i)
		outs[i] = &bytes.Buffer{}
		cmds[i].Stderr = outs[i]
		must(t, cmds[i].Start())
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("process %d: %v: %s", i, err, outs[i])
		}
	}
	l, err := Read(path)
	must(t, err)
	if len(l.Artifacts) != procs*5 {
		t.Fatalf("%d entries, want %d", len(l.Artifacts), procs*5)
	}
	for i := range procs {
		for k := range 5 {
			e := l.Find(fmt.Sprintf("p%d/e%d", i, k))
			if e == nil || e.SHA256.Any != h(i*100+k+1) {
				t.Fatalf("p%d/e%d lost or wrong: %+v", i, k, e)
			}
		}
	}
}

// TestLockOnDiskIsAlwaysWhole reads the lock without taking the file lock while another process
// rewrites it as fast as it can, then kills that process with SIGKILL at an arbitrary instant.
// Every read, and the file after the kill, must parse.
func TestLockOnDiskIsAlwaysWhole(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), FileName)
	cmd := helper(t, path, "forever", 0)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()

	reads, lastCount := 0, 0
	deadline := time.Now().Add(60 * time.Second)
	for lastCount < 30 {
		if time.Now().After(deadline) {
			t.Fatalf("writer made only %d entries in 60s: %s", lastCount, stderr.String())
		}
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			time.Sleep(time.Millisecond)
			continue
		}
		must(t, err)
		l, err := Parse(data, path)
		if err != nil {
			t.Fatalf("read %d saw a torn lock: %v\n%s", reads, err, data)
		}
		if len(l.Artifacts) < lastCount {
			t.Fatalf("entries went from %d to %d", lastCount, len(l.Artifacts))
		}
		lastCount = len(l.Artifacts)
		reads++
	}
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()
	killed = true

	l, err := Read(path)
	if err != nil {
		t.Fatalf("after SIGKILL: %v", err)
	}
	if len(l.Artifacts) < lastCount {
		t.Fatalf("after SIGKILL %d entries, had seen %d", len(l.Artifacts), lastCount)
	}
	// The kernel released the dead writer's file lock: the next update proceeds at once.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	must(t, Update(ctx, path, func(l *Lock) error {
		return l.Upsert("acme/after", "1", "any", h(999999), "", false)
	}))
	if l, err = Read(path); err != nil || l.Find("acme/after") == nil {
		t.Fatalf("update after kill: %v", err)
	}
}

func checkEntries(t *testing.T, path, format string, n int) {
	t.Helper()
	l, err := Read(path)
	must(t, err)
	if len(l.Artifacts) != n {
		t.Fatalf("%d entries, want %d", len(l.Artifacts), n)
	}
	for i := range n {
		if e := l.Find(fmt.Sprintf(format, i)); e == nil || e.SHA256.Any != h(i+1) {
			t.Fatalf("entry %d lost or wrong: %+v", i, e)
		}
	}
}

func TestUpdateNeverWritesAnUnreadableLock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), FileName)
	must(t, Update(context.Background(), path, func(l *Lock) error {
		return l.Upsert("acme/grep", "1.2.0", "any", h(1), "", false)
	}))
	before, err := os.ReadFile(path)
	must(t, err)
	err = Update(context.Background(), path, func(l *Lock) error {
		l.Artifacts = append(l.Artifacts, Entry{Name: "acme/grep", ResolvedVersion: "2", SHA256: Hashes{Any: h(2)}})
		return nil
	})
	if !errors.Is(err, errs.Internal) || !strings.Contains(err.Error(), "pins acme/grep again") {
		t.Fatalf("got %v", err)
	}
	after, err := os.ReadFile(path)
	must(t, err)
	if !bytes.Equal(before, after) {
		t.Fatal("unreadable lock written")
	}
}

// TestUpdateRefusesASymlinkedGuard: a cloned project may commit .murmur.lock.lck as a symlink;
// Update refuses it and creates nothing where it points.
func TestUpdateRefusesASymlinkedGuard(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.Symlink(target, GuardPath(path)); err != nil {
		t.Fatal(err)
	}
	err := Update(context.Background(), path, func(l *Lock) error { return nil })
	errtest.WantToken(t, err, errs.Denied, GuardPath(path), target)
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("the guard's target was created: %v", err)
	}
}

// On a read-only checkout, where the file lock can't be made, an update that changes nothing
// succeeds, and one that would change the lock fails with the reason it could not.
func TestUpdateReadOnlyAllowsOnlyNoOps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	must(t, Update(ctx, path, func(l *Lock) error {
		return l.Upsert("acme/grep", "1.2.0", "any", h(1), "", false)
	}))
	before, err := os.ReadFile(path)
	must(t, err)
	refused := errs.New(errs.IO, "can't lock for writing")
	if err := updateReadOnly(path, func(l *Lock) error {
		return l.Upsert("acme/grep", "1.2.0", "any", h(1), "", false)
	}, refused); err != nil {
		t.Fatalf("a no-op update on a read-only checkout: %v", err)
	}
	if err := updateReadOnly(path, func(l *Lock) error {
		return l.Upsert("acme/grep", "1.3.0", "any", h(2), "", true)
	}, refused); err != refused {
		t.Fatalf("a change on a read-only checkout: %v, want the lock's refusal", err)
	}
	if err := updateReadOnly(filepath.Join(t.TempDir(), FileName), func(l *Lock) error { return nil }, refused); err != nil {
		t.Fatalf("no lock, and nothing to write: %v", err)
	}
	after, err := os.ReadFile(path)
	must(t, err)
	if !bytes.Equal(before, after) {
		t.Fatal("the lock changed")
	}
}
