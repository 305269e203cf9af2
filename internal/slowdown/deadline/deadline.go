// Package deadline gives each thing a test waits for (a command, a guest's run, a channel) a
// deadline of its own, so that a hang fails that one test, naming what it waited for, instead of
// stalling the whole test binary until go test's -timeout kills it with every goroutine's stack.
// The deadline is no margin under test: nothing waited for comes near it, even on a loaded
// machine, and MUR_TEST_SLOWDOWN stretches it like every other margin.
package deadline

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/slowdown"
)

// Limit is how long a test waits for any one thing.
func Limit() time.Duration { return slowdown.Scale(5 * time.Minute) }

// Context returns a context that ends Limit from now, or when t ends.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), Limit())
	t.Cleanup(cancel)
	return ctx
}

// Recv returns the next value from ch, and fails t, naming what it waited for, when none comes
// within Limit.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return recvWithin(t, ch, what, Limit())
}

// Wait waits for wg, and fails t, naming what it waited for, when it is not done within Limit.
func Wait(t testing.TB, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	Recv(t, done, what)
}

func recvWithin[T any](t testing.TB, ch <-chan T, what string, limit time.Duration) T {
	t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s did not come within %s", what, limit)
		panic("unreachable")
	}
}
