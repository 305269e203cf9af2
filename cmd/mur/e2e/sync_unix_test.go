//go:build unix

package e2e

import "syscall"

// syncDisks flushes every file system's writeback, so that the next timed run starts with none
// of the last one's in flight.
func syncDisks() { syscall.Sync() }
