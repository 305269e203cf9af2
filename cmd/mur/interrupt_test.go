//go:build unix

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/slowdown"
)

// interruptChildEnv makes the test binary a stand-in for mur: it installs notifyInterrupt as
// main does, then runs a command that notices the interrupt and never finishes winding down,
// which is what a wazero compile or a stuck fsync looks like from main.
const interruptChildEnv = "MUR_TEST_INTERRUPT_CHILD"

func interruptChild(grace string) {
	g, err := time.ParseDuration(grace)
	if err != nil {
		panic(err)
	}
	ctx, _ := notifyInterrupt(context.Background(), g, func() {
		fmt.Println("grace over")
		os.Exit(exitInterrupted)
	})
	fmt.Println("ready")
	<-ctx.Done()
	fmt.Println("winding down")
	time.Sleep(time.Hour)
	os.Exit(1)
}

// startInterruptChild re-runs the test binary as interruptChild and returns it with its stdout's
// lines.
func startInterruptChild(t *testing.T, test, grace string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), interruptChildEnv+"="+grace)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, lines
}

// await reads lines until want; the bound only keeps a broken build from hanging the suite.
func await(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	deadline := time.After(slowdown.Scale(60 * time.Second))
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the child's stdout closed before %q", want)
			}
			if l == want {
				return
			}
		case <-deadline:
			t.Fatalf("the child never printed %q", want)
		}
	}
}

// exitOf waits for cmd and says how it ended; the bound only keeps a broken build from hanging
// the suite, since the child's grace is an hour where the test does not want it to end.
func exitOf(t *testing.T, cmd *exec.Cmd) syscall.WaitStatus {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.Sys().(syscall.WaitStatus)
	case <-time.After(slowdown.Scale(60 * time.Second)):
		t.Fatal("the child was still running long after the signal")
		return 0
	}
}

func TestSecondInterruptKillsAtOnce(t *testing.T) {
	t.Parallel()
	if g := os.Getenv(interruptChildEnv); g != "" {
		interruptChild(g)
	}
	for _, first := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(first.String(), func(t *testing.T) {
			// The grace period is an hour, so only the second signal can end the child.
			cmd, lines := startInterruptChild(t, "TestSecondInterruptKillsAtOnce", "1h")
			await(t, lines, "ready")
			if err := cmd.Process.Signal(first); err != nil {
				t.Fatal(err)
			}
			// The command hears of the first signal only after its default action is back, so
			// the second is sent the moment the child says so, with no sleep in between.
			await(t, lines, "winding down")
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			ws := exitOf(t, cmd)
			if !ws.Signaled() || ws.Signal() != syscall.SIGINT {
				t.Fatalf("after a second Ctrl-C the child ended with %v, want killed by SIGINT", ws)
			}
		})
	}
}

func TestInterruptGraceEndsAStuckWindDown(t *testing.T) {
	t.Parallel()
	if g := os.Getenv(interruptChildEnv); g != "" {
		interruptChild(g)
	}
	cmd, lines := startInterruptChild(t, "TestInterruptGraceEndsAStuckWindDown", "1ms")
	await(t, lines, "ready")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	await(t, lines, "grace over")
	if ws := exitOf(t, cmd); ws.Signaled() || ws.ExitStatus() != exitInterrupted {
		t.Fatalf("after the grace period the child ended with %v, want exit %d", ws, exitInterrupted)
	}
}
