package main

import (
	"context"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/murmur-nexus/mur/internal/errs"
)

// exitInterrupted is the status of a command stopped by SIGINT or SIGTERM, as shells report a
// process killed by SIGINT (128+2).
const exitInterrupted = 130

// interruptGrace is how long a command has, after Ctrl-C, to remove what it has in flight and
// report; the bound is 200 ms. A loaded test machine (MUR_TEST_SLOWDOWN, set by .ci/run)
// stretches it as it stretches the wind-down, so the scripts see the command's own message.
const interruptGrace = 150 * time.Millisecond

// pinGrace is how long, past interruptGrace, a command still waits for a pull to write into
// murmur.lock what it had committed (fetch.WaitForPins): a write of a few milliseconds, unless
// another process holds the lock's file lock.
const pinGrace = 5 * time.Second

// notifyInterrupt returns a context that the first SIGINT or SIGTERM cancels, and the function
// that releases its signal handling.
//
// The signal's default action is given back before the context is cancelled, so a second
// Ctrl-C kills at once however the command winds down, and none can fall between the two.
// Whatever has not returned within grace of the first signal (a compile in wazero, an fsync) is
// abandoned to onGrace: every write mur makes is safe to cut at any instant, and the next command
// or 'mur cache gc' removes a leftover.
func notifyInterrupt(parent context.Context, grace time.Duration, onGrace func()) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
			signal.Stop(sigs)
			return
		}
		signal.Stop(sigs)
		cancel()
		time.Sleep(grace)
		onGrace()
	}()
	return ctx, cancel
}

// graceNote is what main says when a command did not wind down within interruptGrace of Ctrl-C.
// It is process-wide because the signal is: a command that knows better (mur run) replaces it.
var graceNote atomic.Pointer[errs.Error]

func setGraceMessage(e *errs.Error) { graceNote.Store(e) }

func graceMessage() error {
	if e := graceNote.Load(); e != nil {
		return e
	}
	return errs.New(errs.Interrupted, "stopped by a signal before the command could wind down; what had finished stays pinned, and 'mur cache gc' removes what was left in flight")
}
