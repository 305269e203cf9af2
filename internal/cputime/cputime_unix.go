//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Self is the CPU this process has taken so far, every thread included.
func Self() time.Duration { return of(syscall.RUSAGE_SELF) }

// Children is the CPU of every child process this one has waited for, and of their waited-for
// children.
func Children() time.Duration { return of(syscall.RUSAGE_CHILDREN) }

func of(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		// getrusage fails only for a bad who or address, neither possible here.
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
