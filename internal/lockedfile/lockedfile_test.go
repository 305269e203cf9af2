package lockedfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/slowdown/deadline"
)

func TestExclusiveLockSerialises(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "x.lock")
	var mu sync.Mutex
	inside, maxInside := 0, 0
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Separate open file descriptions conflict under flock even within one process.
			unlock, err := Lock(context.Background(), p)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside++
			if inside > maxInside {
				maxInside = inside
			}
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			inside--
			mu.Unlock()
			unlock()
		}()
	}
	deadline.Wait(t, &wg, "the lock holders")
	if maxInside != 1 {
		t.Fatalf("%d holders at once", maxInside)
	}
}

func TestLockWaitIsCancellable(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := Lock(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := Lock(ctx, p); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want deadline exceeded", err)
	}
	if _, err := RLock(ctx, p); err == nil {
		t.Fatal("shared lock granted while exclusive held")
	}
}

// TestLockRefusesASymlink: a lock path that is a symlink (planted in a cloned project, say) is
// refused, and nothing is created where it points.
func TestLockRefusesASymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere", "victim")
	os.MkdirAll(filepath.Dir(target), 0o755)
	p := filepath.Join(dir, ".murmur.lock.lck")
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(context.Background(), p); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("Lock through a symlink: %v", err)
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("the symlink's target was created: %v", err)
	}
}
