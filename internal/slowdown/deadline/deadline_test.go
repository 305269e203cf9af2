package deadline

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/slowdown"
)

func TestLimitStretches(t *testing.T) {
	t.Setenv(slowdown.Env, "")
	if Limit() != 5*time.Minute {
		t.Errorf("Limit() = %s, want 5m", Limit())
	}
	t.Setenv(slowdown.Env, "4")
	if Limit() != 20*time.Minute {
		t.Errorf("Limit() under %s=4 = %s, want 20m", slowdown.Env, Limit())
	}
}

func TestContextEndsWithTheTest(t *testing.T) {
	t.Parallel()
	var ctx interface{ Err() error }
	t.Run("inner", func(t *testing.T) {
		c := Context(t)
		dl, ok := c.Deadline()
		if !ok || time.Until(dl) > Limit() || time.Until(dl) < Limit()-time.Minute {
			t.Errorf("deadline %v (set %v), want about %s from now", dl, ok, Limit())
		}
		ctx = c
	})
	if ctx.Err() == nil {
		t.Error("the context outlived its test")
	}
}

func TestWaitReturnsOnceTheGroupIsDone(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	wg.Add(1)
	var done atomic.Bool
	go func() {
		defer wg.Done()
		done.Store(true)
	}()
	Wait(t, &wg, "the goroutine")
	if !done.Load() {
		t.Error("Wait returned before the group was done")
	}
}

func TestRecv(t *testing.T) {
	t.Parallel()
	ch := make(chan int, 1)
	ch <- 7
	if got := Recv(t, ch, "seven"); got != 7 {
		t.Errorf("Recv = %d, want 7", got)
	}
}

// fatalTB records the failure a helper reports, and stops its goroutine as t.Fatalf would.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestRecvFailsNamingWhatItWaitedFor(t *testing.T) {
	t.Parallel()
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		recvWithin(f, make(chan int), "the guest's first line", time.Millisecond)
		t.Error("recvWithin returned without a value")
	}()
	<-done
	if f.msg != "the guest's first line did not come within 1ms" {
		t.Errorf("failure %q", f.msg)
	}
}
